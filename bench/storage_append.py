"""Broker hot path: validate_batches + PartitionLog.append of a 1 MiB produce payload.

Run: .venv/bin/python bench/storage_append.py [--iterations N]
Prints microseconds per payload and MiB/s; also iter_records/build_batch speed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from shoal.protocol import record_batch as rb
from shoal.protocol.record_encode import build_batch
from shoal.storage import LogConfig, PartitionLog


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--record-bytes", type=int, default=1024)
    args = ap.parse_args()
    n_records = (1 << 20) // args.record_bytes
    records = [
        (1_700_000_000_000 + i, b"key-%d" % i, bytes([i % 251]) * args.record_bytes, None)
        for i in range(n_records)
    ]

    t = time.perf_counter()
    payload = build_batch(records)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    n = sum(1 for _ in rb.iter_records(payload))
    iter_s = time.perf_counter() - t
    assert n == n_records

    with tempfile.TemporaryDirectory() as d:
        log = PartitionLog(Path(d) / "bench-0", LogConfig(), now_ms=0)
        validate: list[float] = []
        both: list[float] = []
        for _ in range(args.iterations):
            buf = bytearray(payload)  # a fresh request buffer, as the broker would get
            t = time.perf_counter()
            headers = rb.validate_batches(buf, 1048588 * 2)
            t1 = time.perf_counter()
            log.append(buf, 0, headers=headers)
            t2 = time.perf_counter()
            validate.append(t1 - t)
            both.append(t2 - t)
        per = statistics.median(both)
        mean = statistics.fmean(both)
        per_validate = statistics.median(validate)
        size = len(payload)
        log.close()
    print(f"payload: {size} bytes, {n_records} records of {args.record_bytes} B, one batch")
    print(f"validate_batches: median {per_validate * 1e6:.0f} us")
    print(
        f"validate_batches+append: median {per * 1e6:.0f} us ({size / per / 2**20:.0f} MiB/s), "
        f"mean {mean * 1e6:.0f} us (page-cache writeback included)"
    )
    print(f"build_batch: {build_s * 1e3:.1f} ms, iter_records: {iter_s * 1e3:.1f} ms ({n_records} records)")


if __name__ == "__main__":
    main()
