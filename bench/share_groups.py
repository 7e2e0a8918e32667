"""Share groups as a work queue: records/s on ONE partition as share consumers go from 1 to 8.

    .venv/bin/python bench/share_groups.py [--records 400] [--work-ms 10] [--consumers 1,2,4,8]
                                           [--brokers shoal,kafka] [--kafka-line 4]

The point of KIP-932: several consumers share one partition, so slow per-record work scales with
consumers, where a consumer group would give the partition to one member. Each consumer is a
confluent-kafka `ShareConsumer` in its own process (implicit acknowledgement, `max.poll.records`
10) that sleeps `--work-ms` per record (the "processing"). Per broker and consumer count: a fresh
topic of one partition holding `--records` records (one per batch: the brokers acquire whole
batches) and a fresh group starting at earliest; the
seconds from the consumers' start to the first record processed (joining the group, initializing
the share partition) and to the last; records/s from the first record processed to the last; how
many records were delivered more than once (none expected while consumers stay healthy). shoal
and Apache Kafka 4.x (one node each) run the same workload, one after the
other. Printed, never asserted; quote figures with the command in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from produce_fetch import start_shoal  # noqa: E402

from tests.reference.apache_kafka import KafkaCluster  # noqa: E402

KAFKA_SHARE = {"share.coordinator.state.topic.replication.factor": "1",
               "share.coordinator.state.topic.min.isr": "1", "group.initial.rebalance.delay.ms": "0"}


def consumer(bootstrap: str, group: str, topic: str, work_ms: float, out: mp.Queue) -> None:
    """One share consumer process: report each processed record's offset, until terminated."""
    from confluent_kafka import ShareConsumer

    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 10})
    c.subscribe([topic])
    try:
        while True:
            for m in c.poll(0.2):
                if m.error() is None:
                    time.sleep(work_ms / 1000)
                    out.put(m.offset())
    finally:
        c.close()


def prepare(bootstrap: str, records: int) -> tuple[str, str]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    topic, group = f"work-{uuid.uuid4().hex[:8]}", f"workers-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    res = ConfigResource("group", group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    # one record per batch: both brokers acquire whole batches (batch_optimized, KIP-1206), so records
    # produced in one batch would all go to the first consumer whatever max.poll.records says
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(records):
        p.produce(topic, value=f"job-{i}".encode())
    p.flush(30)
    return topic, group


def trial(bootstrap: str, n: int, records: int, work_ms: float) -> dict[str, float]:
    topic, group = prepare(bootstrap, records)
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    procs = [ctx.Process(target=consumer, args=(bootstrap, group, topic, work_ms, out), daemon=True)
             for _ in range(n)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    seen: Counter[int] = Counter()
    first = last = 0.0
    deadline = time.perf_counter() + 60 + records * work_ms / 1000
    while len(seen) < records and time.perf_counter() < deadline:
        try:
            seen[out.get(timeout=1)] += 1
        except Exception:  # noqa: BLE001 - queue.Empty: keep waiting until the deadline
            continue
        last = time.perf_counter()
        first = first or last
    elapsed = time.perf_counter() - t0
    for p in procs:
        p.terminate()
    for p in procs:
        p.join(10)
    return {"seconds": elapsed, "first": first - t0 if first else -1.0,
            "rate": (len(seen) - 1) / (last - first) if last > first else 0.0, "done": len(seen),
            "redelivered": sum(c - 1 for c in seen.values() if c > 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=400)
    ap.add_argument("--work-ms", type=float, default=10.0)
    ap.add_argument("--consumers", default="1,2,4,8")
    ap.add_argument("--brokers", default="shoal,kafka")
    ap.add_argument("--kafka-line", default="4")
    args = ap.parse_args()
    counts = [int(x) for x in args.consumers.split(",")]
    results: dict[str, dict[int, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.brokers.split(","):
            if name == "shoal":
                proc, port, _, _ = start_shoal(str(Path(tmp) / "shoal"))
                bootstrap, stop = f"127.0.0.1:{port}", proc.terminate
            else:
                cluster = KafkaCluster(args.kafka_line, 1, Path(tmp) / "kafka", overrides=KAFKA_SHARE)
                cluster.start()
                bootstrap, stop = cluster.bootstrap_servers, cluster.stop
                name = f"kafka {cluster.version}"
            try:
                results[name] = {n: trial(bootstrap, n, args.records, args.work_ms) for n in counts}
            finally:
                stop()
    print(f"{args.records} records on one partition, {args.work_ms:g} ms of work per record "
          f"(ideal: {1000 / args.work_ms:.0f} records/s per consumer)")
    print("first record: seconds from starting the consumers to the first record processed (joining, the "
          "share partition's initialization); records/s: from the first record processed to the last")
    print(f"{'broker':<14} {'consumers':>9} {'first rec s':>11} {'total s':>8} {'records/s':>10} {'done':>6} "
          f"{'redelivered':>11}")
    for name, by_n in results.items():
        for n, r in by_n.items():
            print(f"{name:<14} {n:>9} {r['first']:>11.2f} {r['seconds']:>8.2f} {r['rate']:>10.1f} "
                  f"{int(r['done']):>6} {int(r['redelivered']):>11}")
    names = list(results)
    if len(names) == 2:
        for n in counts:
            a, b = results[names[0]][n]["rate"], results[names[1]][n]["rate"]
            print(f"{n} consumers: {names[0]} / {names[1]} = {a / b:.2f}x")


if __name__ == "__main__":
    main()
