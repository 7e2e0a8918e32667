"""Benchmark: load (replay) a `__consumer_offsets` partition of many OffsetCommit records.

Builds the partition with the real record-batch and storage code
(groups x partitions keys, each committed `commits` times, in batches),
then times GroupCoordinatorRuntime.load_partition on a fresh runtime.

    .venv/bin/python bench/offsets_load.py                      # 1000 x 100 x 100 = 10M records
    .venv/bin/python bench/offsets_load.py --groups 100 --commits 10
    .venv/bin/python bench/offsets_load.py --split   # also time the read and the replay apart
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import tempfile
import time
from pathlib import Path

from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.records import OffsetAndMetadata, offset_commit_key, offset_commit_value
from shoal.coordinator.group.runtime import OFFSETS_LOG_CONFIG, OFFSETS_TOPIC, GroupCoordinatorRuntime
from shoal.coordinator.group.shard import GroupCoordinatorShard
from shoal.coordinator.loader import load_offsets_log
from shoal.protocol.record_encode import build_batch
from shoal.storage.config import LogConfig
from shoal.storage.manager import LogManager


def build(log_dir: Path, groups: int, partitions: int, commits: int, batch_size: int, vary: bool = False) -> int:
    lm = LogManager([log_dir], LogConfig())
    log = lm.get_or_create(OFFSETS_TOPIC, 0, OFFSETS_LOG_CONFIG)
    keys = [offset_commit_key(f"group-{g}", f"topic-{g % 10}", p) for g in range(groups) for p in range(partitions)]
    # version | offset(int64) | rest; with `vary`, the metadata length changes from commit to commit
    templates = [offset_commit_value(OffsetAndMetadata(0, -1, "m" * (c % 7 if vary else 0), 0)) for c in range(commits)]
    now = 1_700_000_000_000
    pack_q = struct.Struct(">q").pack
    n = 0
    pending: list = []
    for c in range(commits):
        head, tail = templates[c][:2], templates[c][10:]
        for key in keys:
            pending.append((now, key, head + pack_q(c * 10 + 1) + tail, []))
            if len(pending) == batch_size:
                log.append(bytearray(build_batch(pending)), now)
                n += len(pending)
                pending = []
    if pending:
        log.append(bytearray(build_batch(pending)), now)
        n += len(pending)
    log.flush()
    lm.close()
    return n


async def load(log_dir: Path) -> tuple[float, int, int]:
    lm = LogManager([log_dir], LogConfig())
    lm.load_existing()
    rt = GroupCoordinatorRuntime(0, lm, GroupConfig(offsets_topic_num_partitions=1))
    t0 = time.perf_counter()
    await rt.load_partition(0)
    elapsed = time.perf_counter() - t0
    shard = rt.shard(0)
    assert shard is not None
    n_offsets = sum(len(v) for v in shard.offset_manager.offsets.values())
    n_groups = len(shard.groups)
    await rt.close()
    lm.close()
    return elapsed, n_groups, n_offsets


def split(log_dir: Path) -> tuple[float, float]:
    """The two halves of a load apart: reading the log (in a worker thread, in load_partition)
    and replaying the latest records into a shard (on the event loop)."""
    lm = LogManager([log_dir], LogConfig())
    lm.load_existing()
    plog = lm.get_or_create(OFFSETS_TOPIC, 0, OFFSETS_LOG_CONFIG)
    t0 = time.perf_counter()
    loaded = load_offsets_log(plog)
    t1 = time.perf_counter()
    for _ in GroupCoordinatorShard(0, GroupConfig(offsets_topic_num_partitions=1)).replay_loaded(loaded):
        pass
    t2 = time.perf_counter()
    lm.close()
    return t1 - t0, t2 - t1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--vary", action="store_true",
                    help="metadata of changing length: no two commits in a row write the same batch shape")
    ap.add_argument("--split", action="store_true", help="also time reading and replaying apart")
    ap.add_argument("--dir", type=Path, default=None, help="keep the partition here (default: a temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = args.dir or Path(tmp)
        t0 = time.perf_counter()
        n = build(log_dir, args.groups, args.partitions, args.commits, args.batch_size, args.vary)
        built = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in (log_dir / f"{OFFSETS_TOPIC}-0").glob("*.log"))
        print(f"built {n:,} OffsetCommit records ({size / 1e6:.0f} MB) in {built:.1f} s")
        elapsed, n_groups, n_offsets = asyncio.run(load(log_dir))
        print(f"load_partition: {elapsed:.2f} s  ({n / elapsed / 1e6:.2f} M records/s), "
              f"{n_groups:,} groups, {n_offsets:,} offsets")
        if args.split:
            read, replay = split(log_dir)
            print(f"  read {read:.2f} s, replay {replay:.2f} s")


if __name__ == "__main__":
    main()
