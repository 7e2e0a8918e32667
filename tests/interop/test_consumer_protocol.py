"""KIP-848 against a real shoal broker: confluent-kafka (librdkafka) consumers with
`group.protocol=consumer`, each in its own process (tests/interop/group_helpers).

One consumer, then three, on a 6-partition topic: every partition owned by exactly one consumer,
every record consumed once; a consumer that closes leaves and its partitions move; offsets
committed by the group are where a new consumer of the group resumes.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from shoal.protocol.framing import decode_response_header, encode_request, response_header_version
from shoal.protocol.generated import api_spec
from shoal.protocol.generated.api_keys import ApiKey
from tests.interop.group_helpers import (
    FAST_CONSUMER_GROUP_TIMERS,
    Member,
    assert_partitioned,
    committed_offsets,
    create_topic,
    members,  # noqa: F401 - fixture
    produce,
    wait_settled,
    wait_until,
)

PARTS = 6
BROKER = FAST_CONSUMER_GROUP_TIMERS
CONF = {"group.protocol": "consumer", "max.poll.interval.ms": 15000}


def _consumed(ms: list[Member]) -> Counter[tuple[str, int, int]]:
    return Counter(r for m in ms for r in m.records)  # type: ignore[misc]


def _describe(bootstrap: str, group: str) -> object:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)


@pytest.mark.parametrize("nodes", [1, 3], ids=["1node", "3nodes"])
def test_consumer_protocol_join_rebalance_leave_and_resume(shoal_factory, members, nodes):  # noqa: F811
    shoal = shoal_factory(nodes=nodes, overrides=BROKER)
    bs, topic, group = shoal.bootstrap, "kip848", "g848"
    create_topic(bs, topic, PARTS)
    everything = {(topic, p) for p in range(PARTS)}
    produce(bs, topic, PARTS, 60)

    first = members.start("m0", "confluent", bs, group, [topic], CONF, commit=True)
    wait_settled([first], everything, 30)
    wait_until(lambda: len(first.records) >= 60, 30, "m0 consumed the first 60 records")

    ms = [first] + [members.start(f"m{i}", "confluent", bs, group, [topic], CONF, commit=True) for i in (1, 2)]
    wait_settled(ms, everything, 45)
    # An exact cover can be a passing one (a partition revoked by one member and taken by another while a
    # third still has one to give up): wait for the uniform assignor's target, two each.
    wait_until(lambda: all(len(m.assignment) == 2 for m in ms), 30, "two partitions each",
               detail=lambda: {m.name: m.assignment for m in ms})
    assert_partitioned({m.name: m.assignment for m in ms}, everything)
    desc = _describe(bs, group)
    assert desc.state.name == "STABLE", desc.state  # type: ignore[attr-defined]
    assert len(desc.members) == 3  # type: ignore[attr-defined]

    produce(bs, topic, PARTS, 60, start=60)
    wait_until(lambda: len(_consumed(ms)) >= 120, 30, "the group consumed 120 records")

    # A consumer that closes leaves the group (epoch -1): its partitions move to the others.
    first.close()
    rest = ms[1:]
    wait_settled(rest, everything, 30)
    wait_until(lambda: all(len(m.assignment) == 3 for m in rest), 30, "three partitions each",
               detail=lambda: {m.name: m.assignment for m in rest})
    produce(bs, topic, PARTS, 60, start=120)
    wait_until(lambda: len(_consumed(ms)) >= 180, 30, "the group consumed 180 records")
    consumed = _consumed(ms)
    assert len(consumed) == 180 and set(consumed.values()) == {1}, "a record consumed twice"
    wait_until(lambda: sum(committed_offsets(bs, group).values()) == 180, 20, "all offsets committed")

    # Offsets committed under member epochs are where a new consumer of the group resumes.
    for m in rest:
        m.close()
    produce(bs, topic, PARTS, 12, start=180)
    late = members.start("m3", "confluent", bs, group, [topic], CONF, commit=True)
    wait_until(lambda: len(late.records) >= 12, 30, "m3 consumed the 12 new records")
    assert sorted(o for _, _, o in late.records) == sorted([30 + i // PARTS for i in range(12)])  # type: ignore[misc]
    late.close()


def _members_by_client(bootstrap: str, group: str) -> tuple[int, str, dict[str, str]]:
    """(coordinator node id, state, client id -> member id) from ConsumerGroupDescribe."""
    desc = _describe(bootstrap, group)
    return (desc.coordinator.id, desc.state.name,  # type: ignore[attr-defined]
            {m.client_id: m.member_id for m in desc.members})  # type: ignore[attr-defined]


def test_consumer_group_survives_coordinator_failover_and_kill9(shoal_factory, members):  # noqa: F811
    broker = shoal_factory(nodes=3, overrides=BROKER)
    bs, topic, group = broker.bootstrap, "kip848-fo", "g848-fo"
    create_topic(bs, topic, PARTS, replication=3)
    everything = {(topic, p) for p in range(PARTS)}
    ms = [members.start(f"fo{i}", "confluent", bs, group, [topic], CONF, commit=True) for i in range(2)]
    wait_settled(ms, everything, 45)
    produce(bs, topic, PARTS, 60)
    wait_until(lambda: len(_consumed(ms)) >= 60, 30, "first 60 records consumed")
    wait_until(lambda: sum(committed_offsets(bs, group).values()) == 60, 20, "first 60 committed")
    coordinator, state, ids = _members_by_client(bs, group)
    assert state == "STABLE" and set(ids) == {"fo0", "fo1"}

    # The coordinating node stops: another loads the group from __consumer_offsets; the members
    # carry on with their member ids and epochs (no rejoin), from their commits.
    broker.command(f"stop-node {coordinator}")
    live_bs = ",".join(f"127.0.0.1:{p}" for n, p in broker.ports.items() if n != coordinator)
    moved = wait_until(lambda: (v := _members_by_client(live_bs, group))[0] != coordinator and v, 30,
                       "a new coordinator")
    assert moved[2] == ids, "the group came back with other members"
    produce(live_bs, topic, PARTS, 60, start=60)
    wait_until(lambda: len(_consumed(ms)) >= 120, 60, "next 60 records consumed after the fail-over")
    wait_settled(ms, everything, 30)
    assert _members_by_client(live_bs, group)[2] == ids

    # kill -9 of the whole broker: state is the replay of the log.
    broker.restart(hard=True)
    wait_until(lambda: _members_by_client(broker.bootstrap, group)[2] == ids, 30, "the group reloaded")
    produce(broker.bootstrap, topic, PARTS, 60, start=120)
    wait_until(lambda: len(_consumed(ms)) >= 180, 60, "records consumed after the restart")
    consumed = _consumed(ms)
    assert set(consumed) == {(topic, i % PARTS, i // PARTS) for i in range(180)}
    assert set(consumed.values()) == {1}, sorted(r for r, n in consumed.items() if n > 1)
    assert all(m.alive for m in ms)


def _call(bootstrap: str, key: ApiKey, version: int, request: Any) -> Any:
    """One request on its own connection to the first bootstrap broker, its decoded response."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(encode_request(key, version, 1, "interop", request.encode(version)))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        buf = s.recv(size, socket.MSG_WAITALL)
    _, offset = decode_response_header(buf, response_header_version(key, version))
    return api_spec(key).response.decode(memoryview(buf)[offset:], version)


