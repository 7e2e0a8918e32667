"""The asyncio producer core: serializing, partitioning and batching records, idempotence, transactions.

Idempotence (on by default, as in Kafka 3+) stamps every batch with the
producer id, epoch and a per-partition sequence, so the broker drops retried
duplicates and refuses gaps. A transactional producer (``transactional.id``)
adds the transaction protocol on top (see ``transactions.py``): the sender
adds each partition to the transaction before its first batch goes out. The
sender loop, Produce requests and retries are in ``sender.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from shoal.protocol.errors import is_retriable
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.record_encode import EncodedRecords
from shoal.waits import within

from .accumulator import (
    BATCH_OVERHEAD,
    COMPRESSION_CODES,
    RECORD_OVERHEAD,
    DeliveryCallback,
    ProducerBatch,
    RecordAccumulator,
)
from .cluster import AsyncCore, KafkaClient, cancel_and_wait, now_ms
from .config import PRODUCER_DEFAULTS, make_config
from .errors import (
    ClosedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    TransactionAbortedError,
    error_for,
)
from .partitioner import DefaultPartitioner
from .protocol import request_class
from .record_future import AIORecordFuture
from .sender import ProducerSender
from .structs import ConsumerGroupMetadata, OffsetAndMetadata, RecordMetadata, TopicPartition
from .transactions import TransactionManager, TxnState, as_group_metadata

log = logging.getLogger(__name__)


def _to_bytes(v: Any, serializer: Callable[[Any], bytes] | None) -> bytes | None:
    if serializer is not None:
        v = serializer(v)
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, bytearray | memoryview):
        return bytes(v)
    raise TypeError(f"cannot send {type(v).__name__} without a serializer")


class AIOProducer(ProducerSender, AsyncCore):
    """Asyncio Kafka producer.

    ``await producer.send(...)`` enqueues the record and returns a future resolved with
    its ``RecordMetadata`` once the broker acknowledges it (``send_and_wait`` awaits both).
    """

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = make_config(PRODUCER_DEFAULTS, config, **kwargs)
        cfg = self.config
        acks = str(cfg["acks"]).lower()
        self.acks = -1 if acks in ("all", "-1") else int(acks)
        ctype = (cfg["compression.type"] or "none").lower()
        if ctype not in COMPRESSION_CODES:
            raise ValueError(f"unknown compression.type {ctype!r}")
        self.compression = COMPRESSION_CODES[ctype]
        self.partitioner = cfg["partitioner"] or DefaultPartitioner()
        self._key_serializer: Callable[[Any], bytes] | None = cfg["key.serializer"]
        self._value_serializer: Callable[[Any], bytes] | None = cfg["value.serializer"]
        self.client = KafkaClient(cfg)
        self.accumulator: RecordAccumulator | None = None
        self.transactional_id: str | None = cfg["transactional.id"]
        self.idempotent = self._resolve_idempotence()
        self.txn = (TransactionManager(self.client, cfg, self.transactional_id, self._wake)
                    if self.transactional_id else None)
        # Idempotence: the producer id/epoch (the transaction manager's when transactional)
        # and the next sequence per partition, for that id and epoch.
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequences: dict[TopicPartition, int] = {}
        self._acked: dict[TopicPartition, int] = {}  # last sequence the broker confirmed, per partition
        self._pid_reset_needed = False
        self._sender: asyncio.Task | None = None
        self._wakeup: asyncio.Event | None = None
        self._in_flight: dict[int, int] = {}
        self._in_flight_tasks: set[asyncio.Task] = set()
        self._muted: set[TopicPartition] = set()  # max.in.flight == 1 keeps order per partition
        self._closed = False
        self._node_write_locks: dict[int, asyncio.Lock] = {}
        self._started = False
        self._tps: dict[str, dict[int, TopicPartition]] = {}

    def _resolve_idempotence(self) -> bool:
        cfg = self.config
        conflicts = []
        if self.acks != -1:
            conflicts.append("acks=all")
        if int(cfg["retries"]) == 0:
            conflicts.append("retries > 0")
        if int(cfg["max.in.flight.requests.per.connection"]) > 5:
            conflicts.append("max.in.flight.requests.per.connection <= 5")
        wanted = cfg["enable.idempotence"]
        if wanted is None:
            if not self.transactional_id:
                return not conflicts  # Kafka: silently off when the other settings rule it out
            wanted = True
        if not wanted and self.transactional_id:
            raise ValueError("transactional.id requires enable.idempotence=true")
        if wanted and conflicts:
            raise ValueError(f"enable.idempotence requires {', '.join(conflicts)}")
        return bool(wanted)

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    async def start(self) -> None:
        """Connect to the cluster and start the sender (and get a producer id when idempotent)."""
        if self._started:
            return
        cfg = self.config
        self.accumulator = RecordAccumulator(cfg["batch.size"], cfg["linger.ms"], cfg["buffer.memory"])
        self._wakeup = asyncio.Event()
        await self.client.refresh_metadata([])
        if self.idempotent and self.txn is None:
            await self._init_producer_id()
        self._sender = asyncio.get_running_loop().create_task(self._run_sender())
        self._started = True

    async def _init_producer_id(self) -> None:
        """An idempotent (not transactional) producer's id: a fresh one from any broker."""
        cls = request_class(ApiKey.INIT_PRODUCER_ID)
        deadline = now_ms() + int(self.config["max.block.ms"])
        while True:
            try:
                conn = await self.client.any_conn()
                resp = await conn.send(cls(transactional_id=None,
                                           transaction_timeout_ms=int(self.config["transaction.timeout.ms"]),
                                           producer_id=-1, producer_epoch=-1))
                if resp.error_code == 0:
                    self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
                    self._reset_sequences()
                    return
                if not is_retriable(resp.error_code):
                    raise error_for(resp.error_code, "InitProducerId")
            except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
                log.debug("InitProducerId failed: %r", e)
            if now_ms() >= deadline:
                raise KafkaTimeoutError("no producer id within max.block.ms")
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    def _reset_sequences(self) -> None:
        """A new producer id or epoch: every partition's sequence starts again at 0."""
        self.sequences.clear()
        self._acked.clear()

    def _ids(self) -> tuple[int, int]:
        if self.txn is not None:
            return self.txn.producer_id, self.txn.producer_epoch
        return self.producer_id, self.producer_epoch

    # -- transactions ----------------------------------------------------------------------

    def _require_txn(self) -> TransactionManager:
        if self.txn is None:
            raise IllegalStateError("transactional.id is not set: this producer is not transactional")
        return self.txn

    async def init_transactions(self) -> None:
        """Register the transactional.id: fences older producers with it and finishes their transactions.

        May be called again between transactions (or after being fenced) to take the id back as a
        new producer would: a later epoch, fencing whoever holds it now.
        """
        txn = self._require_txn()
        await self.start()
        if txn.state in (TxnState.READY, TxnState.FATAL_ERROR):
            txn.reset()
        await txn.init()
        self._reset_sequences()

    def begin_transaction(self) -> None:
        self._require_txn().begin()

    async def send_offsets_to_transaction(
        self, offsets: dict[TopicPartition, OffsetAndMetadata | int],
        group: str | ConsumerGroupMetadata,
    ) -> None:
        """Commit a consumer's offsets as part of the transaction (consume-transform-produce)."""
        norm = {TopicPartition(tp[0], tp[1]): om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(om)
                for tp, om in offsets.items()}
        await self._require_txn().send_offsets(norm, as_group_metadata(group))

    async def commit_transaction(self) -> None:
        """Send what is buffered, then commit; raises the error if the transaction must be aborted."""
        txn = self._require_txn()
        txn.begin_commit()
        with contextlib.suppress(KafkaTimeoutError):
            await self.flush()
        if txn.has_error:
            assert txn.error is not None
            raise txn.error
        await txn.end(commit=True)

    async def abort_transaction(self) -> None:
        """Drop what is not sent yet, wait for what is in flight, then abort."""
        txn = self._require_txn()
        txn.begin_abort()
        if self.accumulator is not None:
            self._fail_queued(TransactionAbortedError("the transaction was aborted before the record was sent"))
        waiters = [b.waiter() for b in self._in_flight_batches if not b.done]
        if waiters:
            await asyncio.gather(*waiters, return_exceptions=True)
        await txn.end(commit=False)
        if txn.needs_epoch_bump:
            await txn.init(bump=True)
            self._reset_sequences()

    async def partitions_for(self, topic: str) -> list[int]:
        return await self.client.wait_for_topic(topic, self.config["max.block.ms"])

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: list[tuple[str, bytes | None]] | dict[str, bytes | None] | None = None,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> AIORecordFuture:
        """Enqueue one record; returns the future of its ``RecordMetadata`` (an asyncio future
        read from the record's batch: see ``record_future``).

        Nothing is awaited while the topic's metadata is known and buffer.memory has room (the
        common case): the record is encoded into its partition's open batch at once.
        """
        if self._closed or self.txn is not None or not self._started:
            await self._ready_to_send()
        ts, kb, vb, hdrs = self.serialize(key, value, headers, timestamp_ms)
        queued = self.enqueue(topic, partition, ts, kb, vb, hdrs, on_delivery)
        while queued is None:
            await self._wait_to_append(topic, partition)
            queued = self.enqueue(topic, partition, ts, kb, vb, hdrs, on_delivery)
        batch, index, wake, full = queued
        if wake:
            self._wakeup.set()  # type: ignore[union-attr]  # set by start()
            if full:
                # A full batch waits for the sender: let it run now, or a caller that sends in a
                # loop would hold the loop (and the sender) until buffer.memory ran out.
                await asyncio.sleep(0)
        return AIORecordFuture(batch, index, asyncio.get_running_loop())

    # The steps of send, shared with the sync face (which runs them on the caller's thread).

    def serialize(self, key: Any, value: Any, headers: Any, timestamp_ms: int | None
                  ) -> tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]:
        """One record's timestamp, key, value and headers as they are encoded (thread-safe:
        touches no shared state)."""
        kser, vser = self._key_serializer, self._value_serializer
        # bytes (or None) without a serializer, the common case, go through untouched.
        kb = key if kser is None and (key is None or type(key) is bytes) else _to_bytes(key, kser)
        vb = value if vser is None and (value is None or type(value) is bytes) else _to_bytes(value, vser)
        hdrs = None
        if headers:
            hdrs = [(k, _to_bytes(v, None)) for k, v in (headers.items() if isinstance(headers, dict) else headers)]
        return timestamp_ms if timestamp_ms is not None else time.time_ns() // 1_000_000, kb, vb, hdrs

    def enqueue(self, topic: str, partition: int | None, ts: int, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes | None]] | None, on_delivery: DeliveryCallback | None
                ) -> tuple[ProducerBatch, int, bool, bool] | None:
        """Partition a serialized record and encode it onto its batch, without blocking (any
        thread): (batch, index in it, whether to wake the sender, whether a full batch waits for
        it). None when it must wait first for the topic's metadata or for buffer space
        (``_wait_to_append``), then come again."""
        acc = self.accumulator
        assert acc is not None
        info = self.client.cluster.topics.get(topic)
        # buffered_bytes against buffer_memory is what acc.space stands for, read without a call.
        if info is None or info.error_code or not info.leaders or acc.buffered_bytes >= acc.buffer_memory:
            return None
        n = len(info.leaders)  # what partitions_for would say, without sorting them each send
        if partition is not None and not 0 <= partition < n:
            self.check_partition(topic, partition, n)
        with acc.lock:
            if partition is None:
                partition = self.partitioner.partition(topic, key, n)
            by_partition = self._tps.get(topic)
            if by_partition is None:
                by_partition = self._tps[topic] = {}
            tp = by_partition.get(partition)
            if tp is None:  # one TopicPartition per partition, not one per record
                tp = by_partition[partition] = TopicPartition(topic, partition)
            batch, new = acc.append(tp, ts, key, value, headers, on_delivery)
            i = batch.appended - 1
            if new and key is None and hasattr(self.partitioner, "on_new_batch"):
                # KIP-480: once a null-key batch is opened, later null-key records stick to another
                # partition when this one closes (by size or linger).
                batch.sticky_topic = (topic, n)
            full = new and len(acc.batches[tp]) > 1  # the record did not fit in the open batch
            return batch, i, new or batch.size >= acc.batch_size or acc.linger_ms == 0, full

    async def _wait_to_append(self, topic: str, partition: int | None) -> int:
        """Wait for the topic's metadata and for buffer space (max.block.ms each); its partition count."""
        info = self.client.cluster.topics.get(topic)
        if info is not None and not info.error_code and info.leaders:
            n = len(info.leaders)
        else:
            n = len(await self.partitions_for(topic))
        self.check_partition(topic, partition, n)
        assert self.accumulator is not None
        if not self.accumulator.space.is_set():
            await self.wait_for_space()
        return n

    @staticmethod
    def check_partition(topic: str, partition: int | None, n: int) -> None:
        if partition is not None and not 0 <= partition < n:
            raise ValueError(f"partition {partition} out of range for {topic} ({n} partitions)")

    async def wait_for_space(self) -> None:
        """Block (up to max.block.ms) while buffer.memory is used up."""
        assert self.accumulator is not None
        try:
            await within(self.accumulator.space.wait(), self.config["max.block.ms"] / 1000)
        except TimeoutError:
            raise KafkaTimeoutError("buffer.memory exhausted for max.block.ms") from None

    async def send_batch(self, topic: str, partition: int,
                         rows: list[tuple[int, bytes | None, bytes | None, Any]] | EncodedRecords
                         ) -> ProducerBatch:
        """Queue ``rows`` — (timestamp ms, key bytes, value bytes, headers), or a records section
        already encoded — as one record batch of ``topic``/``partition``, in order behind what is
        already queued there.

        The bulk path for callers that already hold bytes (a Spark sink): no
        serializer, partitioner or per-record future. Keep a batch within the
        topic's max.message.bytes. ``flush()`` waits for it; so does
        ``await batch.waiter()`` (then ``batch.error`` / ``batch.base_offset``).
        """
        await self._ready_to_send()
        await self._wait_to_append(topic, partition)
        if isinstance(rows, EncodedRecords):
            size = len(rows.data) + BATCH_OVERHEAD
        else:
            size = sum(len(k or b"") + len(v or b"") for _, k, v, _ in rows) + RECORD_OVERHEAD * len(rows)
            size += BATCH_OVERHEAD
        b = ProducerBatch(TopicPartition(topic, partition), now_ms(), rows=rows, size=size)
        with self.accumulator.lock:
            self.accumulator.append_batch(b)
        self._wakeup.set()
        return b

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> RecordMetadata:
        fut = await self.send(topic, value, key, **kw)
        return await fut

    async def flush(self, timeout_ms: int | None = None) -> None:
        """Send everything buffered now and wait until every record is acknowledged."""
        if not self._started:
            return
        assert self.accumulator is not None and self._wakeup is not None
        acc = self.accumulator
        with acc.lock:
            batches = list(acc.all_batches())
            acc.flushing += 1
        batches += self._in_flight_batches
        self._wakeup.set()
        try:
            waiters = [b.waiter() for b in batches if not b.done]
            if waiters:
                await within(asyncio.gather(*waiters, return_exceptions=True),
                             None if timeout_ms is None else timeout_ms / 1000)
        except TimeoutError:
            raise KafkaTimeoutError("flush timed out") from None
        finally:
            with acc.lock:
                acc.flushing -= 1

    @property
    def _in_flight_batches(self) -> list[ProducerBatch]:
        return [b for t in self._in_flight_tasks for b in getattr(t, "batches", [])]

    def check_can_send(self) -> None:
        """Raise unless the producer is open and its transaction state allows sending."""
        if self._closed:
            raise ClosedError("producer is closed")
        if self.txn is not None:
            self.txn.check_can_send()

    async def _ready_to_send(self) -> None:
        """What every send checks first: open, allowed by the transaction state, started."""
        self.check_can_send()
        await self.start()
        assert self.accumulator is not None and self._wakeup is not None

    async def close(self, timeout_ms: int | None = None) -> None:
        """Flush and stop (``timeout_ms=0``: fail what is still buffered)."""
        if self._closed:
            return
        if self._started and timeout_ms != 0:
            with contextlib.suppress(KafkaTimeoutError):
                await self.flush(timeout_ms)
        self._closed = True
        await cancel_and_wait(self._sender)
        for t in list(self._in_flight_tasks):
            t.cancel()
        if self.accumulator is not None:
            self._fail_queued(ClosedError("producer closed before the record was sent"))
        await self.client.close()
