"""What record validation at produce costs: the broker's CPU per record, against a baseline tree.

    .venv/bin/python bench/produce_validation.py --baseline /path/to/older/checkout [--records 300000]

Runs `shoal serve` from this tree and from --baseline (a checkout of shoal from before produce
validated records, e.g. `git worktree add /tmp/base d094923`), alternately, and produces the same
records with confluent-kafka (acks=1, linger.ms=5) in three shapes: 1 KiB values, 100-byte
values, and 1 KiB values lz4-compressed. Prints the broker process's CPU microseconds per record
and the producer's records/s, medians over --repeat runs, and the ratio this tree / baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from produce_fetch import PARTITIONS, process_cpu_seconds, start_shoal  # noqa: E402

SHAPES = [("1 KiB values", 1024, "none"), ("100 B values", 100, "none"), ("1 KiB values, lz4", 1024, "lz4")]


def produce(bootstrap: str, n: int, size: int, codec: str) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "compression.type": codec,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 2_000_000})
    # Values differ record to record (a counter in the first bytes), so lz4 has work to do.
    filler = bytes(range(256)) * (size // 256 + 1)
    t0 = time.perf_counter()
    for i in range(n):
        value = b"%08d" % i + filler[: size - 8]
        while True:
            try:
                p.produce("v", value=value, key=b"%d" % (i % 1000))
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return time.perf_counter() - t0


def measure(tree: str | None, records: int, size: int, codec: str) -> tuple[float, float]:
    env_before = os.environ.get("PYTHONPATH")
    with tempfile.TemporaryDirectory() as d:
        if tree is not None:
            os.environ["PYTHONPATH"] = tree
        try:
            proc, port, _, _ = start_shoal(d)
        finally:
            if env_before is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = env_before
        try:
            bootstrap = f"127.0.0.1:{port}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for f in admin.create_topics([NewTopic("v", PARTITIONS, 1)]).values():
                f.result(30)
            cpu0 = process_cpu_seconds(proc.pid)
            seconds = produce(bootstrap, records, size, codec)
            cpu = process_cpu_seconds(proc.pid) - cpu0
        finally:
            proc.terminate()
            proc.wait(30)
    return cpu / records * 1e6, records / seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="a shoal checkout to compare with")
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{args.records} records per run, medians of {args.repeat} runs, trees alternating")
    print("| records | broker CPU µs/record: baseline | this tree | ratio | producer rec/s: baseline | this tree |")
    print("|---|---|---|---|---|---|")
    for label, size, codec in SHAPES:
        results: dict[str, list[tuple[float, float]]] = {"base": [], "this": []}
        for _ in range(args.repeat):
            results["base"].append(measure(args.baseline, args.records, size, codec))
            results["this"].append(measure(None, args.records, size, codec))
        cpu = {k: statistics.median(c for c, _ in v) for k, v in results.items()}
        rate = {k: statistics.median(r for _, r in v) for k, v in results.items()}
        print(f"| {label} | {cpu['base']:.2f} | {cpu['this']:.2f} | {cpu['this'] / cpu['base']:.2f}x "
              f"| {rate['base']:,.0f} | {rate['this']:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
