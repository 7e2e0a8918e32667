"""Offsets and lag as DataFrames: ``__consumer_offsets`` decoded, and every group's lag.

``consumer_offsets`` reads ``__consumer_offsets`` with one Spark task per
partition of it (a group's records all live in one partition, so each task
can compact on its own): the last value per key, tombstones applied,
transactional offset commits counted only once their transaction committed
(pending and aborted ones left out), as the group coordinator itself loads
them. Columns: group, topic, partition, offset, leader_epoch, metadata,
commit_timestamp, expire_timestamp.

``lag`` joins those offsets with each partition's log end offset (ListOffsets
latest, read_uncommitted, as kafka-consumer-groups): group, topic, partition,
current_offset, log_end_offset, lag. The exactly-once sink's replay markers
(metadata tagged ``shoal_spark_marker``) are left out.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from shoal.spark.options import client_config

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_DDL = ("group string, topic string, partition int, offset long, leader_epoch int, metadata string, "
               "commit_timestamp timestamp, expire_timestamp timestamp")
_H = struct.Struct(">h")


def decode_offset_commit(key: bytes, value: bytes) -> tuple | None:
    """An OffsetCommit record as a row (None for the other record types of the topic)."""
    from shoal.protocol.generated.offset_commit_key import OffsetCommitKey
    from shoal.protocol.generated.offset_commit_value import OffsetCommitValue

    kv = _H.unpack_from(key, 0)[0]
    if kv not in (0, 1):
        return None
    k = OffsetCommitKey.decode(memoryview(key)[2:], kv)
    vv = _H.unpack_from(value, 0)[0]
    v = OffsetCommitValue.decode(memoryview(value)[2:], vv)
    expire = v.expire_timestamp if vv == 1 and v.expire_timestamp >= 0 else None
    return (k.group, k.topic, k.partition, v.offset, v.leader_epoch if vv >= 3 else -1, v.metadata,
            v.commit_timestamp, expire)


def read_offsets_partition(config: dict[str, Any], partition: int) -> list[tuple]:
    """The committed offsets held by one ``__consumer_offsets`` partition."""
    from shoal.client.structs import TopicPartition
    from shoal.protocol.compacted import LatestValues
    from shoal.protocol.record_batch import iter_batches
    from shoal.spark.kafka_io import EARLIEST, LATEST, KafkaIO

    io = KafkaIO.shared(config)
    tp = TopicPartition(OFFSETS_TOPIC, partition)
    ends = io.list_offsets({tp: EARLIEST}, False), io.list_offsets({tp: LATEST}, False)
    offset, end = ends[0][tp], ends[1][tp]
    values = LatestValues()
    while offset < end:
        f = io.fetch(tp, offset, 8 * 1024 * 1024, read_committed=False)
        if f.error:
            from shoal.client.errors import error_for

            raise error_for(f.error, f"fetch {OFFSETS_TOPIC}-{partition}")
        values.add(f.records, start=offset)
        nxt = offset
        for h in iter_batches(f.records):
            nxt = max(nxt, h.next_offset)
        if nxt == offset:
            break
        offset = nxt
    rows = []
    for key, value in values.latest.items():
        if value is not None:
            row = decode_offset_commit(key, value)
            if row is not None:
                rows.append(row)
    return rows


class _OffsetsReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.config = client_config({"bootstrap.servers": options["bootstrap.servers"]})

    def partitions(self) -> list[InputPartition]:
        from shoal.spark.kafka_io import KafkaIO

        n = KafkaIO.shared(self.config).partitions([OFFSETS_TOPIC]).get(OFFSETS_TOPIC, 0)
        return [InputPartition(p) for p in range(n)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import datetime as dt

        def ts(ms: int | None) -> dt.datetime | None:
            return None if ms is None or ms < 0 else dt.datetime.fromtimestamp(ms / 1000, dt.UTC)

        for g, t, p, off, epoch, meta, commit, expire in read_offsets_partition(self.config, partition.value):
            yield g, t, p, off, epoch, meta, ts(commit), ts(expire)


class ConsumerOffsetsSource(DataSource):
    """The internal source behind ``consumer_offsets`` (registered by it)."""

    @classmethod
    def name(cls) -> str:
        return "shoal_consumer_offsets"

    def schema(self) -> str:
        return OFFSETS_DDL

    def reader(self, schema: Any) -> DataSourceReader:
        return _OffsetsReader(dict(self.options))


def consumer_offsets(spark: Any, bootstrap: str, **kafka: str) -> Any:
    spark.dataSource.register(ConsumerOffsetsSource)
    return spark.read.format("shoal_consumer_offsets").option("bootstrap.servers", bootstrap).load()


def lag(spark: Any, bootstrap: str, **kafka: str) -> Any:
    from pyspark.sql import functions as F

    from shoal.client.structs import TopicPartition
    from shoal.spark.kafka_io import LATEST, KafkaIO

    # The exactly-once sink's replay markers are offsets too, but of no consumer: leave them out.
    offsets = consumer_offsets(spark, bootstrap, **kafka).where(
        ~F.coalesce(F.col("metadata"), F.lit("")).startswith('{"shoal_spark_marker"')).cache()
    tps = [(r["topic"], r["partition"]) for r in offsets.select("topic", "partition").distinct().collect()]
    io = KafkaIO.shared(client_config({"bootstrap.servers": bootstrap}))
    known = io.partitions(sorted({t for t, _ in tps}))
    live = [TopicPartition(t, p) for t, p in tps if p < known.get(t, 0)]
    ends = io.list_offsets(dict.fromkeys(live, LATEST), False) if live else {}
    end_df = spark.createDataFrame([(tp.topic, tp.partition, off) for tp, off in ends.items()],
                                   "topic string, partition int, log_end_offset long")
    return (offsets.join(end_df, ["topic", "partition"], "left")
            .select("group", "topic", "partition", F.col("offset").alias("current_offset"), "log_end_offset",
                    (F.col("log_end_offset") - F.col("offset")).alias("lag"))
            .orderBy("group", "topic", "partition"))
