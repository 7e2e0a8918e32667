"""Transactions with clients others wrote (confluent-kafka, kafka-python, aiokafka), over real sockets,
on one node and on three nodes in one process: commit and abort seen by read_committed and
read_uncommitted readers, undecided data held back at the LSO, zombie fencing, offsets sent in the
transaction, and a producer killed mid-transaction aborted at its timeout."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.interop.txn_helpers import committed, create_topic, read_all, watermarks

FAST_TIMEOUTS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


def txn_producer(bootstrap: str, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **extra})
    p.init_transactions(20)
    return p


# ---------------------------------------------------------------- confluent-kafka (librdkafka)


def test_confluent_commit_and_abort(shoal_cluster):
    bs = shoal_cluster.bootstrap
    create_topic(bs, "ck-txn", 2)
    p = txn_producer(bs, "ck-1")
    p.begin_transaction()
    for i in range(10):
        p.produce("ck-txn", value=b"aborted-%d" % i, partition=i % 2)
    p.flush(10)
    p.abort_transaction(10)
    p.begin_transaction()
    for i in range(10):
        p.produce("ck-txn", value=b"committed-%d" % i, partition=i % 2)
    p.commit_transaction(10)
    committed_values = sorted(b"committed-%d" % i for i in range(10))
    assert sorted(read_all(bs, "ck-txn", 2)) == committed_values
    uncommitted = read_all(bs, "ck-txn", 2, isolation="read_uncommitted")
    assert sorted(uncommitted) == sorted(committed_values + [b"aborted-%d" % i for i in range(10)])
    # Each partition: 5 aborted + marker + 5 committed + marker; the LSO has reached the end.
    assert watermarks(bs, "ck-txn", 0) == watermarks(bs, "ck-txn", 0, "read_uncommitted") == (0, 12)


def test_confluent_undecided_data_waits_at_the_lso(shoal_cluster):
    bs = shoal_cluster.bootstrap
    create_topic(bs, "ck-lso")
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("ck-lso", value=b"before")
    plain.flush(10)
    p = txn_producer(bs, "ck-2")
    p.begin_transaction()
    for i in range(3):
        p.produce("ck-lso", value=b"open-%d" % i)
    p.flush(10)
    plain.produce("ck-lso", value=b"after")
    plain.flush(10)
    assert read_all(bs, "ck-lso") == [b"before"]
    assert watermarks(bs, "ck-lso") == (0, 1)  # the LSO: the open transaction's first offset
    assert watermarks(bs, "ck-lso", isolation="read_uncommitted") == (0, 5)
    p.commit_transaction(10)
    assert read_all(bs, "ck-lso") == [b"before", b"open-0", b"open-1", b"open-2", b"after"]
    assert watermarks(bs, "ck-lso") == (0, 6)


def test_confluent_zombie_is_fenced(shoal_cluster):
    bs = shoal_cluster.bootstrap
    create_topic(bs, "ck-zombie")
    zombie = txn_producer(bs, "ck-3")
    zombie.begin_transaction()
    zombie.produce("ck-zombie", value=b"zombie")
    zombie.flush(10)
    fresh = txn_producer(bs, "ck-3")  # fences the zombie and aborts its open transaction
    with pytest.raises(KafkaException) as e:
        zombie.commit_transaction(10)
    assert e.value.args[0].fatal() or e.value.args[0].txn_requires_abort()
    fresh.begin_transaction()
    fresh.produce("ck-zombie", value=b"fresh")
    fresh.commit_transaction(10)
    assert read_all(bs, "ck-zombie") == [b"fresh"]


def test_confluent_send_offsets_with_group_metadata(shoal_cluster):
    bs = shoal_cluster.bootstrap
    create_topic(bs, "ck-in")
    create_topic(bs, "ck-out")
    src = Producer({"bootstrap.servers": bs})
    for i in range(100):
        src.produce("ck-in", value=b"%d" % i)
    src.flush(10)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "ck-copier", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.subscribe(["ck-in"])
    p = txn_producer(bs, "ck-4")
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 100 and time.monotonic() < deadline:
        msgs = consumer.consume(100, 1.0)
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            assert not m.error()
            p.produce("ck-out", value=m.value())
        seen += len(msgs)
        p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                      consumer.consumer_group_metadata(), 10)
        p.commit_transaction(10)
    consumer.close()
    assert seen == 100
    # A second init with the same id returns only once everything is settled (as Kafka's tests use it).
    txn_producer(bs, "ck-4")
    assert committed(bs, "ck-copier", "ck-in") == 100
    assert sorted(read_all(bs, "ck-out"), key=int) == [b"%d" % i for i in range(100)]


# ---------------------------------------------------------------- kafka-python


def test_kafka_python_transactions(shoal_cluster):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTP

    bs = shoal_cluster.bootstrap
    create_topic(bs, "kp-txn")
    # (offsets of a topic that does not exist are refused UNKNOWN_TOPIC_OR_PARTITION, as Kafka,
    # and clients retry that until the transaction times out)
    create_topic(bs, "kp-other")
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="kp-1")
    p.init_transactions()
    p.begin_transaction()
    p.send("kp-txn", b"msg1")
    p.send("kp-txn", b"msg2")
    p.abort_transaction()
    p.begin_transaction()
    p.send("kp-txn", b"msg3")
    p.send("kp-txn", b"msg4")
    p.commit_transaction()
    # Offsets in a transaction, by group id; an offsets-only transaction aborted leaves no trace.
    tp0, tp1 = KTP("kp-txn", 0), KTP("kp-other", 0)
    p.begin_transaction()
    p.send_offsets_to_transaction({tp0: OffsetAndMetadata(0, "metadata", 0)}, "kp-group")
    p.send("kp-txn", b"msg5")
    p.commit_transaction()
    p.begin_transaction()
    p.send_offsets_to_transaction({tp1: OffsetAndMetadata(1, "bad", 1)}, "kp-group")
    p.abort_transaction()
    p.close()
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        assert admin.list_group_offsets("kp-group") == {"kp-group": {tp0: OffsetAndMetadata(0, "metadata", 0)}}
    finally:
        admin.close()
    c = KafkaConsumer("kp-txn", bootstrap_servers=bs, isolation_level="read_committed",
                      auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        assert [m.value for m in c] == [b"msg3", b"msg4", b"msg5"]
    finally:
        c.close()


# ---------------------------------------------------------------- aiokafka


def test_aiokafka_transactions(shoal_cluster):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP
    from aiokafka.errors import ProducerFenced

    bs = shoal_cluster.bootstrap
    create_topic(bs, "aio-txn")

    async def scenario() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="aio-1")
        await p.start()
        pid = p._txn_manager.producer_id
        async with p.transaction():
            await p.send_and_wait("aio-txn", b"c1")
        with pytest.raises(RuntimeError):
            async with p.transaction():
                await p.send_and_wait("aio-txn", b"x1")
                raise RuntimeError("abort")
        async with p.transaction():
            await p.send_offsets_to_transaction({ATP("aio-txn", 0): 7}, "aio-group")
        await p.stop()
        # The same transactional id keeps its producer id across restarts, and fences the old one.
        p1 = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="aio-1")
        await p1.start()
        assert p1._txn_manager.producer_id == pid
        p2 = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="aio-1")
        await p2.start()
        with pytest.raises(ProducerFenced):
            async with p1.transaction():
                await p1.send_and_wait("aio-txn", b"zombie")
        await p2.stop()
        try:
            await p1.stop()
        except ProducerFenced:
            pass
        # A read_committed consumer stops at the LSO while a transaction is open.
        p3 = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="aio-2")
        await p3.start()
        await p3.begin_transaction()
        await p3.send_and_wait("aio-txn", b"late")
        c = AIOKafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed",
                             auto_offset_reset="earliest", group_id="aio-reader")
        await c.start()
        tp = ATP("aio-txn", 0)
        c.assign([tp])
        got = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=500)
            got += [m.value for ms in batch.values() for m in ms]
            if got and not batch:
                break
        assert got == [b"c1"]
        lso_before, hw_before = c.last_stable_offset(tp), c.highwater(tp)
        await p3.commit_transaction()
        deadline = time.monotonic() + 10
        while b"late" not in got and time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=500)
            got += [m.value for ms in batch.values() for m in ms]
        assert got == [b"c1", b"late"]
        assert lso_before < hw_before and c.last_stable_offset(tp) == c.highwater(tp)
        await c.stop()
        await p3.stop()
        c = AIOKafkaConsumer(bootstrap_servers=bs, group_id="aio-group")
        await c.start()
        assert await c.committed(tp) == 7
        await c.stop()

    asyncio.run(asyncio.wait_for(scenario(), 90))


# ---------------------------------------------------------------- a producer killed mid-transaction

_KILLED_PRODUCER = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "doomed", "transaction.timeout.ms": 2000})
p.init_transactions(20)
p.begin_transaction()
for i in range(5):
    p.produce("killed", value=b"doomed-%d" % i)
p.flush(10)
print("ready", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("nodes", [1, 3], ids=["1node", "3nodes"])
def test_producer_killed_mid_transaction_is_aborted_at_its_timeout(shoal_factory, nodes):
    broker = shoal_factory(nodes=nodes, overrides=FAST_TIMEOUTS)
    bs = broker.bootstrap
    create_topic(bs, "killed")
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_PRODUCER, bs], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        plain = Producer({"bootstrap.servers": bs})
        plain.produce("killed", value=b"after")
        plain.flush(10)
        assert watermarks(bs, "killed") == (0, 0)  # held at the open transaction
        # Aborted by the coordinator after transaction.timeout.ms: readers move past it.
        deadline = time.monotonic() + 20
        while watermarks(bs, "killed")[1] == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert read_all(bs, "killed") == [b"after"]
        assert len(read_all(bs, "killed", isolation="read_uncommitted")) == 6
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_confluent_offsets_are_unstable_until_the_commit(shoal):
    """OffsetFetch with require_stable (librdkafka at read_committed) waits for the markers."""
    bs = shoal.bootstrap
    create_topic(bs, "ck-unstable")
    p = txn_producer(bs, "ck-5")
    p.begin_transaction()
    p.produce("ck-unstable", value=b"x")
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "ck-unstable-g", "enable.auto.commit": False})
    consumer.assign([TopicPartition("ck-unstable", 0, 0)])
    p.send_offsets_to_transaction([TopicPartition("ck-unstable", 0, 1)], consumer.consumer_group_metadata(), 10)
    consumer.close()
    p.commit_transaction(10)
    assert committed(bs, "ck-unstable-g", "ck-unstable") == 1
