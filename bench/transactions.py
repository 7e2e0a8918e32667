"""Transactions: the throughput cost of transactions, and init/commit/abort latency, one run.

    .venv/bin/python bench/transactions.py [--seconds 8] [--repeat 3] [--nodes 1]

Against one `shoal serve` (started here, data in a temp dir):

1. A confluent-kafka producer writes 1 KiB values for --seconds: non-transactional
   (idempotent, acks=all), then transactional committing every 100 ms, then every
   1,000 records. Records/s of each, and the cost of transactions as a ratio.
2. Latency of init_transactions(), commit_transaction() (one record per
   transaction) and abort_transaction(): medians and p99 of 200 each.
3. The exactly-once copier (consume-transform-produce, read_committed, offsets in
   the transaction, commit every 1,000 records) with confluent-kafka: records/s.
4. The broker's CPU seconds per phase (from /proc).

Medians over --repeat runs where it says so.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 4
VALUE = b"x" * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_shoal(data_dir: str, nodes: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shoal.cli", "--log-level", "WARNING", "serve", "--nodes", str(nodes),
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data_dir}",
         "--override", "group.initial.rebalance.delay.ms=0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("shoal did not start") from None
            time.sleep(0.01)
    return proc, ",".join(f"127.0.0.1:{port + i}" for i in range(nodes))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def create(bs: str, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for fut in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
        fut.result(20)


def produce_for(bs: str, topic: str, seconds: float, mode: str, tid: str) -> float:
    """Records/s over `seconds`; mode: plain | every100ms | every1000."""
    conf = {"bootstrap.servers": bs, "linger.ms": 5, "acks": "all", "enable.idempotence": True,
            "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_000_000}
    if mode != "plain":
        conf["transactional.id"] = tid
    p = Producer(conf)
    if mode != "plain":
        p.init_transactions(30)
        p.begin_transaction()
    n = 0
    in_txn = 0
    t0 = time.perf_counter()
    last_commit = t0
    end = t0 + seconds
    while True:
        try:
            p.produce(topic, VALUE, partition=n % PARTITIONS)
        except BufferError:
            p.poll(0.001)
            continue
        n += 1
        in_txn += 1
        if n % 500 == 0:
            p.poll(0)
            now = time.perf_counter()
            if now >= end:
                break
        if mode == "every1000" and in_txn >= 1000 or mode == "every100ms" and n % 50 == 0 \
                and time.perf_counter() - last_commit >= 0.1:
            p.commit_transaction(30)
            p.begin_transaction()
            in_txn = 0
            last_commit = time.perf_counter()
    if mode != "plain":
        p.commit_transaction(30)
    else:
        p.flush(60)
    return n / (time.perf_counter() - t0)


def latencies(bs: str, topic: str, count: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"init": [], "commit": [], "abort": []}
    for i in range(min(count, 50)):
        p = Producer({"bootstrap.servers": bs, "transactional.id": f"lat-init-{i % 5}"})
        t0 = time.perf_counter()
        p.init_transactions(30)
        out["init"].append(time.perf_counter() - t0)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "lat", "linger.ms": 0})
    p.init_transactions(30)
    for i in range(count):
        p.begin_transaction()
        p.produce(topic, VALUE, partition=i % PARTITIONS)
        p.flush(30)  # the record is acknowledged: what is timed is the commit (or abort) itself
        t0 = time.perf_counter()
        if i % 2:
            p.abort_transaction(30)
            out["abort"].append(time.perf_counter() - t0)
        else:
            p.commit_transaction(30)
            out["commit"].append(time.perf_counter() - t0)
    return out


def copier(bs: str, src: str, dst: str, n: int) -> float:
    """Copy n records src -> dst exactly once; records/s."""
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "bench-copier", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(src, p, 0) for p in range(PARTITIONS)])
    p = Producer({"bootstrap.servers": bs, "transactional.id": "bench-copier", "linger.ms": 5})
    p.init_transactions(30)
    done = 0
    t0 = time.perf_counter()
    while done < n:
        msgs = [m for m in consumer.consume(1000, 1.0) if not m.error()]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            while True:
                try:
                    p.produce(dst, m.value(), partition=m.partition())
                    break
                except BufferError:
                    p.poll(0.001)
        p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                      consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        done += len(msgs)
    elapsed = time.perf_counter() - t0
    consumer.close()
    return done / elapsed


def fill(bs: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 2_000_000})
    for i in range(n):
        while True:
            try:
                p.produce(topic, VALUE, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.001)
    p.flush(120)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--latency-count", type=int, default=400)
    ap.add_argument("--copy-records", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        proc, bs = start_shoal(d, args.nodes)
        try:
            create(bs, "plain", "txn100ms", "txn1000", "lat", "copy-in", "copy-out")
            rates: dict[str, list[float]] = {"plain": [], "every100ms": [], "every1000": []}
            cpu: dict[str, list[float]] = {k: [] for k in rates}
            produce_for(bs, "plain", 2.0, "plain", "warmup")  # connections, topic metadata, page cache
            order = [("plain", "plain"), ("every100ms", "txn100ms"), ("every1000", "txn1000")]
            for r in range(args.repeat):
                for mode, topic in order[r % 3:] + order[:r % 3]:  # each mode goes first once in three
                    c0 = cpu_seconds(proc.pid)
                    rates[mode].append(produce_for(bs, topic, args.seconds, mode, f"bench-{mode}-{r}"))
                    cpu[mode].append(cpu_seconds(proc.pid) - c0)
            plain = statistics.median(rates["plain"])
            print(f"shoal, {args.nodes} node(s); 1 KiB values, {PARTITIONS} partitions, acks=all, idempotent; "
                  f"{args.seconds:.0f} s per run, median of {args.repeat}")
            for mode in rates:
                med = statistics.median(rates[mode])
                print(f"  {mode:11s} {med:10,.0f} rec/s  {med * len(VALUE) / 1e6:7.1f} MB/s  "
                      f"{med / plain:5.3f}x plain  (runs {', '.join(f'{x:,.0f}' for x in rates[mode])}; "
                      f"broker CPU {statistics.median(cpu[mode]):.1f} s)")
            lat = latencies(bs, "lat", args.latency_count)
            for k, vs in lat.items():
                print(f"  {k:6s} latency: p50 {statistics.median(vs) * 1000:6.2f} ms  p99 {pct(vs, 0.99) * 1000:6.2f} ms"
                      f"  ({len(vs)} calls)")
            fill(bs, "copy-in", args.copy_records)
            c0 = cpu_seconds(proc.pid)
            rate = copier(bs, "copy-in", "copy-out", args.copy_records)
            print(f"  exactly-once copier (confluent-kafka, commit per <=1,000 records): {rate:,.0f} rec/s "
                  f"({args.copy_records:,} records; broker CPU {cpu_seconds(proc.pid) - c0:.1f} s)")
        finally:
            proc.terminate()
            proc.wait(20)


if __name__ == "__main__":
    main()
