"""shoal's own client in transactions, against a shoal broker over real sockets (one node and three):
commit/abort as its read_committed consumer and librdkafka see them, zombie fencing, offsets sent with
a live member's group metadata, and idempotence on by default."""

from __future__ import annotations

import time

import pytest

from shoal.client import Consumer, Producer
from shoal.client.errors import IllegalStateError, ProducerFencedError
from tests.interop.txn_helpers import committed, create_topic, read_all
from tests.interop.txn_helpers import shoal_client_read as shoal_read


def test_shoal_producer_commit_and_abort(shoal_cluster):
    bs = shoal_cluster.bootstrap
    create_topic(bs, "sh-txn", 2)
    p = Producer(bootstrap_servers=bs, transactional_id="sh-1")
    try:
        p.init_transactions()
        with pytest.raises(IllegalStateError):
            p.send("sh-txn", b"outside")  # not in a transaction
        p.begin_transaction()
        for i in range(10):
            p.send("sh-txn", b"aborted-%d" % i, partition=i % 2)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        for i in range(10):
            p.send("sh-txn", b"committed-%d" % i, partition=i % 2)
        p.commit_transaction()
    finally:
        p.close()
    expected = sorted(b"committed-%d" % i for i in range(10))
    assert sorted(shoal_read(bs, "sh-txn", "read_committed", 2)) == expected
    assert sorted(read_all(bs, "sh-txn", 2)) == expected  # librdkafka agrees
    everything = shoal_read(bs, "sh-txn", "read_uncommitted", 2)
    assert sorted(everything) == sorted(expected + [b"aborted-%d" % i for i in range(10)])


def test_shoal_producer_is_fenced_by_a_newer_one(shoal_cluster):
    bs = shoal_cluster.bootstrap
    create_topic(bs, "sh-zombie")
    old = Producer(bootstrap_servers=bs, transactional_id="sh-2")
    new = Producer(bootstrap_servers=bs, transactional_id="sh-2")
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send("sh-zombie", b"zombie")
        old.flush()
        new.init_transactions()  # aborts the old producer's transaction and fences it
        with pytest.raises(ProducerFencedError):
            old.commit_transaction()
        new.begin_transaction()
        new.send("sh-zombie", b"new")
        new.commit_transaction()
    finally:
        old.close()
        new.close()
    assert read_all(bs, "sh-zombie") == [b"new"]


def test_shoal_consume_transform_produce(shoal_cluster):
    bs = shoal_cluster.bootstrap
    create_topic(bs, "sh-in", 2)
    create_topic(bs, "sh-out", 2)
    src = Producer(bootstrap_servers=bs)
    for i in range(200):
        src.send("sh-in", b"%d" % i, partition=i % 2)
    src.close()
    consumer = Consumer(bootstrap_servers=bs, group_id="sh-copier", enable_auto_commit=False,
                        isolation_level="read_committed", auto_offset_reset="earliest")
    producer = Producer(bootstrap_servers=bs, transactional_id="sh-copier-1")
    copied = 0
    try:
        consumer.subscribe(["sh-in"])
        producer.init_transactions()
        deadline = time.monotonic() + 60
        n = 0
        while copied < 200 and time.monotonic() < deadline:
            batch = consumer.poll(500, max_records=30)
            if not batch:
                continue
            producer.begin_transaction()
            positions = {}
            for tp, recs in batch.items():
                for r in recs:
                    producer.send("sh-out", r.value, partition=tp.partition)
                positions[tp] = recs[-1].offset + 1
            producer.send_offsets_to_transaction(positions, consumer.group_metadata())
            n += 1
            if n % 3 == 0:  # every third transaction is aborted and its input read again
                producer.abort_transaction()
                for tp in positions:
                    c = consumer.committed([tp])[tp]
                    consumer.seek(tp, c.offset if c is not None else 0)
                continue
            producer.commit_transaction()
            copied += sum(len(r) for r in batch.values())
    finally:
        producer.close()
        consumer.close()
    assert copied == 200
    out = read_all(bs, "sh-out", 2)
    assert sorted(out, key=int) == [b"%d" % i for i in range(200)]  # every input once, none twice
    assert committed(bs, "sh-copier", "sh-in", 0) == 100 and committed(bs, "sh-copier", "sh-in", 1) == 100


def test_idempotence_is_on_by_default(shoal):
    bs = shoal.bootstrap
    p = Producer(bootstrap_servers=bs)
    try:
        assert p._core.idempotent and p._core.producer_id >= 0
        futures = [p.send("sh-idem", b"%d" % i) for i in range(50)]
        p.flush()
        assert [f.result().offset for f in futures] == list(range(50))
    finally:
        p.close()
    # acks=1 rules idempotence out unless asked for (then it is an error), as Kafka.
    p = Producer(bootstrap_servers=bs, acks="1")
    try:
        assert not p._core.idempotent
    finally:
        p.close()
    with pytest.raises(ValueError):
        Producer(bootstrap_servers=bs, acks="1", enable_idempotence=True)


@pytest.mark.parametrize("transactional", [False, True])
def test_send_batch_keeps_every_batch(shoal, transactional):
    """Whole batches handed to the producer (the Spark sink's path) get their own sequences: none is taken
    for a retry of the one before and dropped."""
    bs = shoal.bootstrap
    topic = f"sh-bulk-{transactional}"
    create_topic(bs, topic, 2)
    p = Producer(bootstrap_servers=bs, **({"transactional_id": "sh-bulk"} if transactional else {}))
    try:
        if transactional:
            p.init_transactions()
            p.begin_transaction()
        sent = [p.send_batch(topic, part, [(1, None, b"%d-%d-%d" % (r, part, i), None) for i in range(50)])
                for r in range(4) for part in (0, 1)]
        if transactional:
            p.commit_transaction()
        else:
            p.flush()
        assert sorted(b.base_offset for b in sent) == sorted([0, 50, 100, 150] * 2)
    finally:
        p.close()
    assert len(read_all(bs, topic, 2)) == 400
