"""shoal's client with ``group.protocol=consumer`` (KIP-848) against Apache Kafka 4.x and shoal
(``either_broker``, and shoal on three nodes): members share a topic's partitions exactly, every record is consumed once while
members join and leave, a static member gets its partitions back after a restart, committed offsets
are resumed, and a pattern subscription (resolved by the broker) takes in a topic created later.

Kafka's consumer groups heartbeat every 5 s by default (group.consumer.heartbeat.interval.ms), and a
partition moves in two heartbeats (the owner revokes, then the new owner gets it), so the waits here
are generous; each is bounded."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from shoal.client import AdminClient, AIOConsumer, Consumer, NewTopic, Producer, TopicPartition
from shoal.testing.process import BrokerProcess
from tests.reference.fixtures import COMMON_PROPERTIES, Reference

pytestmark = pytest.mark.timeout(300)

WAIT = 90.0  # seconds for a group to settle


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def make_topic(bs: str, name: str, partitions: int) -> None:
    with AdminClient(bootstrap_servers=bs) as admin:
        errors = admin.create_topics([NewTopic(name, partitions, 1)])
    assert all(e is None for e in errors.values()), errors


def produce(bs: str, topic: str, partitions: int, per_partition: int, tag: str) -> set[bytes]:
    p = Producer(bootstrap_servers=bs, linger_ms=5)
    values = set()
    try:
        futures = []
        for part in range(partitions):
            for i in range(per_partition):
                v = f"{tag}-{part}-{i}".encode()
                values.add(v)
                futures.append(p.send(topic, v, partition=part))
        p.flush(30)
        for f in futures:
            f.result(10)
    finally:
        p.close()
    return values


def member(bs: str, group: str, **cfg: Any) -> Consumer:
    return Consumer(bootstrap_servers=bs, group_id=group, group_protocol="consumer",
                    auto_offset_reset="earliest", **cfg)


class Log:
    """Every record the members returned, as (topic, partition, offset) -> how many times."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, int, int], int] = {}
        self.values: set[bytes] = set()

    def poll(self, consumers: Iterable[Consumer], timeout_ms: int = 100) -> None:
        for c in consumers:
            for recs in c.poll(timeout_ms).values():
                for r in recs:
                    key = (r.topic, r.partition, r.offset)
                    self.seen[key] = self.seen.get(key, 0) + 1
                    assert r.value is not None
                    self.values.add(r.value)

    def duplicates(self) -> list[tuple[str, int, int]]:
        return sorted(k for k, n in self.seen.items() if n > 1)


def poll_until(consumers: list[Consumer], log: Log, done: Callable[[], bool], what: str,
               timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: assignments "
                                 f"{[sorted(c.assignment()) for c in consumers]}")
        log.poll(consumers)


def exact_cover(consumers: list[Consumer], topic: str, partitions: int, sizes: set[int] | None = None) -> bool:
    owned = [c.assignment() for c in consumers]
    every = [tp for a in owned for tp in a]
    if sorted(every) != [TopicPartition(topic, p) for p in range(partitions)]:
        return False
    return sizes is None or {len(a) for a in owned} <= sizes


def close_all(consumers: list[Consumer]) -> None:
    for c in consumers:
        try:
            c.close()
        except Exception:  # noqa: BLE001 - a failed close must not hide the test's own failure
            pass


@pytest.fixture(scope="module")
def shoal_three_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("shoal-3n") / "data", 3, COMMON_PROPERTIES)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(params=["shoal", "shoal-3", "kafka"])
def either_broker(request: pytest.FixtureRequest) -> Reference:
    """shoal on one node and on three (coordinator and partition leaders on different nodes), then
    Apache Kafka 4.x: the same test body runs against each."""
    if request.param == "kafka":
        cluster = request.getfixturevalue("kafka_broker")
        return Reference("kafka", cluster.bootstrap_servers, cluster.version, cluster)
    proc = request.getfixturevalue("shoal_three_nodes" if request.param == "shoal-3" else "shoal_reference")
    return Reference(request.param, proc.bootstrap_servers, "shoal", proc)


# Tests where the node layout does not change what is checked run on one shoal node and Kafka only (CI
# time); sharing partitions, static members and the online upgrade keep the 3-node column.
ONE_NODE = pytest.mark.parametrize("either_broker", ["shoal", "kafka"], indirect=True)


