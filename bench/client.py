"""Producer / consumer throughput: the shoal client beside confluent-kafka (librdkafka).

    .venv/bin/python bench/client.py [--bootstrap HOST:PORT] [--records 200000] [--size 1024]

Without --bootstrap a librdkafka mock cluster (3 brokers, in this process) is used.
Prints MB/s and records/s; nothing is asserted.
"""

from __future__ import annotations

import argparse
import time
import uuid

import confluent_kafka
import confluent_kafka.admin

from shoal.client import Consumer, Producer, TopicPartition


def shoal_produce(bs: str, topic: str, n: int, value: bytes) -> float:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 262144})
    t = time.perf_counter()
    for _ in range(n):
        p.send(topic, value)
    p.flush()
    dt = time.perf_counter() - t
    p.close()
    return dt


def ck_produce(bs: str, topic: str, n: int, value: bytes) -> float:
    p = confluent_kafka.Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 262144, "log_level": 0})
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()
    owner = None
    bs = args.bootstrap
    if bs is None:
        owner = confluent_kafka.Producer({"test.mock.num.brokers": 3, "log_level": 0})
        bs = ",".join(f"{b.host}:{b.port}" for b in owner.list_topics(timeout=10).brokers.values())
    n, value = args.records, b"x" * args.size
    mb = n * args.size / 1e6
    print(f"bootstrap={bs} records={n} value={args.size}B")
    for name, produce, consume in (("shoal", shoal_produce, shoal_consume), ("confluent-kafka", ck_produce, ck_consume)):
        topic = f"bench-{name}-{uuid.uuid4().hex[:6]}"
        dt = produce(bs, topic, n, value)
        print(f"{name:16s} produce {mb / dt:8.1f} MB/s {n / dt:10.0f} rec/s")
        md = confluent_kafka.admin.AdminClient({"bootstrap.servers": bs}).list_topics(topic, timeout=10)
        parts = sorted(md.topics[topic].partitions)
        # The mock cluster keeps only the tail of each partition: consume what is retained.
        w = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "wm", "log_level": 0})
        avail = 0
        for p in parts:
            lo, hi = w.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)
            avail += hi - lo
        w.close()
        dt = consume(bs, topic, parts, avail)
        print(f"{name:16s} consume {avail * args.size / 1e6 / dt:8.1f} MB/s {avail / dt:10.0f} rec/s ({avail} retained)")
    del owner


if __name__ == "__main__":
    main()
