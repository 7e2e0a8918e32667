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
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer as CkProducer

from shoal.client import Producer as ShoalProducer
from tests.interop.txn_helpers import create_topic, read_all

N = 6000  # at least this many records; the producers keep sending until the broker's last restart
PARTITIONS = 3


def _values(stop: threading.Event, sent: list[int]) -> Iterator[int]:
    """0, 1, 2, ... paced (10 ms per 20 records) until ``stop`` is set and N are out; ``sent`` gets the count.
    Bounded by the faults, not by a count: a restart slow on a loaded machine cannot outlast the producer."""
    i = 0
    while i < N or not stop.is_set():
        yield i
        i += 1
        if i % 20 == 0:
            time.sleep(0.01)
    sent.append(i)


def _produce_confluent(bs: str, topic: str, errors: list, stop: threading.Event, sent: list[int]) -> None:
    p = CkProducer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 2,
                    "message.timeout.ms": 120000, "batch.num.messages": 50, "request.timeout.ms": 400})
    for i in _values(stop, sent):
        while True:
            try:
                p.produce(topic, value=b"%d" % i, partition=i % PARTITIONS,
                          on_delivery=lambda err, msg: errors.append(err) if err else None)
                break
            except BufferError:
                p.poll(0.05)
        if i % 20 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def _produce_shoal(bs: str, topic: str, errors: list, stop: threading.Event, sent: list[int]) -> None:
    p = ShoalProducer(bootstrap_servers=bs, linger_ms=2, batch_size=2000, delivery_timeout_ms=120000,
                      request_timeout_ms=400)
    try:
        for i in _values(stop, sent):
            p.send(topic, b"%d" % i, partition=i % PARTITIONS,
                   on_delivery=lambda err, md: errors.append(err) if err else None)
        p.flush(120)
    finally:
        p.close()


@pytest.mark.parametrize("client", ["confluent", "shoal"])
def test_no_duplicates_and_no_gaps_across_kill9(shoal_factory, client):
    broker = shoal_factory()
    topic = f"idem-{client}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    errors: list = []
    stop, sent = threading.Event(), []
    target = _produce_confluent if client == "confluent" else _produce_shoal
    t = threading.Thread(target=target, args=(broker.bootstrap, topic, errors, stop, sent), daemon=True)
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
    stop.set()
    t.join(150)
    assert kills == 3, "the producer stopped before the faults did"
    assert not t.is_alive() and not errors, errors[:3]
    values = read_all(broker.bootstrap, topic, PARTITIONS, isolation="read_uncommitted")
    by_partition: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for v in values:
        by_partition[int(v) % PARTITIONS].append(int(v))
    for p, vs in by_partition.items():
        assert vs == list(range(p, sent[0], PARTITIONS)), f"partition {p}: duplicates, gaps or reordering"
