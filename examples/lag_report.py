"""A consumer-lag report on Spark: every group's committed offsets and lag, from ``__consumer_offsets``.

    shoal serve &
    python examples/pipeline.py          # leaves a group behind, or use any cluster with groups
    python examples/lag_report.py [--bootstrap 127.0.0.1:9092]

Prints the lag per group and partition (as kafka-consumer-groups --describe --all-groups prints
committed offset, log end offset and lag), then the total lag per group and topic.
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import shoal.spark

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    lag = shoal.spark.lag(spark, args.bootstrap)
    lag.show(50, truncate=False)
    (lag.groupBy("group", "topic").agg(F.sum("lag").alias("total_lag"), F.count("*").alias("partitions"))
     .orderBy(F.desc("total_lag")).show(truncate=False))
    spark.stop()


if __name__ == "__main__":
    main()
