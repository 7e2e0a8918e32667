"""Client quotas over the wire: AlterClientQuotas and DescribeClientQuotas (validation, filters,
validate_only, authorization, the metadata log across a restart) and their enforcement (a produce
or fetch over its byte rate gets throttle_time_ms and its connection is muted that long)."""

from __future__ import annotations

import time

from shoal.broker.config import STANDARD_AUTHORIZER
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.alter_client_quotas_request import AlterClientQuotasRequest
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_client_quotas_request import DescribeClientQuotasRequest
from shoal.protocol.generated.metadata_request import MetadataRequest
from tests.unit.broker_harness import (
    RawClient,
    batch,
    create_req,
    fetch_req,
    port,
    produce_req,
    run,
    running_broker,
)

A = AlterClientQuotasRequest
D = DescribeClientQuotasRequest


def alter(*entries: tuple[list[tuple[str, str | None]], list[tuple[str, float | None]]],
          validate_only: bool = False) -> AlterClientQuotasRequest:
    return A(validate_only=validate_only, entries=[A.EntryData(
        entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[A.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops])
        for entity, ops in entries])


def describe(*components: tuple[str, int, str | None], strict: bool = False) -> DescribeClientQuotasRequest:
    return D(strict=strict, components=[D.ComponentData(entity_type=t, match_type=m, match=s)
                                        for t, m, s in components])


def described(resp) -> dict:  # noqa: ANN001
    assert resp.error_code == 0, resp.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in resp.entries}


def test_alter_and_describe_every_version_and_across_a_restart(tmp_path):
    async def go():
        async with running_broker(tmp_path) as broker:
            c = await RawClient.connect(port(broker))
            for v in (0, 1):
                resp = await c.call(ApiKey.ALTER_CLIENT_QUOTAS, v, alter(
                    ([("user", "alice")], [("producer_byte_rate", 1000.0 + v)]),
                    ([("user", None), ("client-id", None)], [("consumer_byte_rate", 2000.0),
                                                            ("request_percentage", 12.5)])))
                assert [(e.error_code, e.error_message) for e in resp.entries] == [(0, None), (0, None)]
                assert [[(x.entity_type, x.entity_name) for x in e.entity] for e in resp.entries] == [
                    [("user", "alice")], [("client-id", None), ("user", None)]]
                got = described(await c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, v, describe()))
                assert got == {(("user", "alice"),): {"producer_byte_rate": 1000.0 + v},
                               (("client-id", None), ("user", None)): {"consumer_byte_rate": 2000.0,
                                                                        "request_percentage": 12.5}}
            # validate_only changes nothing
            resp = await c.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter(
                ([("user", "alice")], [("producer_byte_rate", None)]), validate_only=True))
            assert resp.entries[0].error_code == 0
            got = described(await c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, describe(("user", 0, "alice"),
                                                                                     strict=True)))
            assert got == {(("user", "alice"),): {"producer_byte_rate": 1001.0}}
            # match types: default, specified
            got = described(await c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, describe(("user", 1, None))))
            assert list(got) == [(("client-id", None), ("user", None))]
            got = described(await c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, describe(("client-id", 2, None))))
            assert list(got) == [(("client-id", None), ("user", None))]
            await c.close()
        async with running_broker(tmp_path) as broker:  # the metadata log keeps them
            c = await RawClient.connect(port(broker))
            got = described(await c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, describe()))
            assert got[(("user", "alice"),)] == {"producer_byte_rate": 1001.0}
            resp = await c.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter(
                ([("user", "alice")], [("producer_byte_rate", None)])))
            assert resp.entries[0].error_code == 0
            await c.close()
        async with running_broker(tmp_path) as broker:
            c = await RawClient.connect(port(broker))
            got = described(await c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, describe(("user", 2, None))))
            assert (("user", "alice"),) not in got
            await c.close()
    run(go())


def test_errors_are_kafkas(tmp_path):
    async def go():
        async with running_broker(tmp_path) as broker:
            c = await RawClient.connect(port(broker))
            resp = await c.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter(
                ([("user", "a")], [("producer_byte_rate", 1.5)]),
                ([("topic", "t")], [("producer_byte_rate", 1.0)]),
                ([("client-id", "c")], [("bogus", 1.0)]),
                ([("user", "b")], [("consumer_byte_rate", 10.0)])))
            assert [(e.error_code, e.error_message) for e in resp.entries] == [
                (ErrorCode.INVALID_REQUEST, "producer_byte_rate cannot be a fractional value."),
                (ErrorCode.INVALID_REQUEST, "Unhandled client quota entity type: topic"),
                (ErrorCode.INVALID_REQUEST, "Invalid configuration key bogus"),
                (0, None)]
            resp = await c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, describe(("user", 0, None)))
            assert (resp.error_code, resp.error_message, resp.entries) == (
                ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null.", None)
            resp = await c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, describe(("topic", 2, None)))
            assert (resp.error_code, resp.error_message) == (ErrorCode.UNSUPPORTED_VERSION,
                                                             "Unsupported entity type topic")
            await c.close()
    run(go())


