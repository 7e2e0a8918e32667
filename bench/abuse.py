"""A normal producer's latency and the broker's memory while other clients abuse the broker.

    .venv/bin/python bench/abuse.py [--phase-seconds 10]

Starts `shoal serve` (one node) and a confluent-kafka producer sending 1 KiB records at a steady
rate (acks=1, linger.ms=0), measuring each record's produce-to-acknowledgement latency. Phase by
phase, other clients abuse the same broker:

1. nothing (the baseline);
2. 5,000 idle connections;
3. 100 connections each announcing a 100 MB request and sending a few bytes of it;
4. 4 connections fetching as much as they may, over and over, from a topic holding 300 MB;
5. CreateTopics of 10,000 partitions (over Kafka's per-request limit: refused) and of 9,999
   partitions (created), again and again.

Prints, per phase, the producer's median and p99 latency and records acknowledged, and the
broker's RSS at the end of the phase and its peak (from /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from shoal.protocol.framing import decode_response_header, encode_request, response_header_version  # noqa: E402
from shoal.protocol.generated.create_topics_request import CreateTopicsRequest  # noqa: E402
from shoal.protocol.generated.create_topics_response import CreateTopicsResponse  # noqa: E402
from shoal.protocol.generated.fetch_request import FetchRequest  # noqa: E402
from shoal.testing.process import BrokerProcess  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class SteadyProducer(threading.Thread):
    """Sends ``rate`` records a second and keeps each one's acknowledgement latency."""

    def __init__(self, bootstrap: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
        self.rate = rate
        self.latencies: list[tuple[float, float]] = []  # (sent at, ms)
        self.errors = 0
        self.stop = threading.Event()

    def run(self) -> None:
        value = b"v" * 1024
        interval = 1 / self.rate
        next_at = time.perf_counter()
        while not self.stop.is_set():
            sent = time.perf_counter()

            def done(err, _msg, sent=sent):
                if err is not None:
                    self.errors += 1
                else:
                    self.latencies.append((sent, (time.perf_counter() - sent) * 1000))

            self.p.produce("steady", value=value, on_delivery=done)
            self.p.poll(0)
            next_at += interval
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        self.p.flush(30)

    def window(self, start: float, end: float) -> list[float]:
        return [ms for at, ms in self.latencies if start <= at < end]


async def idle_connections(port: int, n: int, hold: float) -> None:
    conns = []
    for _ in range(n):
        conns.append(await asyncio.open_connection("127.0.0.1", port))
    await asyncio.sleep(hold)
    for _, w in conns:
        w.close()


async def announced_frames(port: int, n: int, hold: float) -> None:
    conns = []
    for _ in range(n):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(struct.pack(">i", 100_000_000) + b"\x00\x00\x00\x09")  # 100 MB announced, 4 bytes sent
        conns.append((r, w))
    await asyncio.sleep(hold)
    for _, w in conns:
        w.close()


async def huge_fetches(port: int, n: int, seconds: float) -> int:
    fetched = 0

    async def one() -> None:
        nonlocal fetched
        r, w = await asyncio.open_connection("127.0.0.1", port)
        req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=0x7FFFFFFF, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="big", partitions=[
                               FetchRequest.FetchPartition(partition=p, fetch_offset=0,
                                                           partition_max_bytes=0x7FFFFFFF) for p in range(4)])])
        frame = encode_request(1, 12, 1, "abuse", req.encode(12))
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            w.write(frame)
            await w.drain()
            (size,) = struct.unpack(">i", await r.readexactly(4))
            await r.readexactly(size)
            fetched += size
        w.close()

    await asyncio.gather(*(one() for _ in range(n)))
    return fetched


async def big_create_topics(port: int, seconds: float) -> list[int]:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    codes = []
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        for count in (10_000, 9_999):
            i += 1
            req = CreateTopicsRequest(timeout_ms=30000, topics=[CreateTopicsRequest.CreatableTopic(
                name=f"wide-{i}", num_partitions=count, replication_factor=1)])
            w.write(encode_request(19, 5, i, "abuse", req.encode(5)))
            await w.drain()
            (size,) = struct.unpack(">i", await r.readexactly(4))
            frame = await r.readexactly(size)
            _, offset = decode_response_header(frame, response_header_version(19, 5))
            codes.append(CreateTopicsResponse.decode(memoryview(frame)[offset:], 5).topics[0].error_code)
            await asyncio.sleep(0.5)
    w.close()
    return codes


def abuse(kind: str, port: int, seconds: float):
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    if kind == "idle":
        return asyncio.run(idle_connections(port, 5000, seconds))
    if kind == "announce":
        return asyncio.run(announced_frames(port, 100, seconds))
    if kind == "fetch":
        return asyncio.run(huge_fetches(port, 4, seconds))
    if kind == "create":
        return asyncio.run(big_create_topics(port, seconds))
    time.sleep(seconds)
    return None


def fill(bootstrap: str, mb: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_000_000})
    value = os.urandom(10_000)
    for i in range(mb * 100):
        while True:
            try:
                p.produce("big", value=value, partition=i % 4)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase-seconds", type=float, default=10)
    ap.add_argument("--rate", type=int, default=500)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    data = Path(tempfile.mkdtemp(prefix="shoal-abuse-")) / "data"
    broker = BrokerProcess(data).start()
    pid = broker.proc.pid
    port = next(iter(broker.ports.values()))
    bootstrap = broker.bootstrap_servers
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic("steady", 1, 1), NewTopic("big", 4, 1)]).values():
            f.result(30)
        fill(bootstrap, 300)
        producer = SteadyProducer(bootstrap, args.rate)
        producer.start()
        time.sleep(2)
        s = args.phase_seconds
        phases = [
            ("nothing (baseline)", "sleep"),
            ("5,000 idle connections", "idle"),
            ("100 x a 100 MB request announced", "announce"),
            ("4 x huge Fetch, repeated", "fetch"),
            ("CreateTopics 10,000 / 9,999 partitions", "create"),
        ]
        print(f"steady producer: {args.rate} records/s of 1 KiB, acks=1; {s:.0f} s per phase")
        print("| abuse | producer p50 ms | p99 ms | records acked | broker RSS MB at end | peak RSS MB so far |")
        print("|---|---|---|---|---|---|")
        ctx = multiprocessing.get_context("spawn")
        for name, kind in phases:
            start = time.perf_counter()
            # The abusers run in a process of their own: in this one they would hold the GIL the
            # steady producer's delivery callbacks need, and their delay would count as the broker's.
            with ctx.Pool(1) as pool:
                result = pool.apply(abuse, (kind, port, s))
            end = time.perf_counter()
            if kind == "create":
                codes = result
            time.sleep(0.5)
            lat = sorted(producer.window(start, end))
            p50 = statistics.median(lat) if lat else float("nan")
            p99 = lat[int(0.99 * (len(lat) - 1))] if lat else float("nan")
            print(f"| {name} | {p50:.1f} | {p99:.1f} | {len(lat):,} | {rss_mb(pid):.0f} | {hwm_mb(pid):.0f} |",
                  flush=True)
        producer.stop.set()
        producer.join(30)
        print(f"producer errors: {producer.errors}; CreateTopics answers: "
              f"{sum(c == 44 for c in codes)} POLICY_VIOLATION (10,000), {sum(c == 0 for c in codes)} created (9,999)")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
