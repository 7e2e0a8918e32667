"""What the Spark tests share: a batch read through format("shoal") with options."""

from __future__ import annotations

from typing import Any


def read(spark: Any, bs: str, **options: str) -> Any:
    """``spark.read.format("shoal")`` of the cluster at ``bs`` with these options, loaded."""
    r = spark.read.format("shoal").option("kafka.bootstrap.servers", bs)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()
