"""Produce and fetch throughput: shoal vs librdkafka's mock cluster, one run.

    .venv/bin/python bench/produce_fetch.py [--records 200000] [--value-bytes 1024] [--repeat 3]

A confluent-kafka producer writes N records of 1 KiB (acks=1, then acks=all),
then a confluent-kafka consumer reads a set back (16,000 records, as the mock cluster
keeps only its newest few MB per partition); MB/s and records/s for shoal
and for librdkafka's built-in mock cluster (`test.mock.num.brokers`), and the
ratio shoal / mock. Also the time from starting `shoal serve` to its first
accepted connection. Medians over --repeat runs.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ApiVersions v0 request: size, api key 18, version 0, correlation id 1, client id "b"
_API_VERSIONS = struct.pack(">ihhih", 11, 18, 0, 1, 1) + b"b"


def start_shoal(data_dir: str, overrides: dict[str, str] | None = None) -> tuple[subprocess.Popen, int, float, float]:
    """Start `shoal serve` as a user would (bytecode caching on).

    Returns the process, its port, the seconds to its first accepted connection
    and the seconds until it has answered a first request (ApiVersions).
    """
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shoal.cli", "--log-level", "WARNING", "serve",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data_dir}",
         *(a for k, v in (overrides or {}).items() for a in ("--override", f"{k}={v}"))],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            break
        except OSError:
            if proc.poll() is not None or time.perf_counter() - t0 > 20:
                raise RuntimeError("shoal did not start") from None
            time.sleep(0.002)
    accepted = time.perf_counter() - t0
    with sock:
        sock.sendall(_API_VERSIONS)
        if len(sock.recv(4)) != 4:
            raise RuntimeError("no ApiVersions answer")
    return proc, port, accepted, time.perf_counter() - t0


def produce(bootstrap: str, topic: str, n: int, value: bytes, acks: str, conf: dict | None = None) -> float:
    """Seconds to produce and deliver `n` records; `conf` adds client settings (TLS, SASL)."""
    p = Producer({**(conf or {}), "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 2_000_000})
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return elapsed


def consume(bootstrap: str, topic: str, n: int, conf: dict | None = None) -> float:
    """Seconds from assign() to having read all `n` records from offset 0.

    The consumer is created (and connected, via a metadata request) before the
    clock starts, so the time is fetching, not client start-up.
    """
    c = Consumer({**(conf or {}), "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 1048576})
    c.list_topics(topic, timeout=10)
    t0 = start = time.perf_counter()
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    while got < n:
        # consume() waits for all the messages it asks for: never ask for more than remain
        for m in c.consume(min(10000, n - got), 1.0):
            if m.error() is not None:
                raise RuntimeError(m.error())
            got += 1
        if time.perf_counter() - start > 300:
            raise RuntimeError(f"consumed only {got}/{n} records in 300 s")
    elapsed = time.perf_counter() - t0
    c.close()
    return elapsed


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_target(bootstrap: str, label: str, n: int, fetch_n: int, size: int, repeat: int,
               create_topics: bool = True, broker_pid: int | None = None) -> dict[str, float]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    value = b"v" * size

    def topic(name: str) -> str:
        if create_topics:
            for f in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
                f.result(30)
        # (the mock cluster auto-creates topics with 4 partitions on first produce)
        return name

    times: dict[str, list[float]] = {"acks=1": [], "acks=all": [], "fetch": []}
    cpu0 = process_cpu_seconds(broker_pid) if broker_pid else 0.0
    for r in range(repeat):
        for acks in ("1", "all"):
            times[f"acks={acks}"].append(produce(bootstrap, topic(f"bench-{label}-{acks}-{r}"), n, value, acks))
    if broker_pid:
        cpu = process_cpu_seconds(broker_pid) - cpu0
        gb = 2 * repeat * n * size / 1e9
        print(f"  {label:5s} broker CPU while producing: {cpu / gb:.2f} s per GB produced "
              f"({cpu:.1f} s for {gb:.2f} GB): the broker alone could take ~{gb * 1000 / cpu:.0f} MB/s")
    # Read back a set small enough for the mock cluster to keep whole (it keeps only
    # its newest few MB per partition).
    fetch_topic = topic(f"bench-{label}-fetch")
    produce(bootstrap, fetch_topic, fetch_n, value, "1")
    for _ in range(repeat):
        times["fetch"].append(consume(bootstrap, fetch_topic, fetch_n))
    out = {}
    for name, ts in times.items():
        count = fetch_n if name == "fetch" else n
        t = statistics.median(ts)
        out[name] = count * size / 1e6 / t
        print(f"  {label:5s} {name:9s} {out[name]:8.1f} MB/s {count / t:10.0f} records/s  "
              f"(median of {len(ts)}, {count} records)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--fetch-records", type=int, default=16_000)
    ap.add_argument("--value-bytes", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-dir", default=None,
                    help="where shoal keeps its logs (default: the system temp dir); /dev/shm shows the "
                         "cost of the disk writes the in-memory mock cluster does not make")
    args = ap.parse_args()

    accepted, answered = [], []
    with tempfile.TemporaryDirectory(dir=args.data_dir) as d:
        for i in range(6):  # the first start writes the bytecode caches and is not counted
            proc, _, acc, ans = start_shoal(f"{d}/start{i}")
            if i:
                accepted.append(acc)
                answered.append(ans)
            proc.terminate()
            proc.wait(10)
        print(f"shoal serve start to first accepted connection: median {statistics.median(accepted) * 1000:.0f} ms "
              f"(min {min(accepted) * 1000:.0f}, max {max(accepted) * 1000:.0f}, 5 starts); "
              f"to first answered request: median {statistics.median(answered) * 1000:.0f} ms")

        proc, port, _, _ = start_shoal(f"{d}/data")
        try:
            print(f"{args.records} records x {args.value_bytes} B, {PARTITIONS} partitions, confluent-kafka clients")
            shoal = run_target(f"127.0.0.1:{port}", "shoal", args.records, args.fetch_records, args.value_bytes,
                               args.repeat, broker_pid=proc.pid)
        finally:
            proc.terminate()
            proc.wait(20)

    holder = Producer({"bootstrap.servers": "unused:9092", "test.mock.num.brokers": 1})
    brokers = holder.list_topics(timeout=10).brokers
    mock_bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers.values())
    mock = run_target(mock_bootstrap, "mock", args.records, args.fetch_records, args.value_bytes, args.repeat,
                      create_topics=False)
    for name in shoal:
        print(f"ratio shoal/mock {name:9s} {shoal[name] / mock[name]:.2f}x")


if __name__ == "__main__":
    main()
