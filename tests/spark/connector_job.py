"""One Spark job, either connector: ``python connector_job.py SPEC.json OUT.json``.

The same job runs as ``format("kafka")`` (Spark's own connector, spark-sql-kafka-0-10, on the
PySpark that matches it) and as ``format("shoal")``, against shoal or Apache Kafka. It prints
nothing of its own: every result goes to OUT.json as rows (lists of plain values), so the test can
compare the four combinations. The spec names the format, the bootstrap servers, the jars (for
``kafka``) and the topics that the test prepared (tests/spark/test_connectors.py).
"""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any


def rows(df: Any) -> list[list[Any]]:
    """Rows as sortable plain values: bytes as text, timestamps as epoch milliseconds."""
    out = []
    for r in df.collect():
        row = []
        for v in r:
            if isinstance(v, bytes | bytearray):
                v = bytes(v).decode("latin-1")
            elif hasattr(v, "timestamp"):
                v = round(v.timestamp() * 1000)
            elif isinstance(v, list):  # headers: [(key, value)]
                v = [[h[0], None if h[1] is None else bytes(h[1]).decode("latin-1")] for h in v]
            row.append(v)
        out.append(row)
    return sorted(out, key=json.dumps)


COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def batch_jobs(spark: Any, fmt: str, spec: dict[str, Any]) -> dict[str, Any]:
    t = spec["topics"]

    def read(**opts: str) -> Any:
        r = spark.read.format(fmt).option("kafka.bootstrap.servers", spec["bootstrap"])
        for k, v in opts.items():
            r = r.option(k, v)
        return r.load()

    res: dict[str, Any] = {}
    res["all"] = rows(read(subscribe=t["data"], includeHeaders="true").select(*COLUMNS, "headers"))
    res["offset_range"] = rows(read(
        subscribe=t["data"],
        startingOffsets=json.dumps({t["data"]: {"0": 2, "1": -2}}),
        endingOffsets=json.dumps({t["data"]: {"0": 8, "1": -1}})).select(*COLUMNS))
    res["assign"] = rows(read(assign=json.dumps({t["data"]: [1]})).select("value", "partition", "offset"))
    res["pattern"] = rows(read(subscribePattern=t["data"][:-1] + ".*").select("value", "topic"))
    ts = spec["middle_timestamp"]
    res["by_timestamp"] = rows(read(subscribe=t["data"], startingTimestamp=str(ts)).select("value", "offset"))
    res["by_partition_timestamp"] = rows(read(
        subscribe=t["data"],
        startingOffsetsByTimestamp=json.dumps({t["data"]: {"0": ts, "1": ts}}),
        endingOffsetsByTimestamp=json.dumps({t["data"]: {"0": ts + 3, "1": ts + 3}})).select("value", "offset"))
    res["read_committed"] = rows(read(**{"subscribe": t["txn"], "kafka.isolation.level": "read_committed"})
                                 .select("value"))
    res["read_uncommitted"] = rows(read(subscribe=t["txn"]).select("value"))
    # Spark matches a pattern anywhere in a topic's name (Regex.findFirstIn), not the whole name.
    res["pattern_partial"] = attempt(lambda: rows(read(subscribePattern=t["data"][1:-1]).select("value", "topic")))
    # A batch read takes no rate limits: Spark warns and reads everything.
    res["batch_ignores_rate_limits"] = attempt(lambda: rows(read(subscribe=t["data"], maxOffsetsPerTrigger="3",
                                                                 minOffsetsPerTrigger="2").select("value")))
    res["unknown_topic"] = attempt(lambda: rows(read(subscribe=f"{t['data']}-missing").select("value")))
    return res


def attempt(job: Any) -> Any:
    """The job's rows, or the name of the exception class (connectors' messages differ) it failed with."""
    try:
        return job()
    except Exception as e:  # noqa: BLE001 - the failure itself is the result
        # Kafka's exception name, in the JVM's trace or in shoal's message, is what both connectors share.
        found = re.search(r"UnknownTopicOrPartition|OffsetOutOfRange|TopicAuthorization|Timeout", str(e))
        return ["failed", found.group(0) if found else "other"]


