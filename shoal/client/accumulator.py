"""Producer batching: per-partition queues of batches, closed by size or linger time.

The accumulator is shared by the application thread (the sync ``Producer.send`` appends
directly) and the I/O loop (the sender drains it): whoever touches its queues holds
``RecordAccumulator.lock``.  A batch is completed (or failed) once, on the I/O loop; its
records learn their fate from the batch, as in Java's ``ProduceRequestResult``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from shoal.clock import monotonic_ms as now_ms
from shoal.protocol.record_encode import EncodedRecords, build_batch, build_batch_encoded, encode_records

from .errors import KafkaTimeoutError
from .structs import RecordMetadata, TopicPartition

log = logging.getLogger(__name__)

# Rough per-record overhead of the v2 record format, for sizing batches before encoding.
RECORD_OVERHEAD = 21
BATCH_OVERHEAD = 61

COMPRESSION_CODES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

DeliveryCallback = Callable[[BaseException | None, RecordMetadata | None], None]


@dataclass(slots=True)
class PendingRecord:
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    future: asyncio.Future | None = None  # the asyncio face's per-record future (None: sync face)
    callback: DeliveryCallback | None = None  # on_delivery(err, metadata), on the I/O thread
    done_callbacks: list[Callable[[Any], None]] | None = None  # RecordFuture.add_done_callback


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
    is_transactional: bool = False
    sticky_topic: tuple[str, int] | None = None  # set when a null-key record opened this batch
    # Rows handed over whole (``send_batch``): (timestamp, key, value, headers), no per-record futures,
    # or a records section the caller encoded itself.
    rows: list[tuple[int, bytes | None, bytes | None, Any]] | EncodedRecords | None = None
    # The outcome, written once on the I/O loop.
    done: bool = False
    base_offset: int = -1
    log_append_time: int = -1
    error: BaseException | None = None
    _event: threading.Event = field(default_factory=threading.Event, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _waiter: asyncio.Future | None = field(default=None, repr=False)

    @property
    def count(self) -> int:
        """Records in the batch (rows handed over whole, or records appended one by one)."""
        if isinstance(self.rows, EncodedRecords):
            return self.rows.count
        return len(self.rows) if self.rows is not None else len(self.records)

    def try_append(self, rec: PendingRecord, batch_size: int) -> bool:
        size = RECORD_OVERHEAD + len(rec.key or b"") + len(rec.value or b"")
        if rec.headers:
            size += sum(len(k) + len(v or b"") + 2 for k, v in rec.headers)
        if self.closed or (self.records and self.size + size > batch_size):
            return False
        self.records.append(rec)
        self.size += size
        return True

    def encode(self, compression: int) -> bytes:
        """The RecordBatch bytes.  The one place producer id/epoch/sequence enter a batch."""
        if self.payload is None:
            header: dict[str, Any] = dict(
                compression=compression, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence, is_transactional=self.is_transactional)
            if isinstance(self.rows, EncodedRecords):
                self.payload = build_batch_encoded(self.rows, **header)
            elif self.rows is not None:
                self.payload = build_batch(self.rows, **header)
            else:
                # The same bytes as build_batch, encoded in one pass (see encode_records).
                self.payload = build_batch_encoded(
                    encode_records([(r.timestamp, r.key, r.value, r.headers) for r in self.records]), **header)
        return self.payload

    def metadata(self, i: int) -> RecordMetadata:
        """Where record ``i`` landed (offset -1 when unknown, as with acks=0)."""
        r = self.records[i]
        ts = self.log_append_time if self.log_append_time >= 0 else r.timestamp
        return RecordMetadata(
            self.tp.topic, self.tp.partition, self.base_offset + i if self.base_offset >= 0 else -1, ts,
            len(r.key) if r.key is not None else -1,
            len(r.value) if r.value is not None else -1,
        )

    def waiter(self) -> asyncio.Future:
        """An asyncio future (of the running loop) resolved when the batch is done."""
        if self._waiter is None:
            self._waiter = asyncio.get_running_loop().create_future()
            if self.done:
                self._waiter.set_result(None)
        return self._waiter

    def wait(self, timeout: float | None) -> bool:
        return self._event.wait(timeout)

    def complete(self, base_offset: int, log_append_time: int) -> None:
        self._finish(base_offset, log_append_time, None)

    def fail(self, exc: BaseException) -> None:
        self._finish(-1, -1, exc)

    def _finish(self, base_offset: int, log_append_time: int, exc: BaseException | None) -> None:
        with self._lock:
            if self.done:
                return
            self.base_offset, self.log_append_time, self.error = base_offset, log_append_time, exc
            self.done = True
        self._event.set()
        for i, r in enumerate(self.records):
            if r.future is None and r.callback is None and not r.done_callbacks:
                continue  # nobody to tell (the sync face's RecordFuture reads the batch)
            md = None if exc is not None else self.metadata(i)
            if r.future is not None and not r.future.done():
                if exc is not None:
                    r.future.set_exception(exc)
                else:
                    r.future.set_result(md)
            if r.callback is not None:
                _safe(r.callback, exc, md)
            if r.done_callbacks:
                for cb in r.done_callbacks:
                    _safe(cb, RecordFuture(self, i))
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def add_done_callback(self, i: int, fn: Callable[[Any], None]) -> bool:
        """Register ``fn`` for record ``i``; False if the batch is already done (call it yourself)."""
        with self._lock:
            if self.done:
                return False
            r = self.records[i]
            if r.done_callbacks is None:
                r.done_callbacks = []
            r.done_callbacks.append(fn)
            return True


def _safe(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - a user callback must not break the sender
        log.exception("producer delivery callback %r failed", fn)


class RecordFuture:
    """The delivery result of one record (the sync ``Producer.send`` returns it).

    Backed by its batch, as Java's ``FutureRecordMetadata``: one event per batch rather
    than a ``concurrent.futures.Future`` per record.  Offers that class's waiting API:
    ``result``, ``exception``, ``done``, ``add_done_callback`` (callbacks run on the
    producer's I/O thread, or at once when already done).
    """

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self._batch.done

    def cancel(self) -> bool:
        return False  # a record handed to the producer cannot be taken back

    def _wait(self, timeout: float | None) -> None:
        if not self._batch.done and not self._batch.wait(timeout):
            raise KafkaTimeoutError(f"record not acknowledged within {timeout}s")

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises its delivery error, or KafkaTimeoutError (a TimeoutError)."""
        self._wait(timeout)
        if self._batch.error is not None:
            raise self._batch.error
        return self._batch.metadata(self._index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._batch.error

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        if not self._batch.add_done_callback(self._index, fn):
            fn(self)

    def __repr__(self) -> str:
        state = "pending" if not self._batch.done else "failed" if self._batch.error else "done"
        return f"<RecordFuture {self._batch.tp} #{self._index} {state}>"


class RecordAccumulator:
    """Holds batches per partition until the sender drains them.

    Not locked itself: callers hold ``lock`` around every call (see the module docstring).
    """

    def __init__(self, batch_size: int, linger_ms: int, buffer_memory: int) -> None:
        self.lock = threading.Lock()
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.buffered_bytes = 0
        self.flushing = 0
        self.space = asyncio.Event()
        self.space.set()

    def append(self, tp: TopicPartition, rec: PendingRecord, now: int | None = None) -> tuple[ProducerBatch, bool]:
        """Add ``rec``; return its batch and whether a new batch had to be opened (at ``now``,
        by default the clock's: read only then)."""
        q = self.batches.get(tp)
        if q is None:
            q = self.batches[tp] = deque()
        if q:
            before = q[-1].size
            if q[-1].try_append(rec, self.batch_size):
                self._grow(q[-1].size - before)
                return q[-1], False
            q[-1].closed = True
        b = ProducerBatch(tp, now_ms() if now is None else now)
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

    def append_batch(self, batch: ProducerBatch) -> None:
        """Queue a whole, closed batch behind what ``tp`` already holds (``send_batch``)."""
        q = self.batches.setdefault(batch.tp, deque())
        if q:
            q[-1].closed = True
        batch.closed = True
        q.append(batch)
        self._grow(batch.size)

    def reenqueue(self, batch: ProducerBatch) -> None:
        """Put a batch back for a retry, ahead of the new ones; batches with sequences stay in
        sequence order (several may fail together and come back in any order)."""
        q = self.batches.setdefault(batch.tp, deque())
        i = 0
        if batch.base_sequence >= 0:
            while i < len(q) and q[i].payload is not None and 0 <= q[i].base_sequence < batch.base_sequence:
                i += 1
        q.insert(i, batch)

    def all_batches(self) -> Iterator[ProducerBatch]:
        for q in self.batches.values():
            yield from q