def test_members_share_partitions_exactly_and_consume_every_record_once(either_broker):
    bs, topic, group = either_broker.bootstrap_servers, unique("kip848"), unique("g848")
    make_topic(bs, topic, 6)
    expected = produce(bs, topic, 6, 10, "one")
    log = Log()
    c1 = member(bs, group, auto_commit_interval_ms=1000)
    consumers = [c1]
    try:
        c1.subscribe([topic])
        poll_until(consumers, log, lambda: exact_cover(consumers, topic, 6) and expected <= log.values,
                   "one member to own all 6 partitions and read every record")
        assert c1.group_generation[0] > 0 and c1.group_generation[1]
        membership = c1._core.coordinator  # the member epoch came from ConsumerGroupHeartbeat answers
        assert type(membership).__name__ == "ConsumerMember" and membership.member_epoch > 0
        consumers += [member(bs, group, auto_commit_interval_ms=1000) for _ in range(2)]
        for c in consumers[1:]:
            c.subscribe([topic])
        poll_until(consumers, log, lambda: exact_cover(consumers, topic, 6, {2}), "3 members with 2 partitions each")
        expected |= produce(bs, topic, 6, 10, "three")
        poll_until(consumers, log, lambda: expected <= log.values, "the records produced for 3 members")
        leaver = consumers.pop()
        gone = leaver.assignment()
        leaver.close()
        poll_until(consumers, log, lambda: exact_cover(consumers, topic, 6, {3}), "2 members with 3 partitions each")
        assert gone <= consumers[0].assignment() | consumers[1].assignment()
        expected |= produce(bs, topic, 6, 10, "two")
        poll_until(consumers, log, lambda: expected <= log.values, "the records produced for 2 members")
        assert log.duplicates() == [], "records consumed twice"
        assert len(log.seen) == 180 and log.values == expected
    finally:
        close_all(consumers)


def test_static_member_restarting_gets_its_partitions_back(either_broker):
    bs, topic, group = either_broker.bootstrap_servers, unique("kip848-static"), unique("g848s")
    make_topic(bs, topic, 4)
    log = Log()
    a = member(bs, group, group_instance_id="static-a")
    b = member(bs, group, group_instance_id="static-b")
    consumers = [a, b]
    try:
        for c in consumers:
            c.subscribe([topic])
        poll_until(consumers, log, lambda: exact_cover(consumers, topic, 4, {2}), "2 static members with 2 each")
        mine, theirs = a.assignment(), b.assignment()
        epoch_b = b.group_generation[0]
        a.close()  # a static member leaves with epoch -2: the broker keeps its place for the session
        consumers = [b]
        a2 = member(bs, group, group_instance_id="static-a")
        consumers = [a2, b]
        a2.subscribe([topic])
        poll_until(consumers, log, lambda: a2.assignment() == mine, "the restarted static member's partitions")
        log.poll(consumers)
        assert b.assignment() == theirs
        assert b.group_generation[0] == epoch_b or b.assignment() == theirs
    finally:
        close_all(consumers)


@ONE_NODE
def test_committed_offsets_are_resumed_by_the_next_member(either_broker):
    bs, topic, group = either_broker.bootstrap_servers, unique("kip848-commit"), unique("g848c")
    make_topic(bs, topic, 2)
    first = produce(bs, topic, 2, 5, "first")
    log = Log()
    c = member(bs, group, enable_auto_commit=False)
    try:
        c.subscribe([topic])
        poll_until([c], log, lambda: first <= log.values, "the first records")
        c.commit_sync()
        committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert {tp.partition: om.offset for tp, om in committed.items() if om is not None} == {0: 5, 1: 5}
    finally:
        c.close()
    second = produce(bs, topic, 2, 3, "second")
    log2 = Log()
    c2 = member(bs, group, enable_auto_commit=False)
    try:
        c2.subscribe([topic])
        poll_until([c2], log2, lambda: second <= log2.values, "the records after the committed offsets")
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            log2.poll([c2])
        assert log2.values == second, "resumed before the committed offsets"
    finally:
        c2.close()


@ONE_NODE
def test_pattern_subscription_takes_in_a_topic_created_later(either_broker):
    bs, prefix, group = either_broker.bootstrap_servers, unique("kip848re"), unique("g848r")
    early, late = f"{prefix}-early", f"{prefix}-late"
    make_topic(bs, early, 1)
    expected = produce(bs, early, 1, 3, "early")
    log = Log()
    c = member(bs, group)
    try:
        c.subscribe(pattern=f"{prefix}-.*")
        poll_until([c], log, lambda: expected <= log.values, "the records of the topic matching at first")
        make_topic(bs, late, 2)
        expected |= produce(bs, late, 2, 3, "late")
        poll_until([c], log, lambda: expected <= log.values, "the records of the topic created later", timeout=120)
        assert {tp.topic for tp in c.assignment()} == {early, late}
    finally:
        c.close()


