"""Benchmark: consumer groups, classic against the KIP-848 consumer protocol, shoal and Apache Kafka 4.4
side by side (issue 18, the default), and, with --vs-mock, issue 3's
classic rebalance times (shoal vs librdkafka's mock cluster) and offsets load:

    .venv/bin/python bench/groups.py [--quick] [--sizes 10,50] [--repeats 3]   # issue 18
    .venv/bin/python bench/groups.py --vs-mock [--quick]                        # issue 3, below

For each target, N confluent-kafka consumers (N = 1, 10, 50 by default) subscribe
to the same 64 partitions (16 topics x 4 partitions: the mock cluster cannot
create topics with more partitions through the wire, so both targets get the
same shape) with the roundrobin assignor. All consumers are polled round-robin
from one thread; on_assign/on_revoke callbacks track each member's partitions.

  stable       time from the first subscribe() until every member holds a
               non-empty assignment and together they cover all 64 partitions
  re-stable    time from close() of one member (LeaveGroup) until the others'
               assignments cover all 64 partitions again

Then the time to load (replay) a `__consumer_offsets` partition holding many
OffsetCommit records (bench/offsets_load.py, run as a subprocess).

    .venv/bin/python bench/groups.py                       # full run: N=1,10,50 x 3, 10M records
    .venv/bin/python bench/groups.py --quick               # N=1,10 x 1, 100k records
    .venv/bin/python bench/groups.py --skip-offsets-load --targets shoal

Goals (issue #3): N=50 stable < 0.5 s, re-stable after a leave < 0.5 s, 10M records loaded < 10 s.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
TOPICS = [f"bench-groups-{i:02d}" for i in range(16)]
PARTITIONS_PER_TOPIC = 4  # the mock cluster's default partition count for auto-created topics
ALL_PARTITIONS = {(t, p) for t in TOPICS for p in range(PARTITIONS_PER_TOPIC)}
# librdkafka mock (rdkafka_mock.c: defaults.group_initial_rebalance_delay_ms = 3000; settable only
# through the C API rd_kafka_mock_group_initial_rebalance_delay_ms, which confluent-kafka does not expose).
MOCK_INITIAL_REBALANCE_DELAY_MS = 3000


# -- targets -----------------------------------------------------------------


class ShoalTarget:
    """`shoal serve` as a subprocess with group.initial.rebalance.delay.ms=0."""

    name = "shoal"

    def __init__(self, tmp: Path) -> None:
        self.log = open(tmp / "shoal.log", "w")  # noqa: SIM115 - lives as long as the process
        cmd = [sys.executable, "-m", "shoal.cli", "--log-level", "WARNING", "serve",
               "--override", "listeners=PLAINTEXT://127.0.0.1:0",
               "--override", f"log.dirs={tmp / 'data'}",
               "--override", "group.initial.rebalance.delay.ms=0"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=ROOT)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        m = re.search(r"at ([\d.]+):(\d+)", line)
        if not m:
            self.close()
            raise RuntimeError(f"shoal did not start: {line!r}")
        self.bootstrap = f"{m.group(1)}:{m.group(2)}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for fut in admin.create_topics([NewTopic(t, PARTITIONS_PER_TOPIC, 1) for t in TOPICS]).values():
            fut.result(30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


class MockTarget:
    """librdkafka's mock cluster, owned by a producer kept alive for the whole run."""

    name = "mock"

    def __init__(self) -> None:
        self.producer = Producer({"bootstrap.servers": "x:1", "test.mock.num.brokers": 1, "log_level": 3})
        brokers = self.producer.list_topics(timeout=10).brokers
        self.bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers.values())
        # The mock has no CreateTopics: producing auto-creates each topic with 4 partitions.
        for t in TOPICS:
            self.producer.produce(t, b"x")
        self.producer.flush(10)

    def close(self) -> None:
        self.producer.flush(1)


# -- one trial ----------------------------------------------------------------


