"""The shoal client against librdkafka's built-in mock cluster (real sockets on 127.0.0.1)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest

from shoal.client import Consumer, ConsumerRebalanceListener, Producer, TopicPartition

pytestmark = pytest.mark.timeout(120)

# The mock cluster advertises JoinGroup v6 / SyncGroup v4 / Heartbeat v4 / LeaveGroup v3+
# but mis-parses them (closes the connection, or crashes): cap those for the mock only.
MOCK_CAPS = {11: 5, 14: 3, 12: 3, 13: 2}


@pytest.fixture
def mock_cluster() -> Iterator[str]:
    owner = confluent_kafka.Producer({"test.mock.num.brokers": 3, "log_level": 0})
    md = owner.list_topics(timeout=10)
    yield ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())
    owner.flush(1)
    del owner


def topic_name() -> str:
    return "t-" + uuid.uuid4().hex[:8]


def consume_all(consumers: list[Consumer], want: int, deadline_s: float = 30) -> dict[int, list]:
    """Poll until `want` distinct records were seen. Without commits, a partition that
    moves in a rebalance is read again by its new owner (at-least-once), so the
    lists may hold more than `want` records."""
    got: dict[int, list] = {i: [] for i in range(len(consumers))}
    seen: set[tuple[str, int, int]] = set()
    end = time.monotonic() + deadline_s
    while len(seen) < want and time.monotonic() < end:
        for i, c in enumerate(consumers):
            for recs in c.poll(100).values():
                got[i].extend(recs)
                seen.update((r.topic, r.partition, r.offset) for r in recs)
    return got


def distinct(got: dict[int, list]) -> set[tuple[str, int, int]]:
    return {(r.topic, r.partition, r.offset) for recs in got.values() for r in recs}


def produce(bootstrap: str, topic: str, n: int, **cfg: object) -> list:
    p = Producer({"bootstrap.servers": bootstrap, **cfg})
    try:
        futs = [p.send(topic, b"value-%d" % i, key=b"key-%d" % i, headers=[("i", b"%d" % i)]) for i in range(n)]
        p.flush(30)
        return [f.result() for f in futs]
    finally:
        p.close()


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_every_compression_and_consume_by_assign(mock_cluster: str, compression: str) -> None:
    topic = topic_name()
    mds = produce(mock_cluster, topic, 500, **{"compression.type": compression, "linger.ms": 20})
    # Keyed records land where Java's partitioner puts them, offsets are dense per partition.
    from shoal.client.partitioner import partition_for_key

    for i, md in enumerate(mds):
        assert md.partition == partition_for_key(b"key-%d" % i, 4)
    per_part: dict[int, list[int]] = {}
    for md in mds:
        per_part.setdefault(md.partition, []).append(md.offset)
    assert all(sorted(v) == list(range(len(v))) for v in per_part.values())

    c = Consumer({"bootstrap.servers": mock_cluster, "auto.offset.reset": "earliest", "max.poll.records": 37})
    try:
        c.assign([TopicPartition(topic, p) for p in range(4)])
        got = consume_all([c], 500)[0]
    finally:
        c.close()
    assert sorted(r.value for r in got) == sorted(b"value-%d" % i for i in range(500))
    r = next(r for r in got if r.value == b"value-7")
    assert r.key == b"key-7" and r.headers == [("i", b"7")]

    # librdkafka reads what shoal wrote.
    ck = confluent_kafka.Consumer({"bootstrap.servers": mock_cluster, "group.id": "ck-" + topic,
                                   "auto.offset.reset": "earliest", "log_level": 0})
    try:
        ck.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(4)])
        n, end = 0, time.monotonic() + 20
        while n < 500 and time.monotonic() < end:
            m = ck.poll(0.2)
            if m is not None and m.error() is None:
                n += 1
        assert n == 500
    finally:
        ck.close()


def test_group_of_three_shares_partitions_commits_and_resumes(mock_cluster: str) -> None:
    topic = topic_name()
    produce(mock_cluster, topic, 400)
    cfg = {"bootstrap.servers": mock_cluster, "group.id": "g-" + topic, "auto.offset.reset": "earliest",
           "enable.auto.commit": False, "heartbeat.interval.ms": 300, "session.timeout.ms": 6000,
           "api.version.caps": MOCK_CAPS}
    assigned: dict[int, list] = {}

    class Listener(ConsumerRebalanceListener):
        def __init__(self, i: int) -> None:
            self.i = i

        def on_partitions_assigned(self, tps: list[TopicPartition]) -> None:
            assigned[self.i] = sorted(tps)

    cs = [Consumer(cfg) for _ in range(3)]
    try:
        for i, c in enumerate(cs):
            c.subscribe([topic], listener=Listener(i))
        got = consume_all(cs, 400)
        assert len(distinct(got)) == 400
        # Let the final owners read their partitions to the end before committing.
        end = time.monotonic() + 30
        while time.monotonic() < end and sum(c.position(tp) for c in cs for tp in c.assignment()) < 400:
            for c in cs:
                c.poll(100)
        owned = [c.assignment() for c in cs]
        assert set().union(*owned) == {TopicPartition(topic, p) for p in range(4)}
        assert sum(len(o) for o in owned) == 4  # disjoint
        assert len({c.group_generation[0] for c in cs}) == 1
        for c in cs:
            c.commit_sync()
        committed = cs[0].committed([TopicPartition(topic, p) for p in range(4)])
        assert sum(om.offset for om in committed.values() if om is not None) == 400
    finally:
        for c in cs:
            c.close()

    # More records; a new member of the group resumes from the commits.
    produce(mock_cluster, topic, 40)
    c = Consumer(cfg)
    try:
        c.subscribe([topic])
        got2 = consume_all([c], 40)[0]
        time.sleep(0.5)
        assert len(got2) + sum(len(v) for v in c.poll(500).values()) == 40
    finally:
        c.close()


def test_shoal_and_confluent_consumers_share_a_group(mock_cluster: str) -> None:
    topic = topic_name()
    produce(mock_cluster, topic, 200)
    group = "mixed-" + topic
    shoal_c = Consumer({"bootstrap.servers": mock_cluster, "group.id": group, "auto.offset.reset": "earliest",
                        "partition.assignment.strategy": "range", "heartbeat.interval.ms": 300,
                        "session.timeout.ms": 6000, "api.version.caps": MOCK_CAPS})
    ck = confluent_kafka.Consumer({"bootstrap.servers": mock_cluster, "group.id": group,
                                   "auto.offset.reset": "earliest", "partition.assignment.strategy": "range",
                                   "session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "log_level": 0})
    try:
        shoal_c.subscribe([topic])
        ck.subscribe([topic])
        shoal_got, ck_got = [], []
        end = time.monotonic() + 40
        while len(set(shoal_got) | set(ck_got)) < 200 and time.monotonic() < end:
            for recs in shoal_c.poll(50).values():
                shoal_got.extend((r.partition, r.offset) for r in recs)
            m = ck.poll(0.05)
            if m is not None and m.error() is None:
                ck_got.append((m.partition(), m.offset()))
        mine = shoal_c.assignment()
        theirs = {TopicPartition(tp.topic, tp.partition) for tp in ck.assignment()}
        assert mine and theirs and not (mine & theirs)
        assert mine | theirs == {TopicPartition(topic, p) for p in range(4)}
        assert len(set(shoal_got) | set(ck_got)) == 200
    finally:
        ck.close()
        shoal_c.close()
