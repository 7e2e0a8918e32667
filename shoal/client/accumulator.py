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
from typing import TYPE_CHECKING, Any

from shoal.clock import monotonic_ms as now_ms
from shoal.protocol.record_batch import read_varint
from shoal.protocol.record_encode import (
    SMALL_VARINTS,
    EncodedRecords,
    build_batch,
    build_batch_encoded,
    encode_headers,
    varint,
)

from .errors import KafkaTimeoutError
from .structs import RecordMetadata, TopicPartition

if TYPE_CHECKING:
    from .record_future import AIORecordFuture

log = logging.getLogger(__name__)

# Rough per-record overhead of the v2 record format, for sizing batches before encoding.
RECORD_OVERHEAD = 21
BATCH_OVERHEAD = 61

# A record's encoded fields in ProducerBatch.parts: length, attributes, timestamp delta, offset
# delta, key length, key, value length, value, headers.
PARTS_PER_RECORD = 9
_SMALL_LIMIT = len(SMALL_VARINTS)

COMPRESSION_CODES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

DeliveryCallback = Callable[[BaseException | None, RecordMetadata | None], None]


# A record whose delivery is reported to an on_delivery callback: (index in the batch, timestamp,
# key size, value size, callback).  Records without one cost nothing when the batch completes:
# their futures (RecordFuture, AIORecordFuture) read the batch when asked.
Notify = tuple[int, int, int, int, DeliveryCallback]

_new_tuple = tuple.__new__


