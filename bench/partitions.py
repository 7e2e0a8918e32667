"""100,000 partitions on one broker: creation, Metadata, restart, memory and open files.

    .venv/bin/python bench/partitions.py [--partitions 100000] [--per-topic 5000] [--with-data 10000]

Starts `shoal serve` (one node), creates the partitions with CreateTopics (one topic of
--per-topic partitions per request: Kafka's limit is 10,000 records per request), times a
Metadata request for every topic, stops the broker cleanly, starts it again and times the start
and the same Metadata request. Then writes one record to each of --with-data partitions (so
they have files), restarts once more and times that too. Prints the broker's RSS and open
files (from /proc) at each step.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from shoal.protocol.framing import decode_response_header, encode_request, response_header_version  # noqa: E402
from shoal.protocol.generated.create_topics_request import CreateTopicsRequest  # noqa: E402
from shoal.protocol.generated.create_topics_response import CreateTopicsResponse  # noqa: E402
from shoal.protocol.generated.metadata_request import MetadataRequest  # noqa: E402
from shoal.protocol.generated.metadata_response import MetadataResponse  # noqa: E402
from shoal.protocol.generated.produce_request import ProduceRequest  # noqa: E402
from shoal.protocol.record_encode import build_batch  # noqa: E402
from shoal.testing.process import BrokerProcess  # noqa: E402


class Raw:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.corr = 0

    def call(self, key: int, version: int, req, resp_cls):
        self.corr += 1
        self.sock.sendall(encode_request(key, version, self.corr, "bench", req.encode(version)))
        (size,) = struct.unpack(">i", self._read(4))
        frame = self._read(size)
        _, offset = decode_response_header(frame, response_header_version(key, version))
        return resp_cls.decode(memoryview(frame)[offset:], version)

    def send(self, key: int, version: int, req) -> None:
        self.corr += 1
        self.sock.sendall(encode_request(key, version, self.corr, "bench", req.encode(version)))

    def drain(self, answers: int) -> int:
        for _ in range(answers):
            (size,) = struct.unpack(">i", self._read(4))
            self._read(size)
        return 0

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return bytes(out)


def proc_facts(pid: int) -> str:
    rss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    return f"RSS {rss / 1024:.0f} MB, {len(os.listdir(f'/proc/{pid}/fd'))} open files"


def metadata_all(port: int) -> tuple[float, int]:
    """Seconds from sending Metadata (all topics) to having the whole answer (before this client
    decodes it), and the partitions in it."""
    c = Raw(port)
    c.send(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    t0 = time.perf_counter()
    (size,) = struct.unpack(">i", c._read(4))
    frame = c._read(size)
    seconds = time.perf_counter() - t0
    _, offset = decode_response_header(frame, response_header_version(3, 12))
    m = MetadataResponse.decode(memoryview(frame)[offset:], 12)
    return seconds, sum(len(t.partitions) for t in m.topics)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--per-topic", type=int, default=5_000)
    ap.add_argument("--with-data", type=int, default=10_000)
    args = ap.parse_args()
    data = Path(tempfile.mkdtemp(prefix="shoal-partitions-")) / "data"
    b = BrokerProcess(data).start()
    try:
        port = next(iter(b.ports.values()))
        print(f"started: {proc_facts(b.proc.pid)}")
        c = Raw(port)
        topics = []
        t0 = time.perf_counter()
        made = 0
        while made < args.partitions:
            n = min(args.per_topic, args.partitions - made)
            name = f"p{len(topics)}"
            r = c.call(19, 5, CreateTopicsRequest(timeout_ms=60000, topics=[CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=n, replication_factor=1)]), CreateTopicsResponse)
            assert r.topics[0].error_code == 0, r.topics[0]
            topics.append((name, n))
            made += n
        created = time.perf_counter() - t0
        print(f"created {made:,} partitions in {len(topics)} CreateTopics requests: {created:.2f} s; "
              f"{proc_facts(b.proc.pid)}")
        seconds, count = metadata_all(port)
        print(f"Metadata for all topics: {count:,} partitions in {seconds:.2f} s")
        for label in ("restart (clean)", "restart with data"):
            if label == "restart with data":
                done = 0
                pending = 0
                batch = build_batch([(1000, None, b"x", [])])
                for name, n in topics:
                    for p in range(n):
                        if done >= args.with_data:
                            break
                        c.send(0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
                            ProduceRequest.TopicProduceData(name=name, partition_data=[
                                ProduceRequest.PartitionProduceData(index=p, records=batch)])]))
                        done += 1
                        pending += 1
                        if pending == 50:  # pipelined, in windows
                            pending = c.drain(pending)
                c.drain(pending)
                print(f"wrote a record to {done:,} partitions: {proc_facts(b.proc.pid)}")
            b.stop()
            t0 = time.perf_counter()
            b.start(timeout=300)
            port = next(iter(b.ports.values()))
            started = time.perf_counter() - t0
            seconds, count = metadata_all(port)
            print(f"{label}: started in {started:.2f} s; Metadata {count:,} partitions in {seconds:.2f} s; "
                  f"{proc_facts(b.proc.pid)}")
            c = Raw(port)
    finally:
        b.stop()


if __name__ == "__main__":
    main()
