"""The pipeline on a Spark standalone cluster: ``python tests/spark/cluster_job.py BOOTSTRAP MASTER_URL CHECKPOINT``.

Copies ``cluster-in`` to ``cluster-out`` exactly once through the shoal source and sink, with the
executors on the cluster's workers; prints the rows read and how many executors the job had.
"""

from __future__ import annotations

import sys


def main() -> None:
    bootstrap, master, checkpoint = sys.argv[1:4]
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master(master).appName("shoal-cluster-test")
             .config("spark.pyspark.python", sys.executable).config("spark.ui.enabled", "false")
             .config("spark.executor.memory", "512m").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    src = (spark.readStream.format("shoal").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", "cluster-in").option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", "1000").load())
    q = (src.select("key", F.concat(F.lit(b"out-"), F.col("value")).alias("value"))
         .writeStream.format("shoal").option("kafka.bootstrap.servers", bootstrap).option("topic", "cluster-out")
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    q.awaitTermination()
    executors = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    print("rows", sum(p["numInputRows"] for p in q.recentProgress), "executors", len(executors) - 1, flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