def test_an_authorizer_denies_without_cluster_configs_access(tmp_path):
    async def go():
        async with running_broker(tmp_path, **{"authorizer.class.name": STANDARD_AUTHORIZER}) as broker:
            c = await RawClient.connect(port(broker))  # User:ANONYMOUS, no ACLs
            resp = await c.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter(
                ([("user", "a")], [("producer_byte_rate", 10.0)])))
            assert [(e.error_code, e.error_message, [(x.entity_type, x.entity_name) for x in e.entity])
                    for e in resp.entries] == [
                (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", [("user", "a")])]
            resp = await c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, describe())
            assert (resp.error_code, resp.entries) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
            assert broker.metadata.quotas.describe([], False) == []
            await c.close()
    run(go())


def test_produce_over_its_byte_rate_is_throttled_and_muted(tmp_path):
    async def go():
        async with running_broker(tmp_path) as broker:
            c = await RawClient.connect(port(broker))
            await c.call(ApiKey.CREATE_TOPICS, 4, create_req("t"))
            # the raw client's id is "raw-test"; another client id is not limited
            resp = await c.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter(
                ([("client-id", "raw-test")], [("producer_byte_rate", 10_000.0)])))
            assert resp.entries[0].error_code == 0
            records = batch(100, size=1000)  # ~100 KB against 10 KB/s over a 10 s window
            resp = await c.call(ApiKey.PRODUCE, 9, produce_req("t", 0, records))
            assert resp.responses[0].partition_responses[0].error_code == 0
            throttle = resp.throttle_time_ms
            # O = size / 10 s, X = (O - T) / T * 10 s
            expected = ((len(records) + 100) / 10 - 10_000) / 10_000 * 10_000
            assert abs(throttle - expected) < 300, (throttle, expected)
            # the connection is muted: the next request is answered once the throttle time has passed
            started = time.monotonic()
            await c.call(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
            assert time.monotonic() - started >= throttle / 1000 - 0.05
            await c.close()
            # removing the quota ends throttling
            c = await RawClient.connect(port(broker))
            await c.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter(([("client-id", "raw-test")],
                                                                [("producer_byte_rate", None)])))
            resp = await c.call(ApiKey.PRODUCE, 9, produce_req("t", 0, records))
            assert resp.throttle_time_ms == 0
            await c.close()
    run(go())


def test_fetch_over_its_byte_rate_returns_no_data_and_is_throttled(tmp_path):
    async def go():
        async with running_broker(tmp_path) as broker:
            c = await RawClient.connect(port(broker))
            await c.call(ApiKey.CREATE_TOPICS, 4, create_req("t"))
            for _ in range(3):
                await c.call(ApiKey.PRODUCE, 9, produce_req("t", 0, batch(40, size=1000)))
            resp = await c.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter(
                ([("user", None)], [("consumer_byte_rate", 5_000.0)])))  # ANONYMOUS is a user too
            assert resp.entries[0].error_code == 0
            # a fetch never asks for more than one window can take: 5000 * 10 bytes, so the first
            # batch (~41 KB) comes alone and within the quota...
            resp = await c.call(ApiKey.FETCH, 11, fetch_req("t", 0, 0))
            assert resp.throttle_time_ms == 0
            part = resp.responses[0].partitions[0]
            assert part.records and len(part.records) < 50_000
            # ...and the next one goes over: no data, throttle time, and the bytes are not counted
            resp = await c.call(ApiKey.FETCH, 11, fetch_req("t", 0, 40))
            assert resp.throttle_time_ms > 0 and resp.responses == []
            started = time.monotonic()
            await c.call(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
            assert time.monotonic() - started >= resp.throttle_time_ms / 1000 - 0.05
            await c.close()
    run(go())


def test_request_percentage_counts_handler_time(tmp_path):
    async def go():
        async with running_broker(tmp_path) as broker:
            c = await RawClient.connect(port(broker))
            resp = await c.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter(
                ([("client-id", "raw-test")], [("request_percentage", 1e-9)])))
            assert resp.entries[0].error_code == 0
            throttles = []
            for _ in range(5):
                resp = await c.call(ApiKey.METADATA, 9, MetadataRequest(topics=None))
                throttles.append(resp.throttle_time_ms)
                if resp.throttle_time_ms:
                    break
            # 1e-9 % is 10 fs of handler time per second: any request goes over (a Metadata handler can run in
            # a few microseconds, so a larger quota made this depend on the machine); capped at one window
            assert 0 < throttles[-1] <= 1000
            await c.close()
    run(go())