class Member:
    """One consumer and the partitions its rebalance callbacks say it holds."""

    def __init__(self, bootstrap: str, group: str, i: int, conf: dict[str, object]) -> None:
        self.owned: set[tuple[str, int]] = set()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"bench-{i}",
                                  "enable.auto.commit": False, **{"log_level": 3, **conf}})

    def warm_up(self) -> None:
        """Connect and fetch metadata first, so the trial times the group protocol, not connection set-up."""
        self.consumer.list_topics(TOPICS[0], timeout=10)

    def subscribe(self) -> None:
        self.consumer.subscribe(TOPICS, on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, consumer: Consumer, partitions: list) -> None:
        self.owned = {(tp.topic, tp.partition) for tp in partitions}

    def _revoke(self, consumer: Consumer, partitions: list) -> None:
        self.owned -= {(tp.topic, tp.partition) for tp in partitions}


def _covered(members: list[Member]) -> bool:
    owned = [m.owned for m in members]
    if not all(owned):
        return False
    union: set[tuple[str, int]] = set()
    for o in owned:
        if union & o:
            return False  # two owners: an old assignment not yet revoked
        union |= o
    return union == ALL_PARTITIONS


def _poll_until(members: list[Member], done: Callable[[], bool], timeout: float) -> float | None:
    t_end = time.perf_counter() + timeout
    while time.perf_counter() < t_end:
        for m in members:
            m.consumer.poll(0)
        if done():
            return time.perf_counter()
        time.sleep(0.001)
    return None


def trial(bootstrap: str, n: int, conf: dict[str, object], timeout: float) -> tuple[float | None, float | None]:
    """(stable seconds, re-stable-after-leave seconds); None where it timed out or does not apply."""
    group = f"bench-{uuid.uuid4().hex[:8]}"
    members = [Member(bootstrap, group, i, conf) for i in range(n)]
    try:
        for m in members:
            m.warm_up()
        t0 = time.perf_counter()
        for m in members:
            m.subscribe()
        t1 = _poll_until(members, lambda: _covered(members), timeout)
        stable = None if t1 is None else t1 - t0
        restable = None
        if stable is not None and n >= 2:
            leaving = members.pop()
            t2 = time.perf_counter()
            leaving.consumer.close()
            t3 = _poll_until(members, lambda: _covered(members), timeout)
            restable = None if t3 is None else t3 - t2
        return stable, restable
    finally:
        with ThreadPoolExecutor(max_workers=max(1, len(members))) as pool:
            list(pool.map(lambda m: m.consumer.close(), members))


# -- offsets load -------------------------------------------------------------


