"""Idempotence that survives restarts: producers keep sending while the broker is stalled (SIGSTOP
longer than the clients' request timeout, so they give up on requests the broker will still
append, and retry them) and killed -9 and restarted. Every retried batch the broker already has
must be recognised as a duplicate, from the live producer state and from the state rebuilt after
the restart (snapshot + log replay)."""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest
from confluent_kafka import Producer as CkProducer

from shoal.client import Producer as ShoalProducer
from tests.interop.txn_helpers import create_topic, read_all

N = 6000
PARTITIONS = 3


def _produce_confluent(bs: str, topic: str, errors: list) -> None:
    p = CkProducer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 2,
                    "message.timeout.ms": 120000, "batch.num.messages": 50, "request.timeout.ms": 400})
    for i in range(N):
        while True:
            try:
                p.produce(topic, value=b"%d" % i, partition=i % PARTITIONS,
                          on_delivery=lambda err, msg: errors.append(err) if err else None)
                break
            except BufferError:
                p.poll(0.05)
        if i % 20 == 0:
            p.poll(0)
            time.sleep(0.01)
    assert p.flush(120) == 0


def _produce_shoal(bs: str, topic: str, errors: list) -> None:
    p = ShoalProducer(bootstrap_servers=bs, linger_ms=2, batch_size=2000, delivery_timeout_ms=120000,
                      request_timeout_ms=400)
    try:
        for i in range(N):
            p.send(topic, b"%d" % i, partition=i % PARTITIONS,
                   on_delivery=lambda err, md: errors.append(err) if err else None)
            if i % 20 == 0:
                time.sleep(0.01)
        p.flush(120)
    finally:
        p.close()


@pytest.mark.parametrize("client", ["confluent", "shoal"])
def test_no_duplicates_and_no_gaps_across_kill9(shoal_factory, client):
    broker = shoal_factory()
    topic = f"idem-{client}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    errors: list = []
    target = _produce_confluent if client == "confluent" else _produce_shoal
    t = threading.Thread(target=target, args=(broker.bootstrap, topic, errors), daemon=True)
    t.start()
    rng = random.Random(7)
    kills = 0
    for _ in range(3):
        time.sleep(rng.uniform(0.2, 0.5))
        if not t.is_alive():
            break
        kills += 1
        assert broker.proc is not None
        os.kill(broker.proc.pid, signal.SIGSTOP)  # requests pile up; the clients time them out
        time.sleep(1.0)
        os.kill(broker.proc.pid, signal.SIGCONT)  # ... and the broker appends them all the same
        time.sleep(rng.uniform(0.1, 0.3))
        broker.kill9()
        time.sleep(0.2)
        broker.start()
    t.join(150)
    assert kills >= 2  # the producer was still sending when the broker died
    assert not t.is_alive() and not errors, errors[:3]
    values = read_all(broker.bootstrap, topic, PARTITIONS, isolation="read_uncommitted")
    by_partition: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for v in values:
        by_partition[int(v) % PARTITIONS].append(int(v))
    for p, vs in by_partition.items():
        assert vs == list(range(p, N, PARTITIONS)), f"partition {p}: duplicates, gaps or reordering"
