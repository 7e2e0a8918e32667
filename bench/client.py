"""Producer / consumer throughput: the shoal client (sync and asyncio) beside aiokafka and
confluent-kafka (librdkafka).

    .venv/bin/python bench/client.py [--records 200000] [--size 1024] [--partitions 4]
                                     [--bootstrap HOST:PORT | --mock] [--repeat 1]
                                     [--clients shoal,shoal-aio,aiokafka,confluent-kafka]
                                     [--produce-only]

By default a `shoal serve` subprocess (one node, data in a temporary directory) is started
and every client runs the same workload against it: N records of --size bytes (no key)
produced with acks=1, linger.ms=5, batch.size=256 KiB, then read back by assign() from
offset 0 (max.poll.records 2000).  --mock uses librdkafka's in-process mock cluster instead
(it keeps only the tail of each partition, so the consumers read what is retained).  The
clients take turns within each repeat (the machine's noise falls on all of them alike).
Prints MB/s and records/s (medians over --repeat) and each client's ratio to aiokafka's;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import confluent_kafka
import confluent_kafka.admin

from shoal.client import AIOConsumer, AIOProducer, Consumer, Producer, TopicPartition

PRODUCER_CONF = {"acks": "1", "linger.ms": 5, "batch.size": 262144}


def shoal_produce(bs: str, topic: str, n: int, value: bytes) -> float:
    p = Producer({"bootstrap.servers": bs, **PRODUCER_CONF})
    p.partitions_for(topic)  # metadata outside the timed part, as for librdkafka below
    t = time.perf_counter()
    for _ in range(n):
        p.send(topic, value)
    p.flush()
    dt = time.perf_counter() - t
    p.close()
    return dt


def shoal_aio_produce(bs: str, topic: str, n: int, value: bytes) -> float:
    async def go() -> float:
        p = AIOProducer({"bootstrap.servers": bs, **PRODUCER_CONF})
        await p.start()
        await p.partitions_for(topic)
        t = time.perf_counter()
        for _ in range(n):
            await p.send(topic, value)
        await p.flush()
        dt = time.perf_counter() - t
        await p.close()
        return dt
    return asyncio.run(go())


def aiokafka_produce(bs: str, topic: str, n: int, value: bytes) -> float:
    import aiokafka

    async def go() -> float:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bs, acks=1, linger_ms=5, max_batch_size=262144)
        await p.start()
        await p.partitions_for(topic)
        t = time.perf_counter()
        for _ in range(n):
            await p.send(topic, value)
        await p.flush()
        dt = time.perf_counter() - t
        await p.stop()
        return dt
    return asyncio.run(go())


def ck_produce(bs: str, topic: str, n: int, value: bytes) -> float:
    p = confluent_kafka.Producer({"bootstrap.servers": bs, **PRODUCER_CONF, "log_level": 0})
    p.list_topics(topic, timeout=10)
    t = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    p.flush()
    return time.perf_counter() - t


# --touch: the consumers read every record's value (as an application would), not only count them.
TOUCH = False


def _count(batches: Iterable[Sequence[Any]], value: Callable[[Any], Any]) -> int:
    """How many records; with TOUCH, each record's value is read too."""
    if not TOUCH:
        return sum(len(v) for v in batches)
    got = 0
    for recs in batches:
        for r in recs:
            value(r)
            got += 1
    return got


def _value(r: Any) -> Any:
    return r.value


def shoal_consume(bs: str, topic: str, parts: list[int], n: int) -> float:
    c = Consumer({"bootstrap.servers": bs, "auto.offset.reset": "earliest", "max.poll.records": 2000})
    c.assign([TopicPartition(topic, p) for p in parts])
    got = 0
    t = time.perf_counter()
    while got < n:
        got += _count(c.poll(1000).values(), _value)
    dt = time.perf_counter() - t
    c.close()
    return dt


def shoal_aio_consume(bs: str, topic: str, parts: list[int], n: int) -> float:
    async def go() -> float:
        c = AIOConsumer({"bootstrap.servers": bs, "auto.offset.reset": "earliest", "max.poll.records": 2000})
        await c.start()  # as aiokafka's below: connecting is not part of the timed work
        c.assign([TopicPartition(topic, p) for p in parts])
        got = 0
        t = time.perf_counter()
        while got < n:
            got += _count((await c.poll(1000)).values(), _value)
        dt = time.perf_counter() - t
        await c.close()
        return dt
    return asyncio.run(go())


def aiokafka_consume(bs: str, topic: str, parts: list[int], n: int) -> float:
    import aiokafka

    async def go() -> float:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                                      enable_auto_commit=False, max_poll_records=2000)
        await c.start()
        c.assign([aiokafka.TopicPartition(topic, p) for p in parts])
        got = 0
        t = time.perf_counter()
        while got < n:
            got += _count((await c.getmany(timeout_ms=1000, max_records=2000)).values(), _value)
        dt = time.perf_counter() - t
        await c.stop()
        return dt
    return asyncio.run(go())


