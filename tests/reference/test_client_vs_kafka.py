"""shoal's own Python client against Apache Kafka 4.x as well as shoal (``either_broker``): the producer,
the consumer in a group with commits, transactions (commit, abort, send_offsets_to_transaction,
read_committed) and the admin client. Code written against shoal must run on Kafka unchanged, so
every test body is the same for both brokers; names are unique because the brokers are shared."""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from shoal.client import (
    AdminClient,
    Consumer,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)
from tests.interop.txn_helpers import shoal_client_read

pytestmark = pytest.mark.timeout(180)


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def make_topic(bs: str, name: str, partitions: int = 1) -> None:
    with AdminClient(bootstrap_servers=bs) as admin:
        errors = admin.create_topics([NewTopic(name, partitions, 1)])
    assert all(e is None for e in errors.values()), errors


def drain(consumer: Consumer, want: int, timeout: float = 30.0) -> list:
    """Poll until ``want`` records have come (or the time is up), in arrival order."""
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for recs in consumer.poll(200).values():
            got.extend(recs)
    return got


def test_produce_and_consume_keys_headers_partitions(either_broker):
    bs, topic = either_broker.bootstrap_servers, unique("cli-basic")
    make_topic(bs, topic, 3)
    p = Producer(bootstrap_servers=bs, linger_ms=5)
    try:
        futures = [p.send(topic, b"v%d" % i, key=b"k%d" % (i % 4), headers=[("h", b"%d" % i)]) for i in range(30)]
        futures.append(p.send(topic, b"explicit", partition=2, timestamp_ms=1_700_000_000_000))
        p.flush(15)
        meta = [f.result(10) for f in futures]
    finally:
        p.close()
    assert meta[-1].partition == 2 and meta[-1].timestamp in (1_700_000_000_000, -1)
    # the default partitioner puts a key in one partition, on both brokers
    by_key: dict[bytes, set[int]] = {}
    for i, m in enumerate(meta[:-1]):
        by_key.setdefault(b"k%d" % (i % 4), set()).add(m.partition)
    assert all(len(parts) == 1 for parts in by_key.values())
    c = Consumer(bootstrap_servers=bs, group_id=None, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        c.assign([TopicPartition(topic, n) for n in range(3)])
        recs = drain(c, 31)
        ends = c.end_offsets([TopicPartition(topic, n) for n in range(3)])
    finally:
        c.close()
    assert sorted(r.value for r in recs) == sorted([b"v%d" % i for i in range(30)] + [b"explicit"])
    assert {r.value: r.headers for r in recs}[b"v7"] == [("h", b"7")]
    assert {r.value: r.timestamp for r in recs}[b"explicit"] == 1_700_000_000_000
    assert sum(ends.values()) == 31


def test_group_subscribe_commit_and_resume(either_broker):
    bs, topic, group = either_broker.bootstrap_servers, unique("cli-group"), unique("g")
    make_topic(bs, topic, 2)
    p = Producer(bootstrap_servers=bs)
    for i in range(40):
        p.send(topic, b"%d" % i, partition=i % 2)
    p.flush(15)
    p.close()
    c = Consumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        c.subscribe([topic])
        first = drain(c, 40)
        assert len(first) == 40
        assert c.assignment() == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
        c.commit({TopicPartition(topic, 0): 10, TopicPartition(topic, 1): OffsetAndMetadata(15, "meta")})
        committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    finally:
        c.close(autocommit=False)
    assert committed[TopicPartition(topic, 0)].offset == 10
    assert committed[TopicPartition(topic, 1)].offset == 15
    assert committed[TopicPartition(topic, 1)].metadata == "meta"
    again = Consumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        again.subscribe([topic])
        rest = drain(again, 15)  # (20 - 10) + (20 - 15): it resumes at the committed offsets
    finally:
        again.close(autocommit=False)
    assert sorted(int(r.value) for r in rest) == sorted([i for i in range(40) if i % 2 == 0][10:]
                                                        + [i for i in range(40) if i % 2 == 1][15:])


def test_transactions_commit_abort_and_read_committed(either_broker):
    bs, topic = either_broker.bootstrap_servers, unique("cli-txn")
    make_topic(bs, topic, 2)
    p = Producer(bootstrap_servers=bs, transactional_id=unique("tx"))
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(6):
            p.send(topic, b"aborted-%d" % i, partition=i % 2)
        p.flush(15)
        p.abort_transaction()
        p.begin_transaction()
        for i in range(6):
            p.send(topic, b"committed-%d" % i, partition=i % 2)
        p.commit_transaction()
    finally:
        p.close()
    committed = sorted(b"committed-%d" % i for i in range(6))
    assert sorted(shoal_client_read(bs, topic, "read_committed", 2)) == committed
    everything = sorted(shoal_client_read(bs, topic, "read_uncommitted", 2))
    assert everything == sorted(committed + [b"aborted-%d" % i for i in range(6)])


def test_consume_transform_produce_with_send_offsets(either_broker, caplog):
    # it failed once in CI against Kafka (ProducerFencedError after 67 s, not reproduced in 40 runs here):
    # should it fail again, the client's debug log and the rounds' times say where the time went
    caplog.set_level(logging.DEBUG, logger="shoal.client")
    bs, src, dst, group = (either_broker.bootstrap_servers, unique("cli-ctp-in"), unique("cli-ctp-out"),
                           unique("ctp"))
    make_topic(bs, src, 2)
    make_topic(bs, dst, 2)
    p = Producer(bootstrap_servers=bs)
    for i in range(60):
        p.send(src, b"%d" % i, partition=i % 2)
    p.flush(15)
    p.close()
    consumer = Consumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False,
                        isolation_level="read_committed", auto_offset_reset="earliest")
    producer = Producer(bootstrap_servers=bs, transactional_id=unique("ctp-tx"))
    copied, rounds = 0, 0
    try:
        consumer.subscribe([src])
        producer.init_transactions()
        deadline = time.monotonic() + 60
        started = time.monotonic()
        while copied < 60 and time.monotonic() < deadline:
            batch = consumer.poll(300, max_records=25)
            if not batch:
                continue
            logging.getLogger("shoal.client").debug("round %d begins at %.1f s with %d records", rounds + 1,
                                                    time.monotonic() - started, sum(len(r) for r in batch.values()))
            producer.begin_transaction()
            positions = {}
            for tp, recs in batch.items():
                for r in recs:
                    producer.send(dst, b"out-" + r.value, partition=tp.partition)
                positions[tp] = recs[-1].offset + 1
            producer.send_offsets_to_transaction(positions, consumer.group_metadata())
            rounds += 1
            if rounds == 2:  # one aborted round: its input is read again from the committed offsets
                producer.abort_transaction()
                for tp in positions:
                    c = consumer.committed([tp])[tp]
                    consumer.seek(tp, c.offset if c is not None else 0)
                continue
            producer.commit_transaction()
            copied += sum(len(r) for r in batch.values())
        final = consumer.committed([TopicPartition(src, 0), TopicPartition(src, 1)])
    finally:
        producer.close()
        consumer.close(autocommit=False)
    assert {tp.partition: om.offset for tp, om in final.items()} == {0: 30, 1: 30}
    out = shoal_client_read(bs, dst, "read_committed", 2)
    assert sorted(out) == sorted(b"out-%d" % i for i in range(60))


