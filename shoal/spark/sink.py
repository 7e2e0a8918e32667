"""The Kafka sink: batch and streaming writes, at-least-once or exactly-once.

Input columns are Spark's Kafka sink's: ``value`` (binary or string,
required), ``key`` (binary or string), ``topic`` (string; the ``topic`` option
wins), ``partition`` (int; null or absent: Kafka's default partitioner —
murmur2 of the key, or one partition per task for null keys) and ``headers``
(``array<struct<key string, value binary>>``). Rows are grouped per
topic-partition and handed to shoal's producer as whole record batches.

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

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from shoal.spark.options import OptionError, SinkOptions, sink_options

MAX_BATCH_BYTES = 512 * 1024  # well within message.max.bytes (1 MiB by default)


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


class _Rows:
    """Arrow batches turned into record-batch rows per (topic, partition)."""

    def __init__(self, opts: SinkOptions, producer: Any) -> None:
        self.opts = opts
        self.producer = producer
        self.by_tp: dict[tuple[str, int], list[tuple[int, bytes | None, bytes | None, Any]]] = {}
        self.count = 0
        self._sticky: dict[str, int] = {}
        self._partitions: dict[str, int] = {}

    def _num_partitions(self, topic: str) -> int:
        n = self._partitions.get(topic)
        if n is None:
            # Waits for the topic's metadata (creating it where the broker auto-creates), as a producer does.
            n = self._partitions[topic] = len(self.producer.partitions_for(topic))
        return n

    def add(self, batch: Any) -> None:
        from shoal.client.partitioner import partition_for_key

        cols = batch.schema.names
        n = batch.num_rows
        values = [v if not isinstance(v, str) else v.encode() for v in batch.column("value").to_pylist()]
        keys = ([k if not isinstance(k, str) else k.encode() for k in batch.column("key").to_pylist()]
                if "key" in cols else [None] * n)
        topics = [self.opts.topic] * n if self.opts.topic else batch.column("topic").to_pylist()
        parts = batch.column("partition").to_pylist() if "partition" in cols else [None] * n
        headers = (batch.column("headers").to_pylist() if "headers" in cols and self.opts.include_headers
                   else [None] * n)
        ts = int(__import__("time").time() * 1000)
        for topic, part, key, value, hs in zip(topics, parts, keys, values, headers, strict=True):
            if topic is None:
                raise OptionError("Null topic found while writing to Kafka: set the topic option or fill the "
                                  "topic column")
            if part is None:
                count = self._num_partitions(topic)
                if key is not None:
                    part = partition_for_key(key, count)
                else:
                    part = self._sticky.get(topic)
                    if part is None:
                        part = self._sticky[topic] = random.randrange(count)
            row = (ts, key, value, [(h["key"], h["value"]) for h in hs] if hs else None)
            self.by_tp.setdefault((topic, part), []).append(row)
        self.count += n

    def chunks(self) -> Iterator[tuple[str, int, list[Any]]]:
        """(topic, partition, rows) in pieces that fit in one record batch."""
        for (topic, part), rows in sorted(self.by_tp.items()):
            chunk: list[Any] = []
            size = 0
            for row in rows:
                row_size = len(row[1] or b"") + len(row[2] or b"") + 32
                if chunk and size + row_size > MAX_BATCH_BYTES:
                    yield topic, part, chunk
                    chunk, size = [], 0
                chunk.append(row)
                size += row_size
            if chunk:
                yield topic, part, chunk


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
        producer = io.producer(_producer_settings(opts))
        rows = _Rows(opts, producer)
        for b in batches:
            rows.add(b)
        sent = [producer.send_batch(t, p, chunk) for t, p, chunk in rows.chunks()]
        producer.flush()
        for b in sent:
            if b.error is not None:
                raise b.error
        return WriteResult(part, batch_id, rows.count, False)
    tid = f"{opts.transactional_id_prefix}-{job_id}-{part}"
    group = f"{opts.transactional_id_prefix}.{job_id}.{part}"
    producer = _transactional_producer(io, opts, tid)
    producer.init_transactions()  # fences earlier attempts of this task, aborting what they left open
    marker = max((om.offset for om in io.committed(group, require_stable=True).values()), default=0)
    if marker > batch_id:
        for _ in batches:  # written before: drain the input, write nothing
            pass
        return WriteResult(part, batch_id, 0, True)
    rows = _Rows(opts, producer)
    for b in batches:
        rows.add(b)
    if rows.count == 0:
        return WriteResult(part, batch_id, 0, False)
    from shoal.client.structs import OffsetAndMetadata, TopicPartition

    producer.begin_transaction()
    try:
        sent = [producer.send_batch(t, p, chunk) for t, p, chunk in rows.chunks()]
        first_topic = min(t for t, _ in rows.by_tp)
        producer.send_offsets_to_transaction(
            {TopicPartition(first_topic, 0): OffsetAndMetadata(batch_id + 1, json.dumps(
                {"batch": batch_id, "rows": rows.count}))}, group)
        producer.commit_transaction()
    except BaseException:
        try:
            producer.abort_transaction()
        except Exception:  # noqa: BLE001 - the retried task's InitProducerId aborts it anyway
            pass
        raise
    for b in sent:
        if b.error is not None:
            raise b.error
    return WriteResult(part, batch_id, rows.count, False)


def _transactional_producer(io: Any, opts: SinkOptions, tid: str) -> Any:
    """One transactional producer per transactional id and Python worker (kept across batches)."""
    pool = io.__dict__.setdefault("_txn_producers", {})
    p = pool.get(tid)
    if p is None:
        from shoal.client.sync import Producer

        p = pool[tid] = Producer({**io.config, **_producer_settings(opts), "transactional.id": tid,
                                  "transaction.timeout.ms": opts.transaction_timeout_ms})
    return p


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
