"""A consume-transform-produce pipeline on Spark, exactly once: orders in, enriched orders out.

    shoal serve &                       # or any Kafka-compatible cluster
    python examples/pipeline.py [--bootstrap 127.0.0.1:9092] [--orders 20000]

Seeds topic ``orders`` with JSON orders (if it is empty), then runs a streaming query that reads
them (read_committed), keeps orders of at least 10 units, adds their total price and writes them to
``big-orders`` keyed by customer, in transactions (``deliveryGuarantee=exactly_once``, the
default). The query commits its progress to consumer group ``orders-pipeline``, so
``shoal groups describe orders-pipeline`` shows its lag. Run it again: it resumes from its
checkpoint and writes nothing twice.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time


def seed(bootstrap: str, n: int) -> None:
    from shoal.client import AdminClient, NewTopic, Producer, TopicPartition

    admin = AdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic("orders", 2, 1), NewTopic("big-orders", 2, 1)])
        ends = admin.list_offsets({TopicPartition("orders", p): "latest" for p in range(2)})
    finally:
        admin.close()
    if sum(off for off, _ in ends.values()):
        return  # seeded before
    rng = random.Random(7)
    p = Producer(bootstrap_servers=bootstrap)
    for i in range(n):
        order = {"id": i, "customer": f"c{rng.randrange(500)}", "units": rng.randrange(1, 25),
                 "price": round(rng.uniform(1, 100), 2)}
        p.send("orders", json.dumps(order).encode(), key=order["customer"].encode())
    p.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--orders", type=int, default=20_000)
    ap.add_argument("--checkpoint", default=os.path.join(tempfile.gettempdir(), "shoal-orders-pipeline"))
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    seed(args.bootstrap, args.orders)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    schema = "id long, customer string, units int, price double"
    orders = (spark.readStream.format("shoal")  # the same options as format("kafka")
              .option("kafka.bootstrap.servers", args.bootstrap).option("subscribe", "orders")
              .option("startingOffsets", "earliest").option("kafka.isolation.level", "read_committed")
              .option("maxOffsetsPerTrigger", "50000").option("commitOffsetsToGroup", "orders-pipeline").load())
    big = (orders.select(F.from_json(F.col("value").cast("string"), schema).alias("o")).select("o.*")
           .where("units >= 10").withColumn("total", F.round(F.col("units") * F.col("price"), 2)))
    out = big.select(F.col("customer").alias("key"), F.to_json(F.struct("id", "customer", "units", "total")).alias(
        "value"))
    started = time.monotonic()
    query = (out.writeStream.format("shoal").option("kafka.bootstrap.servers", args.bootstrap)
             .option("topic", "big-orders").option("checkpointLocation", args.checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    print(f"read {rows} orders in {time.monotonic() - started:.1f} s; big orders in topic big-orders:",
          spark.read.format("shoal").option("kafka.bootstrap.servers", args.bootstrap)
          .option("subscribe", "big-orders").option("kafka.isolation.level", "read_committed").load().count())
    spark.stop()


if __name__ == "__main__":
    main()