class Recorder:
    """A rebalance listener that records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.calls.append(("revoked", sorted(revoked)))

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.calls.append(("assigned", sorted(assigned)))

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.calls.append(("lost", sorted(lost)))


@ONE_NODE
def test_a_fenced_member_loses_its_partitions_and_rejoins(either_broker):
    bs, topic, group = either_broker.bootstrap_servers, unique("kip848-fence"), unique("g848f")
    make_topic(bs, topic, 2)
    listener = Recorder()
    log = Log()
    c = member(bs, group, enable_auto_commit=False)
    everything = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    try:
        c.subscribe([topic], listener=listener)
        poll_until([c], log, lambda: ("assigned", everything) in listener.calls, "the first assignment")
        membership = c._core.coordinator
        # A wrong epoch in the next heartbeat: the broker answers FENCED_MEMBER_EPOCH.
        c._lt.run(_set_epoch(membership, membership.member_epoch + 1000))
        poll_until([c], log, lambda: ("lost", everything) in listener.calls, "on_partitions_lost")
        poll_until([c], log, lambda: listener.calls[-1] == ("assigned", everything) and c.assignment() == set(everything),
                   "the partitions again after rejoining")
    finally:
        c.close()
    assert listener.calls[0] == ("assigned", everything)
    lost_at = listener.calls.index(("lost", everything))
    assert ("revoked", everything) not in listener.calls[:lost_at]
    assert listener.calls[-1] == ("revoked", everything)  # close


async def _set_epoch(membership: Any, epoch: int) -> None:
    membership.member_epoch = epoch
    membership.next_heartbeat_ms = 0
    membership._wakeup.set()


@ONE_NODE
def test_the_asyncio_consumer_joins_consumes_commits_and_leaves(either_broker):
    bs, topic, group = either_broker.bootstrap_servers, unique("kip848-aio"), unique("g848a")
    make_topic(bs, topic, 3)
    expected = produce(bs, topic, 3, 4, "aio")
    listener = Recorder()

    async def go() -> tuple[set[bytes], dict]:
        got: set[bytes] = set()
        async with AIOConsumer(bootstrap_servers=bs, group_id=group, group_protocol="consumer",
                               auto_offset_reset="earliest", enable_auto_commit=False) as c:
            c.subscribe([topic], listener=listener)
            deadline = time.monotonic() + WAIT
            while not expected <= got and time.monotonic() < deadline:
                for recs in (await c.poll(200)).values():
                    got.update(r.value for r in recs if r.value is not None)
            await c.commit_sync()
            committed = await c.committed([TopicPartition(topic, p) for p in range(3)])
        return got, committed

    got, committed = asyncio.run(go())
    assert got == expected
    assert {tp.partition: om.offset for tp, om in committed.items() if om is not None} == {0: 4, 1: 4, 2: 4}
    everything = [TopicPartition(topic, p) for p in range(3)]
    assert listener.calls == [("assigned", everything), ("revoked", everything)]


@ONE_NODE
def test_a_member_that_stops_polling_leaves_then_loses_and_rejoins(either_broker):
    bs, topic, group = either_broker.bootstrap_servers, unique("kip848-poll"), unique("g848p")
    make_topic(bs, topic, 2)
    listener = Recorder()
    log = Log()
    c = member(bs, group, enable_auto_commit=False, max_poll_interval_ms=2000)
    everything = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    try:
        c.subscribe([topic], listener=listener)
        poll_until([c], log, lambda: ("assigned", everything) in listener.calls, "the first assignment")
        time.sleep(3.5)  # past max.poll.interval.ms: the member leaves the group in the background
        assert c._core.coordinator.state.name == "STALE"
        poll_until([c], log, lambda: listener.calls[-1] == ("assigned", everything) and len(listener.calls) >= 3,
                   "the partitions again after rejoining")
    finally:
        c.close()
    assert listener.calls[:3] == [("assigned", everything), ("lost", everything), ("assigned", everything)]


@ONE_NODE
def test_a_groups_own_heartbeat_interval_reaches_its_members(either_broker):
    # consumer.heartbeat.interval.ms set on the group (IncrementalAlterConfigs, resource type GROUP)
    # overrides the broker's group.consumer.heartbeat.interval.ms in the heartbeat answers.
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    bs, topic, group = either_broker.bootstrap_servers, unique("kip848-cfg"), unique("g848cfg")
    make_topic(bs, topic, 1)
    admin = ConfluentAdmin({"bootstrap.servers": bs})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("consumer.heartbeat.interval.ms", "6000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(15)
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
    entries = next(iter(described.values())).result(15)
    assert entries["consumer.heartbeat.interval.ms"].value == "6000"
    c = member(bs, group, enable_auto_commit=False)
    log = Log()
    try:
        c.subscribe([topic])
        poll_until([c], log, lambda: c.assignment() == {TopicPartition(topic, 0)}, "the assignment")
        assert c._core.coordinator.heartbeat_interval_ms == 6000
    finally:
        c.close()


def test_a_classic_group_of_shoal_clients_is_upgraded_online_and_back(either_broker):
    # Two members on the classic protocol (shoal's default, cooperative-sticky), then one on the consumer
    # protocol: the group becomes a consumer group with the classic members in it, and classic again when
    # that member leaves; each partition has one owner at a time and no record is consumed twice.
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    def group_type() -> str:
        admin = ConfluentAdmin({"bootstrap.servers": bs})
        return str(admin.describe_consumer_groups([group], request_timeout=10)[group].result(15).type.name)

    bs, topic, group = either_broker.bootstrap_servers, unique("kip848-up"), unique("g848up")
    make_topic(bs, topic, 6)
    expected = produce(bs, topic, 6, 5, "first")
    log = Log()
    strategy = {"partition_assignment_strategy": "cooperative-sticky", "auto_offset_reset": "earliest"}
    classic = [Consumer(bootstrap_servers=bs, group_id=group, **strategy) for _ in range(2)]
    consumers = list(classic)
    try:
        for c in classic:
            c.subscribe([topic])
        poll_until(consumers, log, lambda: exact_cover(consumers, topic, 6, {3}) and expected <= log.values,
                   "two classic members with 3 partitions each")
        types = [group_type()]
        newcomer = member(bs, group)
        consumers.append(newcomer)
        newcomer.subscribe([topic])
        poll_until(consumers, log, lambda: exact_cover(consumers, topic, 6, {2}), "three members, two each")
        types.append(group_type())
        expected |= produce(bs, topic, 6, 5, "mixed")
        poll_until(consumers, log, lambda: expected <= log.values, "the records of the mixed group")
        newcomer.close()
        consumers.remove(newcomer)
        poll_until(consumers, log, lambda: exact_cover(consumers, topic, 6, {3}) and group_type() == "CLASSIC",
                   "the classic members again, in a classic group")
        types.append(group_type())
        expected |= produce(bs, topic, 6, 5, "after")
        poll_until(consumers, log, lambda: expected <= log.values, "the records after the downgrade")
        assert types == ["CLASSIC", "CONSUMER", "CLASSIC"], types
        assert log.duplicates() == [], "records consumed twice"
        assert log.values == expected
    finally:
        close_all(consumers)


def test_members_carry_on_when_the_coordinator_node_stops(shoal_three_nodes):
    # shoal on three nodes: the node coordinating the group stops; the members find the new coordinator,
    # keep their partitions' records flowing and resume from their commits. (Kafka fail-over runs in
    # test_consumer_protocol_clients.py for the Java and franz-go clients.)
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    bs, topic, group = shoal_three_nodes.bootstrap_servers, unique("kip848-fo"), unique("g848fo")
    with AdminClient(bootstrap_servers=bs) as shoal_admin:  # three replicas: every partition outlives a node
        assert all(e is None for e in shoal_admin.create_topics([NewTopic(topic, 6, 3)]).values())
    expected = produce(bs, topic, 6, 5, "before")
    log = Log()
    consumers = [member(bs, group, auto_commit_interval_ms=200) for _ in range(2)]
    try:
        for c in consumers:
            c.subscribe([topic])
        poll_until(consumers, log, lambda: exact_cover(consumers, topic, 6, {3}) and expected <= log.values,
                   "two members with 3 partitions each")
        for c in consumers:
            c.commit_sync()
        admin = ConfluentAdmin({"bootstrap.servers": bs})
        node = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15).coordinator.id
        shoal_three_nodes.stop_node(node)
        try:
            expected |= produce(bs, topic, 6, 5, "during")
            poll_until(consumers, log, lambda: expected <= log.values and exact_cover(consumers, topic, 6, {3}),
                       "the records produced while the coordinator node is down")
        finally:
            shoal_three_nodes.start_node(node)
        assert log.duplicates() == [], "records consumed twice"
    finally:
        close_all(consumers)
