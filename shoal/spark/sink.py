"""The Kafka sink: batch and streaming writes, at-least-once or exactly-once.

Input columns are Spark's Kafka sink's: ``value`` (binary or string,
required), ``key`` (binary or string), ``topic`` (string; the ``topic`` option
wins), ``partition`` (int; null or absent: Kafka's default partitioner —
murmur2 of the key, or one partition per task for null keys — or the one
``kafka.partitioner.class`` names) and ``headers``
(``array<struct<key string, value binary>>``, written whenever present). Rows
are grouped per topic-partition with numpy and encoded column-wise into whole
record batches, which go to shoal's producer as encoded bytes.

``deliveryGuarantee=exactly_once`` (the default): each task of a micro-batch
writes in one Kafka transaction of its own, transactional id
``<transactionalIdPrefix>-<query id>-<task partition>``. Taking the id
(InitProducerId) fences any earlier attempt of the same task and aborts what it
left open. Before writing, the task reads its replay marker — the offsets of
consumer group ``<prefix>.<query id>.<task partition>`` — and if the marker
says batch B is already written (a retried task, a batch replayed after a
driver restart), it writes nothing. Otherwise it writes its rows and the marker
(``B + 1``, through TxnOffsetCommit) in the same transaction, so a
read_committed reader sees a task's rows exactly once. What is atomic: one
task's rows of one batch. What must hold: the query is deterministic (the same
batch gives each task the same rows), as for any exactly-once Spark sink.

``deliveryGuarantee=at_least_once``: an idempotent producer pooled per Python
worker; a retried task writes its rows again.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from shoal.clock import now_ms
from shoal.spark.options import OptionError, SinkOptions, sink_options

MAX_BATCH_BYTES = 512 * 1024  # well within message.max.bytes (1 MiB by default)
MARKER_TAG = "shoal_spark_marker"  # in a replay marker's metadata; lag() leaves these groups out


@dataclass
class WriteResult(WriterCommitMessage):
    partition: int
    batch_id: int
    rows: int
    skipped: bool  # exactly-once: this task's batch had been written before (a replay)


def check_schema(schema: Any, opts: SinkOptions) -> None:
    """Spark-Kafka's errors for a DataFrame the sink cannot write."""
    names = {f.name: f for f in schema.fields}
    if "value" not in names:
        raise OptionError("Required attribute 'value' not found")
    if opts.topic is None and "topic" not in names:
        raise OptionError("topic option required when no 'topic' attribute is present. Use the topic option "
                          "for setting a topic.")
    for name, allowed in (("value", ("binary", "string")), ("key", ("binary", "string")), ("topic", ("string",)),
                          ("partition", ("int",))):
        f = names.get(name)
        if f is not None and f.dataType.simpleString() not in allowed:
            raise OptionError(f"{name} attribute type must be a {' or '.join(allowed)}")


def _task() -> tuple[int, int | None, str | None]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return 0, None, None
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    return ctx.partitionId(), (int(batch) if batch is not None else None), ctx.getLocalProperty(
        "sql.streaming.queryId")


