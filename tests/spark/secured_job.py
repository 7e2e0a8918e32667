"""A Spark job on a secured listener, either connector: ``python secured_job.py SPEC.json OUT.json``.

It reads a topic in batch and writes the values to another topic, passing the spec's ``kafka.*``
security options (SASL, TLS: Kafka's client property names) to the connector, and writes the rows it
read to OUT.json (tests/spark/test_secured.py).
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    spec = json.loads(open(sys.argv[1]).read())
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.master("local[2,3]").appName(f"secured-{spec['format']}")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2"))
    if spec.get("jars"):
        b = b.config("spark.jars", ",".join(spec["jars"]))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    reader = spark.read.format(spec["format"]).option("kafka.bootstrap.servers", spec["bootstrap"])
    for k, v in spec["options"].items():
        reader = reader.option(k, v)
    df = reader.option("subscribe", spec["source"]).load()
    values = sorted(bytes(r.value).decode() for r in df.select("value").collect())
    writer = df.selectExpr("value").write.format(spec["format"]).option("kafka.bootstrap.servers", spec["bootstrap"])
    for k, v in spec["options"].items():
        writer = writer.option(k, v)
    writer.option("topic", spec["sink"]).mode("append").save()
    spark.stop()
    with open(sys.argv[2], "w") as f:
        json.dump({"values": values}, f)


if __name__ == "__main__":
    main()