def ck_consume(bs: str, topic: str, parts: list[int], n: int) -> float:
    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "bench-" + topic,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0})
    c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in parts])
    got = 0
    t = time.perf_counter()
    while got < n:
        msgs = c.consume(1000, 1.0)
        got += _count([[m for m in msgs if m.error() is None]], lambda m: m.value())
    dt = time.perf_counter() - t
    c.close()
    return dt


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def shoal_broker(partitions: int) -> Iterator[str]:
    """A `shoal serve` subprocess on a free loopback port, stopped on exit."""
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as data:
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "shoal.cli", "--log-level", "WARNING", "serve",
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}",
             "--override", f"num.partitions={partitions}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.05).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("shoal did not start") from None
                    time.sleep(0.01)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


@contextlib.contextmanager
def mock_cluster() -> Iterator[str]:
    owner = confluent_kafka.Producer({"test.mock.num.brokers": 3, "log_level": 0})
    yield ",".join(f"{b.host}:{b.port}" for b in owner.list_topics(timeout=10).brokers.values())
    del owner


CLIENTS: dict[str, tuple[Callable[[str, str, int, bytes], float], Callable[[str, str, list[int], int], float]]] = {
    "shoal": (shoal_produce, shoal_consume),
    "shoal-aio": (shoal_aio_produce, shoal_aio_consume),
    "aiokafka": (aiokafka_produce, aiokafka_consume),
    "confluent-kafka": (ck_produce, ck_consume),
}


def run(bs: str, n: int, size: int, partitions: int, repeat: int, clients: list[str],
        produce_only: bool = False) -> None:
    value = b"x" * size
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bs, "log_level": 0})
    print(f"bootstrap={bs} records={n} value={size}B partitions={partitions} repeat={repeat} touch={TOUCH}")
    prod: dict[str, list[float]] = {name: [] for name in clients}
    cons: dict[str, list[tuple[float, int]]] = {name: [] for name in clients}
    for _ in range(repeat):
        for name in clients:
            produce, consume = CLIENTS[name]
            topic = f"bench-{name}-{uuid.uuid4().hex[:6]}"
            for f in admin.create_topics([confluent_kafka.admin.NewTopic(topic, partitions, 1)]).values():
                f.result(15)
            prod[name].append(produce(bs, topic, n, value))
            if produce_only:
                for f in admin.delete_topics([topic]).values():
                    with contextlib.suppress(Exception):
                        f.result(15)
                continue
            w = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "wm", "log_level": 0})
            avail = 0
            for p in range(partitions):
                lo, hi = w.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)
                avail += hi - lo
            w.close()
            cons[name].append((consume(bs, topic, list(range(partitions)), avail), avail))
            for f in admin.delete_topics([topic]).values():
                with contextlib.suppress(Exception):
                    f.result(15)
    rates: dict[str, tuple[float, float]] = {}
    for name in clients:
        pdt = statistics.median(prod[name])
        runs = " ".join(f"{n * size / 1e6 / dt:.1f}" for dt in prod[name])
        print(f"{name:16s} produce {n * size / 1e6 / pdt:8.1f} MB/s {n / pdt:10.0f} rec/s (runs: {runs})")
        if produce_only:
            rates[name] = (n * size / 1e6 / pdt, 0.0)
            continue
        cdt, avail = sorted(cons[name])[len(cons[name]) // 2]
        rates[name] = (n * size / 1e6 / pdt, avail * size / 1e6 / cdt)
        print(f"{name:16s} consume {rates[name][1]:8.1f} MB/s {avail / cdt:10.0f} rec/s ({avail} read)")
    if "aiokafka" in rates:
        base = rates["aiokafka"]
        for name in clients:
            if name == "aiokafka":
                continue
            line = f"{name:16s} / aiokafka: produce {rates[name][0] / base[0]:.2f}x"
            if not produce_only:
                line += f" consume {rates[name][1] / base[1]:.2f}x"
            print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--bootstrap", help="an already running cluster")
    where.add_argument("--mock", action="store_true", help="librdkafka's mock cluster")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--clients", default="shoal,shoal-aio,aiokafka,confluent-kafka",
                    help="comma-separated, from: " + ", ".join(CLIENTS))
    ap.add_argument("--touch", action="store_true", help="consumers read each record's value, not only count")
    ap.add_argument("--produce-only", action="store_true", help="time the producers only (no read back)")
    args = ap.parse_args()
    global TOUCH
    TOUCH = args.touch
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        ap.error(f"unknown clients {sorted(unknown)}")
    if args.bootstrap:
        ctx: contextlib.AbstractContextManager[str] = contextlib.nullcontext(args.bootstrap)
    elif args.mock:
        ctx = mock_cluster()
    else:
        ctx = shoal_broker(args.partitions)
    with ctx as bs:
        run(bs, args.records, args.size, args.partitions, args.repeat, clients, args.produce_only)


if __name__ == "__main__":
    main()