def _describe_raw(bootstrap: str, group: str) -> Any:
    """ConsumerGroupDescribe of ``group``, asked of its coordinator (found first, as a client does)."""
    find = api_spec(ApiKey.FIND_COORDINATOR).request(key_type=0, coordinator_keys=[group])
    coordinator = _call(bootstrap, ApiKey.FIND_COORDINATOR, 4, find).coordinators[0]
    assert coordinator.error_code == 0, coordinator
    req = api_spec(ApiKey.CONSUMER_GROUP_DESCRIBE).request(group_ids=[group])
    return _call(f"{coordinator.host}:{coordinator.port}", ApiKey.CONSUMER_GROUP_DESCRIBE, 0, req).groups[0]


@pytest.mark.parametrize("nodes", [1, 3], ids=["1node", "3nodes"])
def test_regex_subscription_takes_in_a_topic_created_later(shoal_factory, members, nodes):  # noqa: F811
    """librdkafka subscribes to "^re-.*": with ConsumerGroupHeartbeat v1 it sends the pattern as
    SubscribedTopicRegex, in parentheses ("(^re-.*)": it joins its regexes with "|"), and no names
    (as ConsumerGroupDescribe shows); the broker resolves it, also for a topic created while the
    group runs."""
    shoal = shoal_factory(nodes=nodes, overrides=BROKER)
    bs, group = shoal.bootstrap, "g848-re"
    create_topic(bs, "re-early", 2)
    create_topic(bs, "other", 1)
    produce(bs, "re-early", 2, 10)
    m = members.start("rx", "confluent", bs, group, ["^re-.*"], CONF)
    wait_until(lambda: m.assignment == {("re-early", 0), ("re-early", 1)}, 30, "the matching topic assigned")
    wait_until(lambda: len(m.records) >= 10, 30, "the records of re-early")
    described = _describe_raw(bs, group)
    assert [(x.subscribed_topic_regex, x.subscribed_topic_names) for x in described.members] == [("(^re-.*)", [])]

    epoch = described.group_epoch
    create_topic(bs, "re-late", 3)
    produce(bs, "re-late", 3, 9)
    wait_until(lambda: {t for t, _ in m.assignment} == {"re-early", "re-late"}, 45, "the topic created later")
    wait_until(lambda: sum(1 for t, _, _ in m.records if t == "re-late") >= 9, 30,  # type: ignore[misc]
               "the records of re-late")
    assert _describe_raw(bs, group).group_epoch > epoch
    assert not any(t == "other" for t, _ in m.assignment)
    m.close()