def offsets_load(groups: int) -> tuple[str, float | None]:
    """Run bench/offsets_load.py (groups x 100 partitions x 100 commits records); its load time."""
    cmd = [sys.executable, str(ROOT / "bench" / "offsets_load.py"), "--groups", str(groups)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    out = (res.stdout + res.stderr).strip()
    m = re.search(r"load_partition: ([\d.]+) s", out)
    return out, float(m.group(1)) if m else None


# -- report -------------------------------------------------------------------


def _fmt(values: list[float | None]) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "timeout"
    med = statistics.median(got)
    miss = f" ({len(values) - len(got)} timed out)" if len(got) < len(values) else ""
    return f"{med * 1000:8.0f} ms{miss}"


def _median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def main_vs_mock() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,10,50", help="group sizes (default 1,10,50)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--targets", default="shoal,mock")
    ap.add_argument("--session-timeout-ms", type=int, default=6000,
                    help="consumer session.timeout.ms (shoal's group.min.session.timeout.ms is 6000)")
    ap.add_argument("--heartbeat-interval-ms", type=int, default=100)
    ap.add_argument("--trial-timeout", type=float, default=30.0)
    ap.add_argument("--offsets-groups", type=int, default=1000,
                    help="offsets load: groups x 100 partitions x 100 commits records (1000 -> 10M)")
    ap.add_argument("--skip-offsets-load", action="store_true")
    ap.add_argument("--quick", action="store_true", help="sizes 1,10, one repeat, 100k offset records")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.repeats, args.offsets_groups = "1,10", 1, 10
    sizes = [int(s) for s in args.sizes.split(",")]
    targets = args.targets.split(",")
    conf: dict[str, object] = {
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": args.heartbeat_interval_ms,
        "partition.assignment.strategy": "roundrobin",
        "auto.offset.reset": "latest",
    }
    import confluent_kafka

    print(f"confluent-kafka {confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]}), "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(f"consumers: {conf}, {len(TOPICS)} topics x {PARTITIONS_PER_TOPIC} partitions = "
          f"{len(ALL_PARTITIONS)} partitions, polled round-robin from one thread; {args.repeats} repeats, medians;"
          " each consumer is connected (list_topics) before the clock starts")
    print("shoal: group.initial.rebalance.delay.ms=0; librdkafka mock: initial rebalance delay "
          f"{MOCK_INITIAL_REBALANCE_DELAY_MS} ms (fixed default, rdkafka_mock.c), re-join window after a "
          f"leave = session.timeout.ms - 1000 = {args.session_timeout_ms - 1000} ms (rdkafka_mock_cgrp.c)")
    results: dict[str, dict[int, tuple[list, list]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in targets:
            target = ShoalTarget(Path(tmp)) if name == "shoal" else MockTarget()
            try:
                results[name] = {}
                for n in sizes:
                    stables, restables = [], []
                    for _ in range(args.repeats):
                        s_, r_ = trial(target.bootstrap, n, conf, args.trial_timeout)
                        stables.append(s_)
                        restables.append(r_)
                    results[name][n] = (stables, restables)
                    print(f"  {name:5s} N={n:<3d} stable {_fmt(stables)}   re-stable after leave "
                          f"{_fmt(restables) if n >= 2 else '       n/a'}   "
                          f"(runs: {', '.join('-' if v is None else f'{v * 1000:.0f}' for v in stables)} / "
                          f"{', '.join('-' if v is None else f'{v * 1000:.0f}' for v in restables)} ms)",
                          flush=True)
            finally:
                target.close()

    print()
    print(f"{'':30s}" + "".join(f"{t:>14s}" for t in targets) + ("   shoal/mock" if len(targets) == 2 else ""))
    for n in sizes:
        for label, idx in (("stable", 0), ("re-stable after leave", 1)):
            if idx == 1 and n < 2:
                continue
            meds = [_median(results[t][n][idx]) for t in targets]
            row = f"N={n:<3d} {label:23s}" + "".join(
                f"{'timeout':>14s}" if m is None else f"{m * 1000:11.0f} ms" for m in meds)
            if len(meds) == 2 and None not in meds and meds[1]:
                row += f"   {meds[0] / meds[1]:10.3f}"
            print(row)

    if not args.skip_offsets_load:
        n_records = args.offsets_groups * 100 * 100
        print(f"\noffsets load ({n_records:,} OffsetCommit records, bench/offsets_load.py --groups "
              f"{args.offsets_groups}):")
        out, secs = offsets_load(args.offsets_groups)
        print("  " + out.replace("\n", "\n  "))

    print("\ngoals: N=50 stable < 0.5 s; re-stable after a leave < 0.5 s; 10M records loaded < 10 s")
    if "shoal" in results:
        for n in sizes:
            s_med, r_med = (_median(v) for v in results["shoal"][n])
            print(f"  shoal N={n}: stable {'-' if s_med is None else f'{s_med:.3f} s'}"
                  + (f", re-stable {'-' if r_med is None else f'{r_med:.3f} s'}" if n >= 2 else ""))
    if not args.skip_offsets_load:
        print(f"  offsets load: {'-' if secs is None else f'{secs:.2f} s'} for {n_records:,} records")
    print("\nwhat dominates: the mock waits out its fixed windows (3 s initial delay; session.timeout.ms - 1 s "
          "after a leave), so its figures measure its timers, not its speed. For shoal, with the initial delay "
          "at 0, each member that joins after the first rebalance triggers another one; the other members "
          "learn of it on their next heartbeat (heartbeat.interval.ms) and rejoin, so the client's heartbeat "
          "interval and librdkafka's join/sync round trips (and, for the leave, close() itself, which is "
          "timed) make up most of the figures.")


# -- issue 18: classic against the consumer protocol (KIP-848), shoal and Kafka -------------------

PROTOCOLS: dict[str, dict[str, object]] = {
    "classic-coop": {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 100},
    "classic-range": {"group.protocol": "classic", "partition.assignment.strategy": "range",
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 100},
    "consumer": {"group.protocol": "consumer"},
}
# Both brokers: no initial rebalance delay, and the consumer protocol's heartbeat interval (which the
# broker sets for KIP-848 members) at the classic members' 100 ms, so that neither protocol waits out
# a longer timer than the other (Kafka's default is 5 s, which would dominate every figure).
BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.consumer.heartbeat.interval.ms": "100",
                    "group.consumer.min.heartbeat.interval.ms": "100",
                    "log.retention.check.interval.ms": "86400000"}
SMALL_QUEUES: dict[str, object] = {"queued.max.messages.kbytes": 1024, "queued.min.messages": 1000,
                                   "fetch.max.bytes": 1 << 20, "max.partition.fetch.bytes": 1 << 16,
                                   "statistics.interval.ms": 0, "log_level": 3, "enable.auto.commit": False,
                                   "auto.offset.reset": "earliest"}


class ProtoMember:
    """One consumer; its partitions as its (incremental or eager) rebalance callbacks report them."""

    def __init__(self, bootstrap: str, group: str, topic: str, conf: dict[str, object]) -> None:
        self.topic = topic
        self.owned: set[int] = set()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **SMALL_QUEUES, **conf})
        self.consumer.list_topics(topic, timeout=10)  # connected before any clock starts

    def subscribe(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)

    def _assign(self, consumer: Consumer, partitions: list) -> None:
        self.owned |= {tp.partition for tp in partitions}

    def _revoke(self, consumer: Consumer, partitions: list) -> None:
        self.owned -= {tp.partition for tp in partitions}

    def poll(self) -> int:
        return len(self.consumer.consume(500, 0))


def _exact_cover(members: list[ProtoMember], partitions: int) -> bool:
    seen: set[int] = set()
    for m in members:
        if not m.owned or seen & m.owned:
            return False
        seen |= m.owned
    return len(seen) == partitions


def _poll_until_cover(members: list[ProtoMember], partitions: int, timeout: float) -> float | None:
    t_end = time.perf_counter() + timeout
    while time.perf_counter() < t_end:
        for m in members:
            m.poll()
        if _exact_cover(members, partitions):
            return time.perf_counter()
        time.sleep(0.001)
    return None


def _close_all(members: list[ProtoMember]) -> None:
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(members)))) as pool:
        list(pool.map(lambda m: m.consumer.close(), members))