def test_admin_topics_offsets_and_groups(either_broker):
    bs, topic, group = either_broker.bootstrap_servers, unique("cli-admin"), unique("ga")
    with AdminClient(bootstrap_servers=bs) as admin:
        assert admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "3600000"})]) == {topic: None}
        again = admin.create_topics([NewTopic(topic, 1, 1)])[topic]
        assert again is not None and "TOPIC_ALREADY_EXISTS" in repr(again).upper().replace(" ", "_")
        assert admin.create_partitions({topic: NewPartitions(3)}) == {topic: None}
        deadline = time.monotonic() + 10
        while len(admin.list_topics().get(topic, [])) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sorted(admin.list_topics()[topic]) == [0, 1, 2]
        assert admin.describe_cluster().brokers
        p = Producer(bootstrap_servers=bs)
        for i in range(5):
            p.send(topic, b"%d" % i, partition=1)
        p.flush(15)
        p.close()
        ends = admin.list_offsets({TopicPartition(topic, 1): "latest", TopicPartition(topic, 0): "earliest"})
        assert ends[TopicPartition(topic, 1)][0] == 5 and ends[TopicPartition(topic, 0)][0] == 0
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        assert admin.alter_group_offsets(group, {tp0: 0, tp1: 4}) in ({tp0: None, tp1: None}, None)
        offsets = admin.list_group_offsets(group)
        assert {tp: om.offset for tp, om in offsets.items()} == {tp0: 0, tp1: 4}
        assert group in {g.group_id for g in admin.list_groups()}
        desc = admin.describe_groups([group])[group]
        assert desc.state == "Empty" and desc.members == []
        admin.delete_group_offsets(group, [tp0])
        assert set(admin.list_group_offsets(group)) == {tp1}
        assert admin.delete_groups([group]) == {group: None}
        assert group not in {g.group_id for g in admin.list_groups()}
        assert admin.delete_topics([topic]) == {topic: None}


