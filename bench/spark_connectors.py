"""Spark's own connector beside format("shoal"), each against shoal and against Apache Kafka, one run.

    .venv/bin/python bench/spark_connectors.py [--records 1000000] [--value-bytes 100] [--repeat 3]

For each broker (a `shoal serve` and an Apache Kafka 4.x node from tests/reference/apache_kafka.py,
one at a time, same machine) topic `in` (2 partitions) gets N records; then for each connector a Spark
job (local[2]; format("kafka") is spark-sql-kafka-0-10 4.2.0 on PySpark 4.2.0 from .venv-spark-kafka,
format("shoal") runs on this venv's PySpark) measures, after a warm-up query:

1. read -> noop: the batch read of all N records into Spark's `noop` sink;
2. copy: readStream -> value = concat("out-", value) -> writeStream of the same format, AvailableNow,
   micro-batches of 500,000. format("shoal") writes exactly once (its default); Spark's connector has
   no exactly-once sink, so its copy is at-least-once, and format("shoal") at_least_once is shown too.

Rows/s over the whole query (session start excluded), medians over --repeat runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from spark_pipeline import PARTITIONS, fill, start_shoal  # noqa: E402

from tests.reference import maven  # noqa: E402
from tests.reference.apache_kafka import KafkaCluster  # noqa: E402

SPARK_VERSION = "4.2.0"
CONNECTOR_JARS = ("spark-sql-kafka-0-10", "spark-token-provider-kafka-0-10", "kafka-clients", "commons-pool2")

JOB = r'''
import json, sys, time
from pyspark.sql import SparkSession, functions as F
spec = json.loads(sys.argv[1])
b = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false") \
    .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g")
if spec["jars"]:
    b = b.config("spark.jars", ",".join(spec["jars"]))
spark = b.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
fmt, bs, n = spec["format"], spec["bootstrap"], spec["records"]
def read_noop():
    spark.read.format(fmt).option("kafka.bootstrap.servers", bs).option("subscribe", "in").load() \
        .write.format("noop").mode("overwrite").save()
def copy(run, guarantee):
    w = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bs).option("subscribe", "in")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "500000").load()
         .select("key", F.concat(F.lit(b"out-"), F.col("value")).alias("value"))
         .writeStream.format(fmt).option("kafka.bootstrap.servers", bs).option("topic", f"out-{run}")
         .option("checkpointLocation", f"{spec['tmp']}/ck-{run}"))
    if fmt == "shoal":
        w = w.option("deliveryGuarantee", guarantee)
    w.trigger(availableNow=True).start().awaitTermination()
out = {}
def timed(name, fn):
    t0 = time.perf_counter(); fn(); out.setdefault(name, []).append(n / (time.perf_counter() - t0))
read_noop()  # warm-up
for r in range(spec["repeat"]):
    timed("read_noop", read_noop)
    for g in spec["guarantees"]:
        timed(f"copy_{g}", lambda r=r, g=g: copy(f"{g}-{r}", g))
print("RESULT " + json.dumps(out), flush=True)
spark.stop()
'''


def connector_jars() -> list[str]:
    lib = maven.resolve(f"spark-sql-kafka-{SPARK_VERSION}",
                        [("org.apache.spark", "spark-sql-kafka-0-10_2.13", SPARK_VERSION)])
    return [str(j) for j in sorted(lib.glob("*.jar")) if j.name.startswith(CONNECTOR_JARS)]


def run_job(fmt: str, bootstrap: str, args: argparse.Namespace, tmp: str) -> dict[str, float]:
    python = ROOT / ".venv-spark-kafka" / "bin" / "python" if fmt == "kafka" else Path(sys.executable)
    spec = {"format": fmt, "bootstrap": bootstrap, "records": args.records, "repeat": args.repeat,
            "jars": connector_jars() if fmt == "kafka" else [], "tmp": tmp,
            "guarantees": ["at_least_once"] if fmt == "kafka" else ["exactly_once", "at_least_once"]}
    res = subprocess.run([str(python), "-c", JOB, json.dumps(spec)], capture_output=True, text=True,
                         timeout=3600, cwd=tmp, env={"PATH": f"{python.parent}:/usr/bin:/bin",
                                                     "PYSPARK_PYTHON": str(python), "HOME": str(Path.home())})
    line = next((x for x in res.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{fmt} job failed:\n{res.stderr[-3000:]}")
    return {k: statistics.median(v) for k, v in json.loads(line[7:]).items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    results: dict[tuple[str, str], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for broker in ("shoal", "kafka"):
            if broker == "shoal":
                proc, bootstrap = start_shoal(f"{tmp}/shoal-data")
                stop = proc.terminate
            else:
                cluster = KafkaCluster("4", 1, Path(tmp) / "kafka",
                                       overrides={"num.partitions": str(PARTITIONS)}).start()
                bootstrap, stop = cluster.bootstrap_servers, cluster.stop
            try:
                fill(bootstrap, args.records, args.value_bytes)
                for fmt in ("kafka", "shoal"):
                    work = Path(tmp) / f"{broker}-{fmt}"  # checkpoints of its own: a query must not resume
                    work.mkdir()
                    results[(broker, fmt)] = r = run_job(fmt, bootstrap, args, str(work))
                    print(f"{broker:5s} format({fmt!r}): " + ", ".join(f"{k} {v:,.0f} rows/s" for k, v in r.items()),
                          flush=True)
            finally:
                stop()
    print(f"\n{args.records:,} records x {args.value_bytes} B, rows/s (medians of {args.repeat})\n")
    print("| | format(\"kafka\") on shoal | format(\"shoal\") on shoal | format(\"kafka\") on Kafka "
          "| format(\"shoal\") on Kafka |\n|---|---|---|---|---|")
    for key, label in (("read_noop", "read -> noop"), ("copy_exactly_once", "copy, exactly once"),
                       ("copy_at_least_once", "copy, at least once")):
        cells = [results[(b, f)].get(key) for b in ("shoal", "kafka") for f in ("kafka", "shoal")]
        print(f"| {label} | " + " | ".join("n/a (no such sink)" if c is None else f"{c:,.0f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
