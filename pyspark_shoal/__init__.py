"""PySpark's auto-registration hook: ``spark.read.format("shoal")`` with no register call.

A thin shim (PySpark imports every ``pyspark_*`` module at session start):
the data source it names loads nothing heavy until a query uses it.
"""

from shoal.spark.datasource import ShoalDataSource as DefaultSource

__all__ = ["DefaultSource"]