def proto_trial(bootstrap: str, topic: str, partitions: int, n: int, conf: dict[str, object],
                timeout: float) -> tuple[float | None, float | None, float | None]:
    """(seconds until N members cover the topic, to re-cover after one joins, after one leaves)."""
    group = f"b18-{uuid.uuid4().hex[:8]}"
    members = [ProtoMember(bootstrap, group, topic, conf) for _ in range(n)]
    extra = ProtoMember(bootstrap, group, topic, conf)
    try:
        t0 = time.perf_counter()
        for m in members:
            m.subscribe()
        t1 = _poll_until_cover(members, partitions, timeout)
        if t1 is None:
            return None, None, None
        members.append(extra)
        t2 = time.perf_counter()
        extra.subscribe()
        t3 = _poll_until_cover(members, partitions, timeout)
        if t3 is None:
            return t1 - t0, None, None
        leaving = members.pop(0)
        t4 = time.perf_counter()
        leaving.consumer.close()
        t5 = _poll_until_cover(members, partitions, timeout)
        return t1 - t0, t3 - t2, None if t5 is None else t5 - t4
    finally:
        _close_all(members if extra in members else [*members, extra])


def joining_throughput(bootstrap: str, topic: str, n: int, conf: dict[str, object],
                       every: float) -> tuple[float, float]:
    """Members join one by one (one every ``every`` s) until n, all consuming from offset 0 of a
    preloaded topic: (records per second over the whole phase, the longest stall in ms: the longest
    time in which no member received a record)."""
    group = f"b18t-{uuid.uuid4().hex[:8]}"
    members = [ProtoMember(bootstrap, group, topic, conf) for _ in range(n)]
    total, last, stall = 0, None, 0.0
    try:
        t0 = time.perf_counter()
        t_end = t0 + every * n + 1.0
        joined = 0
        while time.perf_counter() < t_end:
            now = time.perf_counter()
            while joined < n and now >= t0 + joined * every:
                members[joined].subscribe()
                joined += 1
            got = sum(m.poll() for m in members[:joined])
            now = time.perf_counter()
            if got:
                if last is not None:
                    stall = max(stall, now - last)
                last = now
                total += got
        return total / (time.perf_counter() - t0), stall * 1000
    finally:
        _close_all(members)


