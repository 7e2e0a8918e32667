"""Producer batching: per-partition queues of batches, closed by size or linger time."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from shoal.protocol.record_batch import build_batch

from .structs import RecordMetadata, TopicPartition

# Rough per-record overhead of the v2 record format, for sizing batches before encoding.
RECORD_OVERHEAD = 21
BATCH_OVERHEAD = 61

COMPRESSION_CODES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass
class PendingRecord:
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    future: asyncio.Future
    callback: Any = None


@dataclass
class ProducerBatch:
    """Records for one partition that go out in one RecordBatch."""

    tp: TopicPartition
    created_ms: int
    records: list[PendingRecord] = field(default_factory=list)
    size: int = BATCH_OVERHEAD
    attempts: int = 0
    retry_after_ms: int = 0
    closed: bool = False
    # Set once, at the first drain, so that retries resend identical bytes (same sequence).
    payload: bytes | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    sticky_topic: tuple[str, int] | None = None  # set when a null-key record opened this batch

    def try_append(self, rec: PendingRecord, batch_size: int) -> bool:
        size = RECORD_OVERHEAD + len(rec.key or b"") + len(rec.value or b"")
        size += sum(len(k) + len(v or b"") + 2 for k, v in rec.headers)
        if self.closed or (self.records and self.size + size > batch_size):
            return False
        self.records.append(rec)
        self.size += size
        return True

    def encode(self, compression: int) -> bytes:
        """The RecordBatch bytes.  The one place producer id/epoch/sequence enter a batch."""
        if self.payload is None:
            self.payload = build_batch(
                [(r.timestamp, r.key, r.value, r.headers) for r in self.records],
                compression=compression,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
            )
        return self.payload

    def complete(self, base_offset: int, log_append_time: int) -> None:
        for i, r in enumerate(self.records):
            ts = log_append_time if log_append_time >= 0 else r.timestamp
            offset = base_offset + i if base_offset >= 0 else -1
            md = RecordMetadata(
                self.tp.topic, self.tp.partition, offset, ts,
                len(r.key) if r.key is not None else -1,
                len(r.value) if r.value is not None else -1,
            )
            if not r.future.done():
                r.future.set_result(md)

    def fail(self, exc: BaseException) -> None:
        for r in self.records:
            if not r.future.done():
                r.future.set_exception(exc)


class RecordAccumulator:
    """Holds batches per partition until the sender drains them."""

    def __init__(self, batch_size: int, linger_ms: int, buffer_memory: int) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.buffered_bytes = 0
        self.flushing = 0
        self.space = asyncio.Event()
        self.space.set()

    def append(self, tp: TopicPartition, rec: PendingRecord, now: int) -> tuple[ProducerBatch, bool]:
        """Add ``rec``; return its batch and whether a new batch had to be opened."""
        q = self.batches.setdefault(tp, deque())
        if q:
            before = q[-1].size
            if q[-1].try_append(rec, self.batch_size):
                self._grow(q[-1].size - before)
                return q[-1], False
        if q:
            q[-1].closed = True
        b = ProducerBatch(tp, now)
        b.try_append(rec, self.batch_size)
        q.append(b)
        self._grow(b.size)
        return b, True

    def _grow(self, n: int) -> None:
        self.buffered_bytes += n
        if self.buffered_bytes >= self.buffer_memory:
            self.space.clear()

    def release(self, batch: ProducerBatch) -> None:
        self.buffered_bytes = max(0, self.buffered_bytes - batch.size)
        if self.buffered_bytes < self.buffer_memory:
            self.space.set()

    def ready(self, now: int, closing: bool) -> Iterator[TopicPartition]:
        """Partitions whose head batch may be sent now."""
        for tp, q in self.batches.items():
            if not q:
                continue
            b = q[0]
            if b.retry_after_ms > now:
                continue
            if b.closed or len(q) > 1 or b.size >= self.batch_size or closing or self.flushing:
                yield tp
            elif now - b.created_ms >= self.linger_ms:
                yield tp

    def next_deadline(self, now: int) -> int | None:
        """When the earliest lingering batch becomes ready (None: nothing buffered)."""
        best: int | None = None
        for q in self.batches.values():
            if q:
                b = q[0]
                t = max(b.created_ms + self.linger_ms, b.retry_after_ms)
                best = t if best is None else min(best, t)
        return best

    def pop(self, tp: TopicPartition) -> ProducerBatch:
        b = self.batches[tp].popleft()
        b.closed = True
        return b

    def reenqueue(self, batch: ProducerBatch) -> None:
        self.batches.setdefault(batch.tp, deque()).appendleft(batch)

    def has_unsent(self) -> bool:
        return any(self.batches.values())

    def all_batches(self) -> Iterator[ProducerBatch]:
        for q in self.batches.values():
            yield from q
