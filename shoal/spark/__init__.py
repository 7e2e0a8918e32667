"""shoal on Spark: the ``format("shoal")`` data source and offsets/lag analytics.

``spark.read.format("shoal")`` / ``readStream`` / ``write`` / ``writeStream``
take Spark's Kafka connector options (see docs/spark.md). Importing this
package is light; the analytics load their dependencies when called.
"""

from __future__ import annotations

from typing import Any


def consumer_offsets(spark: Any, bootstrap: str, **kafka: str) -> Any:
    """``__consumer_offsets`` as a DataFrame: the committed offset of every group and partition."""
    from shoal.spark.analytics import consumer_offsets as impl

    return impl(spark, bootstrap, **kafka)


def lag(spark: Any, bootstrap: str, **kafka: str) -> Any:
    """Every group's lag per partition, as kafka-consumer-groups prints it."""
    from shoal.spark.analytics import lag as impl

    return impl(spark, bootstrap, **kafka)


__all__ = ["consumer_offsets", "lag"]