class KafkaTarget:
    """Apache Kafka 4.4, one node (tests/reference/apache_kafka.py), with BROKER_OVERRIDES."""

    name = "kafka"

    def __init__(self, tmp: Path) -> None:
        sys.path.insert(0, str(ROOT))
        from tests.reference.apache_kafka import KafkaCluster

        self.cluster = KafkaCluster("4", 1, tmp / "kafka", overrides=BROKER_OVERRIDES).start()
        self.bootstrap = self.cluster.bootstrap_servers

    def close(self) -> None:
        self.cluster.stop()


class ShoalProtoTarget:
    """`shoal serve` as a subprocess with BROKER_OVERRIDES."""

    name = "shoal"

    def __init__(self, tmp: Path) -> None:
        self.log = open(tmp / "shoal.log", "w")  # noqa: SIM115 - lives as long as the process
        cmd = [sys.executable, "-m", "shoal.cli", "--log-level", "WARNING", "serve",
               "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={tmp / 'data'}"]
        for k, v in BROKER_OVERRIDES.items():
            cmd += ["--override", f"{k}={v}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=ROOT)
        assert self.proc.stdout is not None
        m = re.search(r"at ([\d.]+):(\d+)", self.proc.stdout.readline())
        if not m:
            self.close()
            raise RuntimeError("shoal did not start")
        self.bootstrap = f"{m.group(1)}:{m.group(2)}"

    def close(self) -> None:
        ShoalTarget.close(self)  # type: ignore[arg-type]


def _prepare(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(60)
    if records:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                      "compression.type": "none", "log_level": 3})
        value = b"v" * 100
        for i in range(records):
            while True:
                try:
                    p.produce(topic, value, partition=i % partitions)
                    break
                except BufferError:
                    p.poll(0.05)
        assert p.flush(120) == 0


def _ms(v: float | None) -> str:
    return "timeout" if v is None else f"{v * 1000:.0f} ms"