class _Writer:
    """Arrow batches to record batches per (topic, partition), handed to the producer as they come.

    Rows are grouped with numpy (a stable sort on topic and partition keeps
    each partition's rows in input order) and each group's records section is
    encoded column-wise (``arrow_records.encode_records``), in pieces that fit
    in one record batch. ``before_first_send`` runs once, before the first
    batch goes out (the exactly-once path begins its transaction there).
    """

    def __init__(self, opts: SinkOptions, producer: Any, before_first_send: Any = None) -> None:
        self.opts = opts
        self.producer = producer
        self.before_first_send = before_first_send
        self.count = 0
        self.sent: list[Any] = []
        self.topics: set[str] = set()
        self._sticky: dict[str, int] = {}
        self._next: dict[str, int] = {}  # round robin's last partition per topic
        self._partitions: dict[str, int] = {}

    def _num_partitions(self, topic: str) -> int:
        n = self._partitions.get(topic)
        if n is None:
            # Waits for the topic's metadata (creating it where the broker auto-creates), as a producer does.
            n = self._partitions[topic] = len(self.producer.partitions_for(topic))
        return n

    def add(self, batch: Any) -> None:
        import numpy as np

        from shoal.protocol.record_encode import encode_headers

        n = batch.num_rows
        if n == 0:
            return
        cols = batch.schema.names
        values = batch.column("value")
        keys = batch.column("key") if "key" in cols else None
        headers = None
        if "headers" in cols:
            headers = [encode_headers([(h["key"], h["value"]) for h in hs] if hs else None)
                       for hs in batch.column("headers").to_pylist()]
        topic_names, topic_idx = self._topics(batch, n)
        parts, unset = self._given_partitions(batch, n)
        if len(unset):  # Kafka's default partitioner: murmur2 of the key, else one partition per task
            self._partition_unset(parts, unset, keys, topic_names, topic_idx)
        group = topic_idx << 32 | parts
        if (group != group[0]).any():
            order = np.argsort(group, kind="stable")
            group = group[order]
            take = pa.array(order)
            values = values.take(take)
            keys = keys.take(take) if keys is not None else None
            headers = [headers[i] for i in order.tolist()] if headers is not None else None
        bounds = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), n]
        ts = now_ms()
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            self._send_group(topic_names[int(group[lo]) >> 32], int(group[lo]) & 0xFFFFFFFF,
                             values, keys, headers, lo, hi, ts)
        self.count += n

    def _topics(self, batch: Any, n: int) -> tuple[list[str], Any]:
        """The batch's topics and, per row, the index of its topic among them."""
        import numpy as np
        import pyarrow.compute as pc

        if self.opts.topic is not None:
            return [self.opts.topic], np.zeros(n, np.int64)
        tcol = batch.column("topic")
        if tcol.null_count:
            raise OptionError("Null topic found while writing to Kafka: set the topic option or fill the "
                              "topic column")
        encoded = pc.dictionary_encode(tcol)
        return encoded.dictionary.to_pylist(), np.asarray(encoded.indices).astype(np.int64)

    @staticmethod
    def _given_partitions(batch: Any, n: int) -> tuple[Any, Any]:
        """Each row's partition column (0 where null or absent) and the rows that name none."""
        import numpy as np

        if "partition" not in batch.schema.names:
            return np.zeros(n, np.int64), np.arange(n)
        pcol = batch.column("partition")
        parts = np.asarray(pcol.fill_null(0)).astype(np.int64)
        unset = np.flatnonzero(np.asarray(pcol.is_null()))
        if (parts < 0).any():
            raise ValueError(f"Invalid partition: {int(parts.min())}")
        return parts, unset

    def _partition_unset(self, parts: Any, unset: Any, keys: Any, topic_names: list[str], topic_idx: Any) -> None:
        """Partitions for the rows that name none, as the configured Kafka partitioner chooses them."""
        from shoal.client.partitioner import partition_for_key

        key_list = keys.take(unset).to_pylist() if keys is not None else [None] * len(unset)
        how = self.opts.partitioner
        for i, key in zip(unset.tolist(), key_list, strict=True):
            topic = topic_names[topic_idx[i]]
            count = self._num_partitions(topic)
            if how == "round_robin":  # RoundRobinPartitioner: every record to the next partition
                parts[i] = self._next[topic] = (self._next.get(topic, random.randrange(count)) + 1) % count
            elif key is not None and how == "default":
                parts[i] = partition_for_key(key if isinstance(key, bytes) else key.encode(), count)
            else:
                sticky = self._sticky.get(topic)
                if sticky is None:
                    sticky = self._sticky[topic] = random.randrange(count)
                parts[i] = sticky

    def _send_group(self, topic: str, part: int, values: Any, keys: Any, headers: Any, lo: int, hi: int,
                    ts: int) -> None:
        """Rows [lo, hi), all of one topic-partition, to the producer as whole record batches."""
        from shoal.spark.arrow_records import encode_records

        for a, b in self._chunks(values, keys, headers, lo, hi):
            enc = encode_records(keys.slice(a, b - a) if keys is not None else None, values.slice(a, b - a),
                                 ts, headers[a:b] if headers is not None else None)
            if self.before_first_send is not None:
                self.before_first_send()
                self.before_first_send = None
            self.sent.append(self.producer.send_batch(topic, part, enc))
            self.topics.add(topic)

    @staticmethod
    def _chunks(values: Any, keys: Any, headers: Any, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        """[a, b) row ranges of [lo, hi) of about MAX_BATCH_BYTES of records each."""
        import numpy as np

        size = np.asarray(pc_lengths(values.slice(lo, hi - lo))) + 16
        if keys is not None:
            size += np.asarray(pc_lengths(keys.slice(lo, hi - lo)))
        if headers is not None:
            size += np.fromiter(map(len, headers[lo:hi]), np.int64, hi - lo)
        piece = np.cumsum(size) // MAX_BATCH_BYTES
        cuts = [lo, *(np.flatnonzero(np.diff(piece)) + 1 + lo).tolist(), hi]
        return zip(cuts, cuts[1:], strict=False)

    def check_sent(self) -> None:
        for b in self.sent:
            if b.error is not None:
                raise b.error


def pc_lengths(arr: Any) -> Any:
    """Byte lengths of a binary/string array, nulls as 0."""
    import pyarrow.compute as pc

    return pc.binary_length(arr).fill_null(0).cast(pa.int64())


def _producer_settings(opts: SinkOptions) -> dict[str, Any]:
    settings: dict[str, Any] = {"linger.ms": 5, "compression.type": opts.compression}
    for name in ("linger.ms", "batch.size", "buffer.memory", "max.block.ms", "delivery.timeout.ms",
                 "request.timeout.ms", "max.in.flight.requests.per.connection", "acks"):
        if name in opts.params:
            settings[name] = opts.params[name]
    return settings


def write_task(opts: SinkOptions, batches: Iterator[Any], job_id: str, batch_id: int) -> WriteResult:
    """Executor side: write one task's rows (see the module docstring for the two guarantees)."""
    from shoal.spark.kafka_io import KafkaIO

    io = KafkaIO.shared(opts.client)
    part, _, _ = _task()
    if not opts.exactly_once:
        writer = _Writer(opts, io.producer(_producer_settings(opts)))
        for b in batches:
            writer.add(b)
        writer.producer.flush()
        writer.check_sent()
        return WriteResult(part, batch_id, writer.count, False)
    tid = f"{opts.transactional_id_prefix}-{job_id}-{part}"
    group = f"{opts.transactional_id_prefix}.{job_id}.{part}"
    producer = io.transactional_producer(tid, {**_producer_settings(opts),
                                               "transaction.timeout.ms": opts.transaction_timeout_ms})
    producer.init_transactions()  # fences earlier attempts of this task, aborting what they left open
    marker = max((om.offset for om in io.committed(group, require_stable=True).values()), default=0)
    if marker > batch_id:
        for _ in batches:  # written before: drain the input, write nothing
            pass
        return WriteResult(part, batch_id, 0, True)
    from shoal.client.structs import OffsetAndMetadata, TopicPartition

    writer = _Writer(opts, producer, producer.begin_transaction)
    try:
        for b in batches:
            writer.add(b)
        if writer.before_first_send is not None:  # no rows: no transaction
            return WriteResult(part, batch_id, 0, False)
        producer.send_offsets_to_transaction(
            {TopicPartition(min(writer.topics), 0): OffsetAndMetadata(batch_id + 1, json.dumps(
                {MARKER_TAG: True, "batch": batch_id, "rows": writer.count}))}, group)
        producer.commit_transaction()
    except BaseException:
        if writer.before_first_send is None:
            try:
                producer.abort_transaction()
            except Exception:  # noqa: BLE001 - the retried task's InitProducerId aborts it anyway
                pass
        raise
    writer.check_sent()
    return WriteResult(part, batch_id, writer.count, False)


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("shoal")``: one job, batch id 0, a job id of its own."""

    def __init__(self, options: dict[str, str], schema: Any) -> None:
        self.opts = sink_options(options)
        check_schema(schema, self.opts)
        self.job_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[Any]) -> WriteResult:
        return write_task(self.opts, iterator, self.job_id, 0)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # a task's open transaction is aborted by its retry, or by transaction.timeout.ms


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("shoal")``: per micro-batch, per task (see the module docstring)."""

    def __init__(self, options: dict[str, str], schema: Any) -> None:
        self.opts = sink_options(options)
        check_schema(schema, self.opts)

    def write(self, iterator: Iterator[Any]) -> WriteResult:
        part, batch_id, query_id = _task()
        if batch_id is None or query_id is None:
            raise RuntimeError("the streaming sink ran outside a streaming query (no batch id)")
        return write_task(self.opts, iterator, query_id, batch_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass
