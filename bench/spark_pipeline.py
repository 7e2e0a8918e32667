"""The Spark pipeline against a shoal broker, one run: read, exactly-once and at-least-once copies, plain loops.

    .venv/bin/python bench/spark_pipeline.py [--records 2000000] [--value-bytes 100] [--repeat 3]

A `shoal serve` (started here, data in a temp dir) holds topic `in` (2 partitions) with N records.
Measured, each as rows/s over the whole query (Spark session start excluded; a warm-up query first):

1. read -> noop: `spark.read.format("shoal")` of all N records into the `noop` sink;
2. exactly-once consume-transform-produce: readStream -> value = concat("out-", value) -> writeStream
   format("shoal") (default deliveryGuarantee=exactly_once), AvailableNow, micro-batches of 500,000;
3. the same, deliveryGuarantee=at_least_once;
4. a plain Python consume-transform-produce loop with shoal's client (poll -> send -> commit), and
5. the same loop with confluent-kafka.

Spark runs `local[2]` on the same 2 cores as the broker. The broker's CPU seconds per phase come
from /proc. Medians over --repeat runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PARTITIONS = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_shoal(data_dir: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "shoal.cli", "--log-level", "WARNING", "serve",
                             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                             "--override", f"log.dirs={data_dir}",
                             "--override", "group.initial.rebalance.delay.ms=0",
                             # output topics are auto-created with the input's partition count
                             "--override", f"num.partitions={PARTITIONS}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("shoal did not start") from None
            time.sleep(0.02)


def fill(bs: str, n: int, value_bytes: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    for fut in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in ("in", "warm")]).values():
        fut.result(20)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20, "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 2_000_000})
    value = b"v" * value_bytes
    for topic, count in (("in", n), ("warm", 10_000)):
        for i in range(count):
            while True:
                try:
                    p.produce(topic, key=b"%d" % i, value=value, partition=i % PARTITIONS)
                    break
                except BufferError:
                    p.poll(0.01)
    p.flush(120)


def spark_read_noop(spark, bs: str, topic: str) -> None:
    spark.read.format("shoal").option("kafka.bootstrap.servers", bs).option("subscribe", topic).load() \
        .write.format("noop").mode("overwrite").save()


def spark_copy(spark, bs: str, topic: str, out: str, guarantee: str, ckpt: str) -> int:
    from pyspark.sql import functions as F

    src = (spark.readStream.format("shoal").option("kafka.bootstrap.servers", bs).option("subscribe", topic)
           .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "500000").load())
    q = (src.select("key", F.concat(F.lit(b"out-"), F.col("value")).alias("value"), "partition")
         .writeStream.format("shoal").option("kafka.bootstrap.servers", bs).option("topic", out)
         .option("deliveryGuarantee", guarantee).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    return sum(p["numInputRows"] for p in q.recentProgress)


def shoal_loop(bs: str, n: int, out: str) -> None:
    from shoal.client import Consumer, Producer, TopicPartition

    c = Consumer(bootstrap_servers=bs, group_id=f"loop-{out}", auto_offset_reset="earliest",
                 enable_auto_commit=False, max_poll_records=5000)
    c.assign([TopicPartition("in", p) for p in range(PARTITIONS)])
    p = Producer(bootstrap_servers=bs, linger_ms=5, batch_size=65536)
    done = 0
    while done < n:
        for tp, recs in c.poll(1000).items():
            for r in recs:
                p.send(out, b"out-" + r.value, key=r.key, partition=tp.partition)
            done += len(recs)
        p.flush()
        c.commit_sync()
    p.close()
    c.close(autocommit=False)


def confluent_loop(bs: str, n: int, out: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": f"loop-{out}", "enable.auto.commit": False})
    c.assign([TopicPartition("in", p, 0) for p in range(PARTITIONS)])
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    done = 0
    while done < n:
        msgs = [m for m in c.consume(5000, 1.0) if not m.error()]
        for m in msgs:
            while True:
                try:
                    p.produce(out, b"out-" + m.value(), key=m.key(), partition=m.partition())
                    break
                except BufferError:
                    p.poll(0.005)
        done += len(msgs)
        p.flush(60)
        if msgs:
            c.commit(asynchronous=False)
    c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    tmp = tempfile.mkdtemp(prefix="shoal-spark-bench-")
    proc, bs = start_shoal(os.path.join(tmp, "data"))
    results: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}

    def measure(name: str, fn, *a) -> None:
        c0, t0 = cpu_seconds(proc.pid), time.perf_counter()
        fn(*a)
        elapsed = time.perf_counter() - t0
        results.setdefault(name, []).append(args.records / elapsed)
        cpu.setdefault(name, []).append(cpu_seconds(proc.pid) - c0)

    try:
        fill(bs, args.records, args.value_bytes)
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2").config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark_read_noop(spark, bs, "warm")
        spark_copy(spark, bs, "warm", "warm-out", "exactly_once", os.path.join(tmp, "warm-ck"))
        for r in range(args.repeat):
            measure("Spark read -> noop", spark_read_noop, spark, bs, "in")
            for guarantee in ("exactly_once", "at_least_once"):
                measure(f"Spark copy, {guarantee}", spark_copy, spark, bs, "in", f"out-{guarantee}-{r}", guarantee,
                        os.path.join(tmp, f"ck-{guarantee}-{r}"))
            measure("Python loop, shoal client", shoal_loop, bs, args.records, f"out-shoal-{r}")
            measure("Python loop, confluent-kafka", confluent_loop, bs, args.records, f"out-ck-{r}")
        spark.stop()
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.records:,} records of {args.value_bytes} B, {PARTITIONS} partitions; Spark local[2] and the "
          f"broker on this machine's {os.cpu_count()} cores; median of {args.repeat}")
    loop = statistics.median(results["Python loop, shoal client"])
    alo = statistics.median(results["Spark copy, at_least_once"])
    for name, rates in results.items():
        med = statistics.median(rates)
        extra = f"  {med / loop:4.2f}x the shoal-client loop" if "copy" in name else ""
        print(f"  {name:32s} {med:10,.0f} rows/s  (runs {', '.join(f'{x:,.0f}' for x in rates)}; broker CPU "
              f"{statistics.median(cpu[name]):.2f} s){extra}")
    eos = statistics.median(results["Spark copy, exactly_once"])
    print(f"  exactly-once costs {100 * (1 - eos / alo):.1f} % against at-least-once")


if __name__ == "__main__":
    main()
