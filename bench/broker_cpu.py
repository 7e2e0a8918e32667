"""Broker CPU per GB produced, with and without shoal's malloc tuning, in one run.

    .venv/bin/python bench/broker_cpu.py [--records 300000] [--repeat 5] [--data-dir DIR]

Starts `shoal serve` twice (SHOAL_MALLOC_TUNING=1, then 0), produces --repeat ×
--records 1 KiB values into one 4-partition topic with confluent-kafka
(acks=1), and prints the broker process's CPU seconds per GB (from /proc) and
the median MB/s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from produce_fetch import PARTITIONS, process_cpu_seconds, produce, start_shoal  # noqa: E402


def measure(tuning: str, records: int, repeat: int, data_dir: str | None) -> tuple[float, float]:
    os.environ["SHOAL_MALLOC_TUNING"] = tuning
    with tempfile.TemporaryDirectory(dir=data_dir) as d:
        proc, port, _, _ = start_shoal(d)
        try:
            bootstrap = f"127.0.0.1:{port}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for f in admin.create_topics([NewTopic("cpu", PARTITIONS, 1)]).values():
                f.result(30)
            cpu0 = process_cpu_seconds(proc.pid)
            rates = [records * 1024 / 1e6 / produce(bootstrap, "cpu", records, b"v" * 1024, "1")
                     for _ in range(repeat)]
            cpu = process_cpu_seconds(proc.pid) - cpu0
        finally:
            proc.terminate()
            proc.wait(30)
    return cpu / (repeat * records * 1024 / 1e9), statistics.median(rates)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    for tuning in ("1", "0"):
        per_gb, rate = measure(tuning, args.records, args.repeat, args.data_dir)
        print(f"SHOAL_MALLOC_TUNING={tuning}: broker {per_gb:.2f} CPU s per GB produced, "
              f"produce median {rate:.0f} MB/s ({args.repeat} x {args.records} x 1 KiB)")


if __name__ == "__main__":
    main()
