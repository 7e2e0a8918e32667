"""``format("shoal")``: the data source Spark finds with no register call.

PySpark registers, at session start, every installed top-level module named
``pyspark_*`` that exposes ``DefaultSource``; ``pyspark_shoal`` points at this
class. This module imports only PySpark's data-source API and the options
module, so a Spark session pays nothing for shoal until a query uses it; the
readers and writers (and pyarrow, numpy, shoal's client) load on first use.

``spark.dataSource.register(ShoalDataSource)`` does the same by hand.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource

from shoal.spark.options import spark_ddl


class ShoalDataSource(DataSource):
    """Spark's Kafka source and sink, same options and schema, over shoal's client."""

    @classmethod
    def name(cls) -> str:
        return "shoal"

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", self.options.get("includeheaders", "false")))
        return spark_ddl(include.strip().lower() == "true")

    def reader(self, schema: Any) -> Any:
        from shoal.spark.source import KafkaBatchReader

        return KafkaBatchReader(dict(self.options))

    def streamReader(self, schema: Any) -> Any:
        from shoal.spark.source import KafkaStreamReader

        return KafkaStreamReader(dict(self.options))

    def writer(self, schema: Any, overwrite: bool) -> Any:
        from shoal.spark.sink import KafkaBatchWriter

        return KafkaBatchWriter(dict(self.options), schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        from shoal.spark.sink import KafkaStreamWriter

        return KafkaStreamWriter(dict(self.options), schema)
