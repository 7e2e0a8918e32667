"""Benchmark of the sticky assignors, against kafka-python's StickyPartitionAssignor.

Default (the issue's size): 500 topics x 2,000 partitions = 1,000,000 partitions, 2,000 consumers
all subscribed to all topics; times the first assignment and the reassignment after one
consumer leaves (previous assignment fed back as owned partitions), median of --repeat runs.
Then kafka-python's sticky assignor runs in a subprocess on growing sizes, each bounded by
--kp-timeout seconds, and the largest size it finished is also run through shoal.

    .venv/bin/python bench/assignors.py                 # full run (a few minutes)
    .venv/bin/python bench/assignors.py --quick         # 50 x 200 partitions, 200 consumers, kp <= 10 s
    .venv/bin/python bench/assignors.py --no-kafka-python --repeat 5
    .venv/bin/python bench/assignors.py --no-kafka-python --unequal   # + the general (unequal) path
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shoal.assignors import Subscription, lookup  # noqa: E402

# (topics, partitions per topic, consumers) tried for kafka-python, smallest first.
KP_SIZES = [
    (10, 10, 10),
    (20, 50, 20),
    (50, 100, 50),
    (100, 100, 100),
    (100, 200, 200),
    (200, 250, 250),
    (250, 400, 500),
    (500, 1000, 1000),
    (500, 2000, 2000),
]


def shoal_run(
    name: str, n_topics: int, n_parts: int, n_consumers: int, unequal: bool = False
) -> tuple[float, float, int, int, float, float]:
    """(first assignment s, reassignment after one leaves s, partitions moved, leaver's partitions,
    and the two CPU times: on a busy machine they vary much less than the wall-clock ones).

    ``unequal``: odd consumers subscribe to the first half of the topics only (general path)."""
    topics = [f"topic-{i:04d}" for i in range(n_topics)]
    ppt = dict.fromkeys(topics, n_parts)
    members = [f"consumer-{i:05d}" for i in range(n_consumers)]
    assignor = lookup(name)
    topic_lists = {m: topics[: n_topics // 2] if unequal and i % 2 else topics for i, m in enumerate(members)}
    subs = {m: Subscription(topic_lists[m]) for m in members}
    c0, t0 = time.process_time(), time.perf_counter()
    first = assignor.assign(ppt, subs)
    t1, c1 = time.perf_counter() - t0, time.process_time() - c0
    leaver = members[len(members) // 2]
    subs2 = {
        m: Subscription(topic_lists[m], owned_partitions=first[m], generation_id=1)
        for m in members
        if m != leaver
    }
    c0, t0 = time.process_time(), time.perf_counter()
    second = assignor.assign(ppt, subs2)
    t2, c2 = time.perf_counter() - t0, time.process_time() - c0
    owner = {tp: m for m, ps in first.items() for tp in ps}
    moved = sum(1 for m, ps in second.items() for tp in ps if owner[tp] != m)
    assert sum(map(len, second.values())) == n_topics * n_parts
    return t1, t2, moved, len(first[leaver]), c1, c2


def kafka_python_child(n_topics: int, n_parts: int, n_consumers: int) -> None:
    """Run kafka-python's sticky assignor once (first + one leaves) and print JSON timings."""
    import logging

    logging.disable(logging.CRITICAL)
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    class Cluster:
        def __init__(self, topics: list[str]) -> None:
            self._topics = topics
            self._parts = set(range(n_parts))

        def topics(self) -> list[str]:
            return self._topics

        def partitions_for_topic(self, topic: str) -> set[int]:
            return self._parts

    Member = namedtuple("Member", "member_id metadata")
    topics = [f"topic-{i:04d}" for i in range(n_topics)]
    cluster = Cluster(topics)
    members = [f"consumer-{i:05d}" for i in range(n_consumers)]
    a = StickyPartitionAssignor()
    group = [Member(m, StickyPartitionAssignor._metadata(topics, None)) for m in members]
    t0 = time.perf_counter()
    first = a.assign(cluster, group)
    t1 = time.perf_counter() - t0
    from kafka.structs import TopicPartition

    leaver = members[len(members) // 2]
    group2 = []
    for m in members:
        if m == leaver:
            continue
        parts = [TopicPartition(t, p) for t, ps in first[m].assigned_partitions for p in ps]
        group2.append(Member(m, StickyPartitionAssignor._metadata(topics, parts, 1)))
    t0 = time.perf_counter()
    a.assign(cluster, group2)
    t2 = time.perf_counter() - t0
    print(json.dumps({"first": t1, "leave": t2}))


def fmt_size(t: int, p: int, c: int) -> str:
    return f"{t} topics x {p} partitions = {t * p:,} partitions, {c:,} consumers"


def bench_shoal(t: int, p: int, c: int, repeat: int, unequal: bool = False) -> None:
    what = "odd consumers on half the topics (general path)" if unequal else "all subscribed to all"
    print(f"shoal, {fmt_size(t, p, c)}, {what}, median of {repeat}:")
    for name in ("sticky", "cooperative-sticky"):
        runs = [shoal_run(name, t, p, c, unequal) for _ in range(repeat)]
        first = statistics.median(r[0] for r in runs)
        leave = statistics.median(r[1] for r in runs)
        cpu_first = statistics.median(r[4] for r in runs)
        cpu_leave = statistics.median(r[5] for r in runs)
        print(
            f"  {name:<19} first assignment {first:7.3f} s   one consumer leaves {leave:7.3f} s"
            f"   (moved {runs[0][2]:,}; the leaver had {runs[0][3]:,})"
            f"   cpu {cpu_first:.3f} s / {cpu_leave:.3f} s",
            flush=True,
        )


def bench_kafka_python(timeout: float, max_partitions: int) -> tuple[int, int, int] | None:
    print(
        f"kafka-python {_kp_version()} StickyPartitionAssignor (subprocess, {timeout:.0f} s limit per size):"
    )
    best = None
    for t, p, c in KP_SIZES:
        if t * p > max_partitions:
            break
        cmd = [sys.executable, __file__, "--kafka-python-child", str(t), str(p), str(c)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout
        except subprocess.TimeoutExpired:
            print(f"  {fmt_size(t, p, c)}: did not finish within {timeout:.0f} s", flush=True)
            break
        r = json.loads(out.strip().splitlines()[-1])
        print(
            f"  {fmt_size(t, p, c)}: first assignment {r['first']:7.3f} s   one consumer leaves "
            f"{r['leave']:7.3f} s",
            flush=True,
        )
        best = (t, p, c)
    return best


def _kp_version() -> str:
    try:
        import kafka

        return kafka.__version__
    except Exception:  # noqa: BLE001 - only for the label
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=500)
    ap.add_argument("--partitions", type=int, default=2000, help="partitions per topic")
    ap.add_argument("--consumers", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kp-timeout", type=float, default=60.0, help="seconds per kafka-python size")
    ap.add_argument("--no-kafka-python", action="store_true")
    ap.add_argument("--unequal", action="store_true", help="also time unequal subscriptions (general path)")
    ap.add_argument("--quick", action="store_true", help="50 x 200 partitions, 200 consumers, kp <= 10 s")
    ap.add_argument(
        "--kafka-python-child", nargs=3, type=int, metavar=("T", "P", "C"), help=argparse.SUPPRESS
    )
    args = ap.parse_args()
    if args.kafka_python_child:
        kafka_python_child(*args.kafka_python_child)
        return
    if args.quick:
        args.topics, args.partitions, args.consumers, args.kp_timeout = 50, 200, 200, 10.0
    print(f"python {sys.version.split()[0]}")
    bench_shoal(args.topics, args.partitions, args.consumers, args.repeat)
    if args.unequal:
        bench_shoal(args.topics, args.partitions, args.consumers, args.repeat, unequal=True)
    if args.no_kafka_python:
        return
    best = bench_kafka_python(args.kp_timeout, args.topics * args.partitions)
    if best:
        print("shoal on kafka-python's largest finished size:")
        bench_shoal(*best, repeat=args.repeat)


if __name__ == "__main__":
    main()