@dataclass
class ProducerBatch:
    """Records for one partition that go out in one RecordBatch.

    Records are encoded into ``parts`` (the pieces of the batch's records section) as they are
    appended, so a record costs no object of its own: what a delivery report needs (offset,
    timestamp, sizes) is read back from its pieces when asked for, or kept in ``notify`` for
    records with an on_delivery callback.  The batch's outcome (``complete``/``fail``, once)
    settles them all, as Java's ``ProduceRequestResult``.
    """

    tp: TopicPartition
    created_ms: int
    size: int = BATCH_OVERHEAD  # encoded size (what batch.size and buffer.memory count)
    attempts: int = 0
    retry_after_ms: int = 0
    closed: bool = False
    # The records section so far, PARTS_PER_RECORD byte strings a record, and the timestamps
    # the batch header needs (the first record's is the base of the others' deltas).
    parts: list[bytes] = field(default_factory=list, repr=False)
    appended: int = 0  # records in parts
    base_timestamp: int = -1
    max_timestamp: int = -1
    notify: list[Notify] = field(default_factory=list, repr=False)
    done_callbacks: dict[int, list[Callable[[Any], None]]] | None = field(default=None, repr=False)
    record_waiters: dict[int, AIORecordFuture] | None = field(default=None, repr=False)
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
        if self.rows is None:
            return self.appended
        return self.rows.count if isinstance(self.rows, EncodedRecords) else len(self.rows)

    def append(self, ts: int, key: bytes | None, value: bytes | None,
               headers: list[tuple[str, bytes | None]] | None, batch_size: int,
               callback: DeliveryCallback | None = None) -> int:
        """Encode one record onto the batch (``callback`` to be told its fate); its encoded size,
        or 0 when it does not fit (a first record always does).  The bytes are those
        ``encode_records`` writes."""
        # The hot path of send: small varints are looked up inline (SMALL_VARINTS) rather than
        # by a call each, a measurable share of a record's cost.
        small, limit = SMALL_VARINTS, _SMALL_LIMIT
        i = self.appended
        if i:
            d = ts - self.base_timestamp
            ts_delta = small[d] if 0 <= d < limit else varint(d)
            if ts > self.max_timestamp:
                self.max_timestamp = ts
        else:
            self.base_timestamp = self.max_timestamp = ts
            ts_delta = b"\x00"
        offset_delta = small[i] if i < limit else varint(i)
        hdrs = encode_headers(headers) if headers else b"\x00"
        if key is None:
            key_len, key, key_size = b"\x01", b"", -1
        else:
            key_size = len(key)
            key_len = small[key_size] if key_size < limit else varint(key_size)
        if value is None:
            value_len, value, value_size = b"\x01", b"", -1
        else:
            value_size = len(value)
            value_len = small[value_size] if value_size < limit else varint(value_size)
        body = 1 + len(ts_delta) + len(offset_delta) + len(key_len) + len(key) + len(value_len) + len(value) + len(hdrs)
        length = small[body] if body < limit else varint(body)
        n = len(length) + body
        if i and (self.closed or self.size + n > batch_size):
            return 0
        # The record's fields, not copied: they are joined once, when the batch is encoded.
        self.parts += (length, b"\x00", ts_delta, offset_delta, key_len, key, value_len, value, hdrs)
        self.appended = i + 1
        self.size += n
        if callback is not None:
            self.notify.append((i, ts, key_size, value_size, callback))
        return n

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
                records = EncodedRecords(b"".join(self.parts), self.count, self.base_timestamp, self.max_timestamp)
                self.payload = build_batch_encoded(records, **header)
        return self.payload

    def record_info(self, i: int) -> tuple[int, int, int]:
        """Record ``i``'s timestamp, key size and value size (-1: null), from its encoded fields."""
        _length, _attributes, ts_delta, _offset, key_len, key, value_len, value, _headers = \
            self.parts[i * PARTS_PER_RECORD:(i + 1) * PARTS_PER_RECORD]
        return (self.base_timestamp + read_varint(ts_delta, 0)[0], -1 if key_len == b"\x01" else len(key),
                -1 if value_len == b"\x01" else len(value))

    def metadata(self, i: int) -> RecordMetadata:
        """Where record ``i`` landed (offset -1 when unknown, as with acks=0)."""
        ts, key_size, value_size = self.record_info(i)
        return self._metadata(i, ts, key_size, value_size)

    def _metadata(self, i: int, ts: int, key_size: int, value_size: int) -> RecordMetadata:
        base = self.base_offset
        if self.log_append_time >= 0:
            ts = self.log_append_time
        # tuple.__new__: RecordMetadata's own __new__ is a Python function, a call per record.
        return _new_tuple(RecordMetadata, (self.tp.topic, self.tp.partition, base + i if base >= 0 else -1, ts,
                                           key_size, value_size))

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
        if self.done_callbacks:
            self._tell_in_order(exc)
        elif exc is not None:
            for _i, _ts, _ks, _vs, cb in self.notify:
                _safe(cb, exc, None)
        else:
            topic, partition = self.tp
            base = base_offset if base_offset >= 0 else -1
            step = 1 if base_offset >= 0 else 0  # acks=0: every offset is -1
            lat = log_append_time
            for i, ts, ks, vs, cb in self.notify:
                # self._metadata's tuple, built inline: this loop runs once per record.
                _safe(cb, None, _new_tuple(RecordMetadata, (topic, partition, base + i * step,
                                                            ts if lat < 0 else lat, ks, vs)))
        if self.record_waiters:
            for i in sorted(self.record_waiters):
                self.record_waiters[i].batch_done()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _tell_in_order(self, exc: BaseException | None) -> None:
        """_finish when RecordFuture callbacks are registered too: record by record, its
        on_delivery, then its done callbacks."""
        assert self.done_callbacks is not None
        notify = {n[0]: n for n in self.notify}
        for i in sorted(notify.keys() | self.done_callbacks.keys()):
            n = notify.get(i)
            if n is not None:
                _i, ts, ks, vs, cb = n
                _safe(cb, exc, None if exc is not None else self._metadata(i, ts, ks, vs))
            for fn in self.done_callbacks.get(i, ()):
                _safe(fn, RecordFuture(self, i))

    def add_record_waiter(self, i: int, future: AIORecordFuture) -> None:
        """``future`` (record ``i``'s, on the loop that completes the batch) has callbacks to run."""
        if self.record_waiters is None:
            self.record_waiters = {}
        self.record_waiters[i] = future

    def add_done_callback(self, i: int, fn: Callable[[Any], None]) -> bool:
        """Register ``fn`` for record ``i``; False if the batch is already done (call it yourself)."""
        with self._lock:
            if self.done:
                return False
            if self.done_callbacks is None:
                self.done_callbacks = {}
            self.done_callbacks.setdefault(i, []).append(fn)
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

    def append(self, tp: TopicPartition, ts: int, key: bytes | None, value: bytes | None,
               headers: list[tuple[str, bytes | None]] | None = None, callback: DeliveryCallback | None = None,
               *, now: int | None = None) -> tuple[ProducerBatch, bool]:
        """Encode a record onto ``tp``'s open batch (see ``ProducerBatch.append``); return the
        batch and whether it had to be opened (at ``now``, by default the clock's: read only
        then).  The record is the batch's last (``batch.count - 1``)."""
        q = self.batches.get(tp)
        if q is None:
            q = self.batches[tp] = deque()
        elif q:
            b = q[-1]
            n = b.append(ts, key, value, headers, self.batch_size, callback)
            if n:
                self.buffered_bytes += n
                if self.buffered_bytes >= self.buffer_memory:
                    self.space.clear()
                return b, False
            b.closed = True
        b = ProducerBatch(tp, now_ms() if now is None else now)
        b.append(ts, key, value, headers, self.batch_size, callback)
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