def test_two_members_rebalance_and_describe(either_broker):
    """Cooperative-sticky: a second member takes partitions over, the admin sees both, and the
    first gets everything back when the second leaves."""
    bs, topic, group = either_broker.bootstrap_servers, unique("cli-rebal"), unique("gr")
    make_topic(bs, topic, 4)
    conf = {"bootstrap_servers": bs, "group_id": group, "enable_auto_commit": False,
            "partition_assignment_strategy": ["cooperative-sticky"], "heartbeat_interval_ms": 200}
    a, b = Consumer(client_id="member-a", **conf), Consumer(client_id="member-b", **conf)

    def settle(members: list[Consumer], want: list[int]) -> None:
        deadline = time.monotonic() + 30
        while [len(m.assignment()) for m in members] != want and time.monotonic() < deadline:
            for m in members:
                m.poll(50)
        assert [len(m.assignment()) for m in members] == want

    try:
        a.subscribe([topic])
        settle([a], [4])
        b.subscribe([topic])
        settle([a, b], [2, 2])
        with AdminClient(bootstrap_servers=bs) as admin:
            desc = admin.describe_groups([group])[group]
        assert desc.state == "Stable" and desc.protocol == "cooperative-sticky"
        assert sorted(m.client_id for m in desc.members) == ["member-a", "member-b"]
        assert {m.client_host for m in desc.members} == {"/127.0.0.1"}
        owned = sorted(tp.partition for m in desc.members for tp in m.assignment)
        assert owned == [0, 1, 2, 3]
        b.close(autocommit=False)
        settle([a], [4])
    finally:
        a.close(autocommit=False)
        b.close(autocommit=False)


def test_newer_producer_fences_the_older(either_broker):
    from shoal.client.errors import ProducerFencedError

    bs, topic, tid = either_broker.bootstrap_servers, unique("cli-fence"), unique("fence")
    make_topic(bs, topic)
    old, new = Producer(bootstrap_servers=bs, transactional_id=tid), Producer(bootstrap_servers=bs, transactional_id=tid)
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic, b"zombie")
        old.flush(15)
        new.init_transactions()  # aborts the old transaction and bumps the epoch
        with pytest.raises(ProducerFencedError):
            old.commit_transaction()
        new.begin_transaction()
        new.send(topic, b"new")
        new.commit_transaction()
    finally:
        old.close()
        new.close()
    assert shoal_client_read(bs, topic, "read_committed", 1) == [b"new"]