def stream_job(spark: Any, fmt: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A rate-limited stream to the end of its topic (AvailableNow), then more input and a restart
    from the checkpoint: the rows of each micro-batch, per run."""
    from confluent_kafka import Producer

    progress: list[list[Any]] = []

    def run() -> list[list[list[Any]]]:
        batches: list[list[list[Any]]] = []
        q = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", spec["bootstrap"])
             .option("subscribe", spec["topics"]["stream"]).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "7").load().select("value", "partition", "offset")
             .writeStream.foreachBatch(lambda df, _: batches.append(rows(df)))
             .option("checkpointLocation", spec["checkpoint"]).trigger(availableNow=True).start())
        q.awaitTermination()
        # Not compared: the offsets each batch covered, for the message when a run reads nothing.
        progress.append([[p["batchId"], p["numInputRows"], [s.get("startOffset") for s in p["sources"]],
                          [s.get("endOffset") for s in p["sources"]]] for p in q.recentProgress])
        return [b for b in batches if b]

    first = run()
    p = Producer({"bootstrap.servers": spec["bootstrap"]})
    for i in range(20, 25):
        p.produce(spec["topics"]["stream"], value=f"v{i}".encode(), partition=i % 2)
    p.flush(30)
    restarted = run()
    return {"stream_batches": first, "stream_restarted": restarted, "stream_progress": progress}


def min_trigger_job(spark: Any, fmt: str, spec: dict[str, Any]) -> dict[str, Any]:
    """minOffsetsPerTrigger alone: the first batch fires at once, later ones wait for enough records.

    Processing-time triggers every 200 ms and a maxTriggerDelay of an hour: 3 records, then 5 (held back,
    fewer than 10), then 6 more (11 waiting: one batch). The sizes of the batches are the result."""
    from confluent_kafka import Producer

    topic = spec["topics"]["min"]
    p = Producer({"bootstrap.servers": spec["bootstrap"]})

    def send(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            p.produce(topic, value=f"m{i}".encode(), partition=0)
        p.flush(30)

    sizes: list[int] = []
    send(0, 3)
    q = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", spec["bootstrap"])
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("minOffsetsPerTrigger", "10").option("maxTriggerDelay", "1h").load()
         .writeStream.foreachBatch(lambda df, _: sizes.append(df.count()))
         .option("checkpointLocation", spec["checkpoint"] + "-min").trigger(processingTime="200 milliseconds")
         .start())
    try:
        wait_for(lambda: len(sizes) >= 1)
        send(3, 8)
        time.sleep(3)  # fifteen triggers: none may fire a batch for 5 records
        held = list(sizes)
        send(8, 14)
        wait_for(lambda: len(sizes) >= 2)
    finally:
        q.stop()
    return {"min_trigger_held": held, "min_trigger_batches": sizes}


def recreate_job(spark: Any, fmt: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A topic deleted and recreated (fewer records) while its query is stopped, then the query restarted
    from its checkpoint, with failOnDataLoss true and false: what each run reads, or how it fails."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": spec["bootstrap"]})
    out: dict[str, Any] = {}
    for fail in ("true", "false"):
        topic = f"{spec['topics']['recreate']}-{fail}"
        checkpoint = f"{spec['checkpoint']}-recreate-{fail}"

        def create(n: int, prefix: str, topic: str = topic) -> None:
            deadline = time.monotonic() + 60
            while True:  # a deletion finishes in the background: creating again may have to wait
                try:
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    break
                except Exception:  # noqa: BLE001 - TOPIC_ALREADY_EXISTS while the deletion runs
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            p = Producer({"bootstrap.servers": spec["bootstrap"]})
            for i in range(n):
                p.produce(topic, value=f"{prefix}{i}".encode(), partition=0)
            p.flush(30)

        def run(topic: str = topic, checkpoint: str = checkpoint, fail: str = fail) -> Any:
            batches: list[list[list[Any]]] = []
            r = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", spec["bootstrap"])
                 .option("subscribe", topic).option("startingOffsets", "earliest").option("failOnDataLoss", fail))
            if fmt == "shoal":  # its progress published to a group too: the commit must follow the new topic
                r = r.option("commitOffsetsToGroup", f"{topic}-progress")
            q = (r.load().select("value", "offset")
                 .writeStream.foreachBatch(lambda df, _: batches.append(rows(df)))
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
            try:
                q.awaitTermination()
            except Exception as e:  # noqa: BLE001 - the failure is the result
                lost = re.search(r"data loss|offset was changed|are gone|gone|deleted|recreated", str(e), re.I)
                return ["failed", "data loss" if lost else str(e).splitlines()[0][:200]]
            return [b for b in batches if b]

        create(10, "a")
        first = run()
        admin.delete_topics([topic])[topic].result(30)
        create(4, "b")
        after = run()
        if after and after[0] == "failed":
            out[f"recreate_fail_{fail}"] = [first, after]
            continue
        p = Producer({"bootstrap.servers": spec["bootstrap"]})
        for i in range(3):
            p.produce(topic, value=f"c{i}".encode(), partition=0)
        p.flush(30)
        out[f"recreate_fail_{fail}"] = [first, after, run()]
    return out


def wait_for(cond: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("the stream made no batch in time")
        time.sleep(0.1)


def cross_job(spark: Any, fmt: str, spec: dict[str, Any]) -> dict[str, Any]:
    """What each connector wrote, read by this one."""
    res = {}
    for writer in ("kafka", "shoal"):
        df = (spark.read.format(fmt).option("kafka.bootstrap.servers", spec["bootstrap"])
              .option("subscribe", f"{spec['topics']['out_prefix']}{writer}").option("includeHeaders", "true")
              .load().select("key", "value", "partition", "headers"))  # timestamps: the writer's clock
        res[f"read_{writer}_output"] = rows(df)
    return res


def write_job(spark: Any, fmt: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Keys, values, headers, partitions and timestamps, written by the connector."""
    from pyspark.sql import functions as F

    data = [(f"k{i}", f"w{i}", i % 2, spec["write_timestamp"] + i) for i in range(10)]
    df = (spark.createDataFrame(data, "key string, value string, partition int, ts long")
          .select("key", "value", "partition", (F.col("ts") / 1000).cast("timestamp").alias("timestamp"),
                  F.array(F.struct(F.lit("h").alias("key"), F.col("key").cast("binary").alias("value")))
                  .alias("headers")))
    (df.write.format(fmt).option("kafka.bootstrap.servers", spec["bootstrap"])
     .option("topic", spec["topics"]["out"]).mode("append").save())
    # Kafka's RoundRobinPartitioner for rows without a partition, one key for all: spread, not hashed.
    (spark.createDataFrame([("k", f"r{i}") for i in range(10)], "key string, value string").coalesce(1)
     .write.format(fmt).option("kafka.bootstrap.servers", spec["bootstrap"]).option("topic", spec["topics"]["rr"])
     .option("kafka.partitioner.class", "org.apache.kafka.clients.producer.RoundRobinPartitioner")
     .mode("append").save())
    return {}


JOBS = {"batch": batch_jobs, "stream": stream_job, "write": write_job, "cross": cross_job,
        "min_trigger": min_trigger_job, "recreate": recreate_job}


def main() -> None:
    """SPEC.json holds one spec or a list of them (the same format and jars, e.g. one per broker),
    run in turn in one Spark session; OUT.json gets one result (or the list of them) back."""
    given = json.loads(open(sys.argv[1]).read())
    specs = given if isinstance(given, list) else [given]
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.master("local[2,3]").appName(f"connector-{specs[0]['format']}")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2"))
    if specs[0].get("jars"):
        b = b.config("spark.jars", ",".join(specs[0]["jars"]))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    outs: list[dict[str, Any]] = []
    try:
        for spec in specs:
            out: dict[str, Any] = {}
            for job in spec["jobs"]:
                out.update(JOBS[job](spark, spec["format"], spec))
            outs.append(out)
    finally:
        spark.stop()
    with open(sys.argv[2], "w") as f:
        json.dump(outs if isinstance(given, list) else outs[0], f)


if __name__ == "__main__":
    main()
