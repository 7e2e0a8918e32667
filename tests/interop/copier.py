"""An exactly-once copier (consume-transform-produce), as Kafka's TransactionalMessageCopier.

Run as ``python -m tests.interop.copier BOOTSTRAP PARTITION CLIENT [PAUSE_MS]``: it copies partition
PARTITION of topic ``in`` to the same partition of ``out`` in transactions (transactional.id
``copier-<PARTITION>``), committing its input offsets in each transaction to group
``copier-group``. Every output value is ``<input>:<run>:<txn>:<k>:<n>`` (record k of the n
records of transaction txn of this run), so a checker can see whether every transaction is
all or nothing. Every fifth transaction is deliberately aborted (its values start with
``ABORTED``) and its input copied again. CLIENT is ``confluent`` or ``shoal``.

Errors: fenced or fatal -> exit 3 (the test restarts the copier); anything else -> abort and
re-read from the committed offset. PAUSE_MS (default 0) is spent inside each transaction,
after its records and offsets are sent and before the commit, so that a test's faults land
mostly on open transactions.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import threading
import time
import uuid

IN, OUT, GROUP = "in", "out", "copier-group"


@contextlib.contextmanager
def watchdog(seconds: float, what: str):
    """Exit (code 5; the test restarts the copier) if the block outlives ``seconds``.

    librdkafka's send_offsets_to_transaction() can block forever, past its own timeout, once the
    group coordinator's node has been stopped (librdkafka issues #5456 and #5511, open): its
    coordinator request is never retried. A copier stuck there is a client bug, not a broker one.
    """
    def expire() -> None:
        print(f"watchdog: {what} blocked for {seconds} s (librdkafka #5456/#5511); exiting", flush=True)
        os._exit(5)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def run_confluent(bootstrap: str, partition: int, pause: float) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"copier-{partition}",
                         "transaction.timeout.ms": 8000, "linger.ms": 2, "message.timeout.ms": 8000})
    producer.init_transactions(60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    run = uuid.uuid4().hex[:8]
    txn = 0

    def rewind() -> None:
        committed = consumer.committed([TopicPartition(IN, partition)], timeout=30)[0].offset
        consumer.assign([TopicPartition(IN, partition, max(committed, 0))])

    rewind()
    print("ready", flush=True)
    while True:
        msgs = consumer.consume(random.randint(1, 20), 0.5)
        msgs = [m for m in msgs if not m.error()]
        if not msgs:
            continue
        txn += 1
        try:
            producer.begin_transaction()
            if txn % 5 == 0:
                for m in msgs:
                    producer.produce(OUT, value=b"ABORTED:" + m.value(), partition=partition)
                producer.flush(30)
                producer.abort_transaction(30)
                rewind()
                continue
            for k, m in enumerate(msgs):
                producer.produce(OUT, value=b"%s:%s:%d:%d:%d" % (m.value(), run.encode(), txn, k, len(msgs)),
                                 partition=partition)
            with watchdog(45, "send_offsets_to_transaction(timeout=30)"):
                producer.send_offsets_to_transaction([TopicPartition(IN, partition, msgs[-1].offset() + 1)],
                                                     consumer.consumer_group_metadata(), 30)
            time.sleep(pause)
            while True:
                try:
                    producer.commit_transaction(30)
                    break
                except KafkaException as e:
                    if e.args[0].retriable():
                        continue
                    raise
        except KafkaException as e:
            err = e.args[0]
            if err.fatal():
                print(f"fatal: {err}", flush=True)
                sys.exit(3)
            try:
                producer.abort_transaction(30)
            except KafkaException as e2:
                if e2.args[0].fatal():
                    sys.exit(3)
                time.sleep(0.5)
            rewind()


def run_shoal(bootstrap: str, partition: int, pause: float) -> None:
    from shoal.client import Consumer, Producer, TopicPartition
    from shoal.client.errors import IllegalStateError, ProducerFencedError
    from shoal.protocol.errors import KafkaError

    producer = Producer(bootstrap_servers=bootstrap, transactional_id=f"copier-{partition}",
                        transaction_timeout_ms=8000, linger_ms=2, delivery_timeout_ms=8000)
    producer.init_transactions()
    consumer = Consumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False,
                        isolation_level="read_committed", auto_offset_reset="earliest")
    tp = TopicPartition(IN, partition)
    consumer.assign([tp])
    run = uuid.uuid4().hex[:8]
    txn = 0

    def rewind() -> None:
        c = consumer.committed([tp])[tp]
        consumer.seek(tp, c.offset if c is not None else 0)

    rewind()
    print("ready", flush=True)
    while True:
        batch = consumer.poll(500, max_records=random.randint(1, 20)).get(tp, [])
        if not batch:
            continue
        txn += 1
        try:
            producer.begin_transaction()
            if txn % 5 == 0:
                for r in batch:
                    producer.send(OUT, b"ABORTED:" + r.value, partition=partition)
                producer.flush()
                producer.abort_transaction()
                rewind()
                continue
            for k, r in enumerate(batch):
                producer.send(OUT, b"%s:%s:%d:%d:%d" % (r.value, run.encode(), txn, k, len(batch)),
                              partition=partition)
            producer.send_offsets_to_transaction({tp: batch[-1].offset + 1}, consumer.group_metadata())
            time.sleep(pause)
            producer.commit_transaction()
        except (ProducerFencedError, IllegalStateError) as e:
            print(f"fatal: {e!r}", flush=True)
            sys.exit(3)
        except (KafkaError, TimeoutError, ConnectionError) as e:
            print(f"abort after: {e!r}", flush=True)
            try:
                producer.abort_transaction()
            except (ProducerFencedError, IllegalStateError):
                sys.exit(3)
            except (KafkaError, TimeoutError, ConnectionError):
                time.sleep(0.5)
                sys.exit(4)  # the test restarts us
            rewind()


if __name__ == "__main__":
    bootstrap_servers, partition_index, client = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    pause_s = int(sys.argv[4]) / 1000 if len(sys.argv) > 4 else 0.0
    (run_confluent if client == "confluent" else run_shoal)(bootstrap_servers, partition_index, pause_s)
