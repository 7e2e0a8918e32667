"""Dynamic group configs over real sockets: IncrementalAlterConfigs and DescribeConfigs on GROUP
resources, kept across a restart, and a consumer group's heartbeats following its own settings.
(Kafka's answers, side by side: tests/reference/test_describe_configs_diff.py.)"""

from __future__ import annotations

import asyncio

from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from shoal.protocol.generated.describe_configs_request import DescribeConfigsRequest
from shoal.protocol.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest as Req
from tests.unit.broker_harness import RawClient, create_req, port, run, running_broker

GROUP = 32


def _alter(configs: dict[str, str | None], group: str = "g1", validate_only: bool = False) -> Req:
    return Req(resources=[Req.AlterConfigsResource(resource_type=GROUP, resource_name=group, configs=[
        Req.AlterableConfig(name=k, config_operation=1 if v is None else 0, value=v) for k, v in configs.items()])],
        validate_only=validate_only)


async def _describe(c: RawClient, group: str = "g1") -> dict[str, tuple[str, int]]:
    resp = await c.call(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=GROUP, resource_name=group,
                                                       configuration_keys=None)]))
    return {e.name: (e.value, e.config_source) for e in resp.results[0].configs}


async def _join(c: RawClient, group: str) -> int:
    from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest

    for _ in range(100):  # the offsets topic is made on the first lookup
        fc = await c.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
        if fc.coordinators[0].error_code == 0:
            break
        await asyncio.sleep(0.05)
    resp = await c.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, ConsumerGroupHeartbeatRequest(
        group_id=group, member_id="m-" + group, member_epoch=0, rebalance_timeout_ms=30000,
        subscribed_topic_names=["t"], topic_partitions=[]))
    assert resp.error_code == 0, resp
    return resp.heartbeat_interval_ms


def test_group_configs_round_trip_apply_and_survive_a_restart(tmp_path):
    async def go():
        async with running_broker(tmp_path) as broker:
            c = await RawClient.connect(port(broker))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            assert (await _describe(c))["consumer.heartbeat.interval.ms"] == ("5000", 5)  # the broker's, DEFAULT
            checked = await c.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, _alter(
                {"consumer.heartbeat.interval.ms": "8000"}, validate_only=True))
            assert checked.responses[0].error_code == 0
            assert (await _describe(c))["consumer.heartbeat.interval.ms"] == ("5000", 5)  # only validated
            resp = await c.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, _alter({"consumer.heartbeat.interval.ms": "8000"}))
            assert resp.responses[0].error_code == 0
            bad = await c.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, _alter({"consumer.heartbeat.interval.ms": "1"}))
            assert (bad.responses[0].error_code, bad.responses[0].error_message) == (
                40, "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive.")
            assert (await _describe(c))["consumer.heartbeat.interval.ms"] == ("8000", 8)  # GROUP_CONFIG
            assert await _join(c, "g1") == 8000
            assert await _join(c, "g2") == 5000
        async with running_broker(tmp_path) as broker:  # the same data: the override is in the metadata log
            c = await RawClient.connect(port(broker))
            assert (await _describe(c))["consumer.heartbeat.interval.ms"] == ("8000", 8)
            await c.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, _alter({"consumer.heartbeat.interval.ms": None}))
            assert (await _describe(c))["consumer.heartbeat.interval.ms"] == ("5000", 5)
            assert broker.metadata.group_configs == {}
    run(go())