def test_consumer_protocol_disabled_by_config_answers_as_kafka(shoal_factory):
    """group.coordinator.rebalance.protocols=classic. Apache Kafka 4.4 so configured (checked) still
    advertises ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) in ApiVersions and answers
    them UNSUPPORTED_VERSION; librdkafka with group.protocol=consumer then raises a fatal error."""
    from confluent_kafka import Consumer, KafkaError

    shoal = shoal_factory(overrides={"group.coordinator.rebalance.protocols": "classic"})
    bs = shoal.bootstrap
    versions = _call(bs, ApiKey.API_VERSIONS, 3, api_spec(ApiKey.API_VERSIONS).request(
        client_software_name="interop", client_software_version="1"))
    advertised = {a.api_key for a in versions.api_keys}
    assert {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE} <= advertised
    heartbeat = api_spec(ApiKey.CONSUMER_GROUP_HEARTBEAT).request(
        group_id="g", member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout_ms=1000,
        subscribed_topic_names=["t"], topic_partitions=[])
    r = _call(bs, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat)
    assert (r.error_code, r.error_message) == (35, None)
    assert _describe_raw(bs, "g").error_code == 35

    create_topic(bs, "t848-off", 1)
    errors: list[Any] = []
    c = Consumer({"bootstrap.servers": bs, "group.id": "g848-off", "group.protocol": "consumer",
                  "error_cb": errors.append})
    try:
        c.subscribe(["t848-off"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not errors:
            msg = c.poll(0.5)
            if msg is not None and msg.error():
                errors.append(msg.error())
        assert errors, "librdkafka reported nothing"
        err = errors[0]
        assert err.code() == KafkaError._FATAL and "API version not supported" in err.str(), err
    finally:
        c.close()