def _run_target(target, args, sizes: list[int], out: dict) -> None:  # noqa: ANN001
    partitions = max(64, max(sizes) + 1)
    topic, ttopic = "b18-cover", "b18-tput"
    _prepare(target.bootstrap, topic, partitions, 0)
    _prepare(target.bootstrap, ttopic, 64, args.records)
    for proto, conf in PROTOCOLS.items():
        if proto not in args.protocols:
            continue
        for n in sizes:
            runs = [proto_trial(target.bootstrap, topic, partitions, n, conf, args.trial_timeout)
                    for _ in range(args.repeats)]
            meds = [_median([r[i] for r in runs]) for i in range(3)]
            out[(target.name, proto, f"N={n} covered")] = meds[0]
            out[(target.name, proto, f"N={n}+1 re-covered after a join")] = meds[1]
            out[(target.name, proto, f"N={n+1}-1 re-covered after a leave")] = meds[2]
            print(f"  {target.name:5s} {proto:13s} N={n:<3d} cover {_ms(meds[0])}, join {_ms(meds[1])}, "
                  f"leave {_ms(meds[2])}  (runs: {[tuple(_ms(v) for v in r) for r in runs]})", flush=True)
        rates = [joining_throughput(target.bootstrap, ttopic, args.join_members, conf, args.join_every)
                 for _ in range(args.repeats)]
        out[(target.name, proto, "records/s while joining")] = statistics.median(r[0] for r in rates)
        out[(target.name, proto, "longest stall while joining")] = statistics.median(r[1] for r in rates) / 1000
        print(f"  {target.name:5s} {proto:13s} joining 1..{args.join_members}: "
              f"{statistics.median(r[0] for r in rates):,.0f} records/s, longest stall "
              f"{statistics.median(r[1] for r in rates):.0f} ms", flush=True)


def _print_table(out: dict, targets: list[str]) -> None:
    rows = sorted({(proto, what) for _, proto, what in out},
                  key=lambda r: (list(PROTOCOLS).index(r[0]), r[1]))
    print(f"\n{'protocol':14s}{'measure':38s}" + "".join(f"{t:>14s}" for t in targets)
          + ("   shoal/kafka" if len(targets) == 2 else ""))
    for proto, what in rows:
        vals = [out.get((t, proto, what)) for t in targets]
        rate = what.startswith("records/s")
        cells = "".join(f"{'timeout':>14s}" if v is None else (f"{v:14,.0f}" if rate else f"{v * 1000:11.0f} ms")
                        for v in vals)
        ratio = ""
        if len(vals) == 2 and None not in vals and vals[1]:
            ratio = f"   {vals[0] / vals[1]:10.2f}"
        print(f"{proto:14s}{what:38s}{cells}{ratio}")


def main_protocols() -> None:
    ap = argparse.ArgumentParser(description="issue 18: classic against consumer protocol, shoal and Kafka 4.4")
    ap.add_argument("--sizes", default="10,50", help="group sizes (default 10,50)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--targets", default="shoal,kafka")
    ap.add_argument("--trial-timeout", type=float, default=60.0)
    ap.add_argument("--records", type=int, default=300_000, help="preloaded for the joining-throughput phase")
    ap.add_argument("--join-members", type=int, default=10)
    ap.add_argument("--join-every", type=float, default=0.3, help="seconds between two joins")
    ap.add_argument("--quick", action="store_true", help="N=10, one repeat, 5 joining members")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS), help=f"a subset of {','.join(PROTOCOLS)}")
    args = ap.parse_args()
    args.protocols = args.protocols.split(",")
    if args.quick:
        args.sizes, args.repeats, args.records, args.join_members = "10", 1, 50_000, 5
    sizes = [int(s) for s in args.sizes.split(",")]
    targets = args.targets.split(",")
    import confluent_kafka

    print(f"confluent-kafka {confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]}), "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; brokers: {BROKER_OVERRIDES}")
    print(f"protocols: {PROTOCOLS}; all members in one process, polled round-robin from one thread; "
          f"{args.repeats} repeats, medians")
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in targets:
            target = ShoalProtoTarget(Path(tmp)) if name == "shoal" else KafkaTarget(Path(tmp))
            try:
                _run_target(target, args, sizes, out)
            finally:
                target.close()
    _print_table(out, targets)
    for n in sizes:
        got = {t: out.get((t, "consumer", f"N={n} covered")) for t in targets}
        print(f"goal (issue 18): N={n} covered with the consumer protocol < 0.5 s: "
              + ", ".join(f"{t} {_ms(v)}" + ("" if v is None else (" (met)" if v < 0.5 else " (not met)"))
                          for t, v in got.items()))


def main() -> None:
    if "--vs-mock" in sys.argv:
        sys.argv.remove("--vs-mock")
        main_vs_mock()
        return
    main_protocols()


if __name__ == "__main__":
    main()
