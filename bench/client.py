"""Producer / consumer throughput: the shoal client beside confluent-kafka (librdkafka).

    .venv/bin/python bench/client.py [--records 200000] [--size 1024] [--partitions 4]
                                     [--bootstrap HOST:PORT | --mock] [--repeat 1]

By default a `shoal serve` subprocess (one node, data in a temporary directory) is started
and both clients run the same workload against it: N records of --size bytes (no key)
produced with acks=1, linger.ms=5, batch.size=256 KiB, then read back by assign() from
offset 0.  --mock uses librdkafka's in-process mock cluster instead (it keeps only the
tail of each partition, so the consumers read what is retained).  Prints MB/s and
records/s (medians over --repeat); nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import confluent_kafka.admin

from shoal.client import Consumer, Producer, TopicPartition

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


def shoal_consume(bs: str, topic: str, parts: list[int], n: int) -> float:
    c = Consumer({"bootstrap.servers": bs, "auto.offset.reset": "earliest", "max.poll.records": 2000})
    c.assign([TopicPartition(topic, p) for p in parts])
    got = 0
    t = time.perf_counter()
    while got < n:
        got += sum(len(v) for v in c.poll(1000).values())
    dt = time.perf_counter() - t
    c.close()
    return dt


def ck_consume(bs: str, topic: str, parts: list[int], n: int) -> float:
    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "bench-" + topic,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0})
    c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in parts])
    got = 0
    t = time.perf_counter()
    while got < n:
        msgs = c.consume(1000, 1.0)
        got += sum(1 for m in msgs if m.error() is None)
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


def run(bs: str, n: int, size: int, partitions: int, repeat: int) -> None:
    value = b"x" * size
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bs, "log_level": 0})
    print(f"bootstrap={bs} records={n} value={size}B partitions={partitions} repeat={repeat}")
    for name, produce, consume in (("shoal", shoal_produce, shoal_consume), ("confluent-kafka", ck_produce, ck_consume)):
        prod, cons = [], []
        for _ in range(repeat):
            topic = f"bench-{name}-{uuid.uuid4().hex[:6]}"
            for f in admin.create_topics([confluent_kafka.admin.NewTopic(topic, partitions, 1)]).values():
                f.result(15)
            dt = produce(bs, topic, n, value)
            prod.append(dt)
            w = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "wm", "log_level": 0})
            avail = 0
            for p in range(partitions):
                lo, hi = w.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)
                avail += hi - lo
            w.close()
            cons.append((consume(bs, topic, list(range(partitions)), avail), avail))
        dt = statistics.median(prod)
        print(f"{name:16s} produce {n * size / 1e6 / dt:8.1f} MB/s {n / dt:10.0f} rec/s")
        dt, avail = sorted(cons)[len(cons) // 2]
        print(f"{name:16s} consume {avail * size / 1e6 / dt:8.1f} MB/s {avail / dt:10.0f} rec/s ({avail} read)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--bootstrap", help="an already running cluster")
    where.add_argument("--mock", action="store_true", help="librdkafka's mock cluster")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    if args.bootstrap:
        ctx: contextlib.AbstractContextManager[str] = contextlib.nullcontext(args.bootstrap)
    elif args.mock:
        ctx = mock_cluster()
    else:
        ctx = shoal_broker(args.partitions)
    with ctx as bs:
        run(bs, args.records, args.size, args.partitions, args.repeat)


if __name__ == "__main__":
    main()
