"""shoal against Apache Kafka on this machine, in one run, with the same client and workload.

    .venv/bin/python bench/vs_kafka.py [--records 300000] [--repeat 3] [--kafka-line 4] [--quick]

Both brokers run here as one node each, with their default flush settings (the
page cache; neither fsyncs per append) and group.initial.rebalance.delay.ms=0.
The client is confluent-kafka (librdkafka) for everything. Printed, per broker,
then as the ratio shoal / Kafka:

- start to ready: process start to the first answered Metadata (Kafka: after its
  StorageTool format, which a fresh data folder needs once; the format is shown too);
- RSS idle (2 s after ready) and the peak RSS while producing and consuming;
- produce MB/s, 1 KiB values, 4 partitions, acks=1 and acks=all (median of --repeat, after one
  uncounted warm-up run of half as many records, so that Kafka's JIT has compiled its hot path);
- consume MB/s: every record of one produce run read back from offset 0;
- broker CPU seconds per GB produced (from /proc);
- end-to-end latency p50/p99 at a fixed rate (--rate records/s for --latency-seconds);
- classic group formation: N = 10 and 50 consumers on 64 partitions, until every
  member holds a share and together they cover all (bench/groups.py's trial).

Timings are medians of one run; the goal figures (issue 15: produce and consume
>= 1.0x Kafka, start >= 20x faster, idle RSS <= 1/5) are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from groups import PARTITIONS_PER_TOPIC, TOPICS, trial  # noqa: E402
from produce_fetch import PARTITIONS, consume, process_cpu_seconds, produce, start_shoal  # noqa: E402

from tests.reference.apache_kafka import KafkaCluster, fetch  # noqa: E402


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeakRss:
    """Samples a process's RSS every 50 ms in a thread; ``peak`` is the highest seen."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            self._stop.wait(0.05)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def latency(bootstrap: str, topic: str, rate: int, seconds: float) -> tuple[float, float]:
    """p50 and p99 milliseconds from produce() to the consumer's poll() returning the record."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{topic}", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10, "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    c.poll(1.0)  # connected and fetching before the clock starts
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "1"})
    n = int(rate * seconds)
    lat: list[float] = []
    done = threading.Event()

    def reader() -> None:
        # poll() hands over each record as soon as it is fetched (consume(n, t) would wait to fill n)
        while len(lat) < n and not done.is_set():
            m = c.poll(0.05)
            if m is not None and m.error() is None and m.value():
                lat.append((time.perf_counter_ns() - int(m.value())) / 1e6)

    t = threading.Thread(target=reader)
    t.start()
    start = time.perf_counter()
    for i in range(n):
        wait = start + i / rate - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        p.produce(topic, str(time.perf_counter_ns()).encode(), partition=i % PARTITIONS)
        p.poll(0)
    p.flush(30)
    t.join(30)
    done.set()
    c.close()
    if len(lat) < n:
        raise RuntimeError(f"latency run received {len(lat)} of {n} records")
    q = statistics.quantiles(lat, n=100)
    return q[49], q[98]


class Broker:
    """One broker under test: its pid, bootstrap, start time and a way to stop it."""

    def __init__(self, name: str, pid: int, bootstrap: str, ready_s: float, stop: Callable[[], None],
                 note: str = "") -> None:
        self.name, self.pid, self.bootstrap, self.ready_s, self.stop, self.note = name, pid, bootstrap, ready_s, stop, note


def start_shoal_broker(tmp: Path) -> Broker:
    proc, port, _, answered = start_shoal(str(tmp / "shoal-data"), {"group.initial.rebalance.delay.ms": "0"})

    def stop() -> None:
        proc.terminate()
        proc.wait(30)
    return Broker("shoal", proc.pid, f"127.0.0.1:{port}", answered, stop)


def start_kafka_broker(tmp: Path, line: str) -> Broker:
    fetch(line)  # a download is not start-up
    cluster = KafkaCluster(line, 1, tmp / "kafka", overrides={"group.initial.rebalance.delay.ms": "0"})
    t0 = time.perf_counter()
    cluster.start()
    total = time.perf_counter() - t0
    proc = cluster._procs[1]
    fmt = cluster.format_seconds
    return Broker(f"kafka {cluster.version}", proc.pid, cluster.bootstrap_servers, total - fmt, cluster.stop,
                  note=f"(+{fmt:.2f} s StorageTool format)")


def measure(b: Broker, args: argparse.Namespace) -> dict[str, float]:
    out: dict[str, float] = {"ready_s": b.ready_s}
    time.sleep(2)
    out["rss_idle"] = rss_mib(b.pid)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    topics = [f"vs-{acks}-{r}" for r in range(args.repeat) for acks in ("1", "all")]
    topics += ["vs-warmup", "vs-latency", *TOPICS]
    futs = admin.create_topics([NewTopic(t, PARTITIONS if t.startswith("vs-") else PARTITIONS_PER_TOPIC, 1)
                                for t in topics])
    for f in futs.values():
        f.result(30)
    value = b"v" * 1024
    rates: dict[str, list[float]] = {"1": [], "all": []}
    produce(b.bootstrap, "vs-warmup", args.records // 2, value, "1")  # the JVM's JIT warms up; not counted
    with PeakRss(b.pid) as peak:
        cpu0 = process_cpu_seconds(b.pid)
        for r in range(args.repeat):
            for acks in ("1", "all"):
                rates[acks].append(args.records * 1024 / 1e6 / produce(b.bootstrap, f"vs-{acks}-{r}",
                                                                       args.records, value, acks))
        cpu = process_cpu_seconds(b.pid) - cpu0
        reads = [args.records * 1024 / 1e6 / consume(b.bootstrap, f"vs-1-{r}", args.records)
                 for r in range(args.repeat)]
    out["produce_acks1"] = statistics.median(rates["1"])
    out["produce_acksall"] = statistics.median(rates["all"])
    out["consume"] = statistics.median(reads)
    out["cpu_per_gb"] = cpu / (2 * args.repeat * args.records * 1024 / 1e9)
    out["rss_load"] = peak.peak
    out["lat_p50"], out["lat_p99"] = latency(b.bootstrap, "vs-latency", args.rate, args.latency_seconds)
    conf = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 100,
            "partition.assignment.strategy": "roundrobin", "auto.offset.reset": "latest"}
    for n in args.group_sizes:
        runs = [trial(b.bootstrap, n, conf, 60.0)[0] for _ in range(args.group_repeat)]
        got = [v for v in runs if v is not None]
        out[f"group_{n}"] = statistics.median(got) if got else float("nan")
    return out


ROWS = [  # key, label, unit
    ("ready_s", "start to ready", "s"),
    ("rss_idle", "RSS idle", "MiB"),
    ("rss_load", "RSS peak under load", "MiB"),
    ("produce_acks1", "produce acks=1", "MB/s"),
    ("produce_acksall", "produce acks=all", "MB/s"),
    ("consume", "consume", "MB/s"),
    ("cpu_per_gb", "broker CPU per GB produced", "s"),
    ("lat_p50", "end-to-end latency p50", "ms"),
    ("lat_p99", "end-to-end latency p99", "ms"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rate", type=int, default=1000, help="records/s for the latency run")
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--group-sizes", default="10,50")
    ap.add_argument("--group-repeat", type=int, default=3)
    ap.add_argument("--kafka-line", default="4")
    ap.add_argument("--quick", action="store_true", help="50k records, 1 repeat, 3 s latency, one group trial")
    args = ap.parse_args()
    if args.quick:
        args.records, args.repeat, args.latency_seconds, args.group_repeat = 50_000, 1, 3.0, 1
    args.group_sizes = [int(s) for s in args.group_sizes.split(",")]
    for n in args.group_sizes:
        ROWS.append((f"group_{n}", f"classic group of {n} stable", "s"))
    import confluent_kafka

    print(f"confluent-kafka {confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]}), "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {args.records} x 1 KiB x {args.repeat}",
          flush=True)
    results: dict[str, dict[str, float]] = {}
    names = []
    with tempfile.TemporaryDirectory() as tmp:
        for start in (lambda: start_shoal_broker(Path(tmp)), lambda: start_kafka_broker(Path(tmp), args.kafka_line)):
            b = start()
            names.append(b.name)
            try:
                results[b.name] = measure(b, args)
            finally:
                b.stop()
            print(f"{b.name}: {results[b.name]} {b.note}", flush=True)
    shoal, kafka = (results[n] for n in names)
    print(f"\n| | shoal | {names[1]} | shoal / Kafka |\n|---|---|---|---|")
    for key, label, unit in ROWS:
        s, k = shoal[key], kafka[key]
        note = f"{k / s:.1f}x faster" if key == "ready_s" else f"{s / k if k else float('nan'):.2f}x"
        print(f"| {label} | {s:.2f} {unit} | {k:.2f} {unit} | {note} |")


if __name__ == "__main__":
    main()
