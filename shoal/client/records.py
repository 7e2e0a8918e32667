"""Fetched records, decoded lazily: a whole batch at a time, when the application first looks.

``poll`` hands out :class:`RecordList` objects.  One knows its length from the batch headers
alone (in a batch whose record count is ``lastOffsetDelta + 1`` the offsets are ``base ..
base + count - 1``: Kafka's offsets grow strictly within a batch), so polling and counting
cost nothing per record; the records themselves (plain :class:`ConsumerRecord` tuples) are
decoded, a batch at a time and once per batch, on the first access that needs them.  A
RecordList behaves as a ``list`` of ConsumerRecord (iteration, indexing, comparison with
lists, ``+``, the mutating methods) without being one.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, MutableSequence
from typing import Any, SupportsIndex, overload

from shoal.protocol.record_batch import (
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    CorruptRecordError,
    read_headers,
    read_varint,
    records_payload,
)

from .structs import ConsumerRecord

# A one-byte zigzag varint's value by byte: nearly every length and delta in a batch is one byte.
_ZIGZAG = [(b >> 1) ^ -(b & 1) for b in range(128)]
_new_tuple = tuple.__new__


def decode_records(data: bytes, h: BatchHeader, topic: str, partition: int) -> list[ConsumerRecord]:
    """Every record of one batch's (decompressed) records section, as ConsumerRecords.

    The same fields as ``record_batch.iter_records`` (LogAppendTime batches report the batch's
    max timestamp), in one loop with one-byte varints read inline: about half the cost.
    """
    zz = _ZIGZAG
    rv = read_varint
    new = _new_tuple
    cr = ConsumerRecord
    base = h.base_offset
    base_ts = h.base_timestamp
    log_append = h.attributes & TIMESTAMP_TYPE_MASK
    tt = 1 if log_append else 0
    max_ts = h.max_timestamp
    out: list[ConsumerRecord] = []
    append = out.append
    end_all = len(data)
    pos = 0
    try:
        for _ in range(h.records_count):
            b = data[pos]
            if b < 128:
                length = zz[b]
                pos += 1
            else:
                length, pos = rv(data, pos)
            end = pos + length
            if length < 0 or end > end_all:
                raise CorruptRecordError("record length runs past the end of the batch")
            pos += 1  # record attributes: unused
            b = data[pos]
            if b < 128:
                ts_delta = zz[b]
                pos += 1
            else:
                ts_delta, pos = rv(data, pos)
            b = data[pos]
            if b < 128:
                offset_delta = zz[b]
                pos += 1
            else:
                offset_delta, pos = rv(data, pos)
            b = data[pos]
            if b == 1:  # -1: null
                key = None
                pos += 1
            elif b < 128:
                n = pos + 1 + (b >> 1)
                key = data[pos + 1:n]
                pos = n
            else:
                n, pos = rv(data, pos)
                key = None if n < 0 else data[pos:pos + n]
                pos += max(n, 0)
            b = data[pos]
            if b == 1:
                value = None
                pos += 1
            elif b < 128:
                n = pos + 1 + (b >> 1)
                value = data[pos + 1:n]
                pos = n
            else:
                n, pos = rv(data, pos)
                value = None if n < 0 else data[pos:pos + n]
                pos += max(n, 0)
            headers: list[tuple[str, bytes | None]]
            if data[pos] == 0:  # no headers: the common case, without a call
                headers = []
                pos += 1
            else:
                headers, pos = read_headers(data, pos)
            if pos != end:
                raise CorruptRecordError("record length does not match its contents")
            append(new(cr, (topic, partition, base + offset_delta, max_ts if log_append else base_ts + ts_delta,
                            tt, key, value, headers)))
    except IndexError:
        raise CorruptRecordError("record data is truncated") from None
    return out


class FetchedBatch:
    """One data batch of a fetch response; its records decoded on first use, then kept."""

    __slots__ = ("_data", "header", "topic", "partition", "contiguous", "_records", "_offsets")

    def __init__(self, data: Any, header: BatchHeader, topic: str, partition: int) -> None:
        self._data = data
        self.header = header
        self.topic = topic
        self.partition = partition
        # Offsets are base .. base + count - 1 without looking at the records.
        self.contiguous = header.records_count == header.last_offset_delta + 1
        self._records: list[ConsumerRecord] | None = None
        self._offsets: list[int] | None = None

    def decoded(self) -> bool:
        return self._records is not None

    def records(self) -> list[ConsumerRecord]:
        recs = self._records
        if recs is None:
            h = self.header
            payload = records_payload(self._data, h)
            if not isinstance(payload, bytes):  # a codec may hand back a bytearray: keys and values are bytes
                payload = bytes(payload)
            recs = decode_records(payload, h, self.topic, self.partition)
            if self.contiguous and any(r.offset != h.base_offset + i for i, r in enumerate(recs)):
                # Positions were counted on base + index: a batch that breaks that cannot be served.
                raise CorruptRecordError(f"batch at offset {h.base_offset} has out-of-order offsets")
            # _data stays: another thread (the sync face's application and I/O threads both read
            # batches) may be decoding it too; both get equal records, either list is kept.
            self._records = recs
        return recs

    def _offset_list(self) -> list[int]:
        if self._offsets is None:
            self._offsets = [r.offset for r in self.records()]
        return self._offsets

    def count_between(self, lo: int, hi: int) -> int:
        """How many records have ``lo <= offset < hi``."""
        if self.contiguous:
            base = self.header.base_offset
            return max(0, min(hi, base + self.header.records_count) - max(lo, base))
        offs = self._offset_list()
        return bisect.bisect_left(offs, hi) - bisect.bisect_left(offs, lo)

    def offset_after(self, lo: int, k: int) -> int:
        """The offset of the ``k``-th record (from 0) at or after ``lo``."""
        if self.contiguous:
            return max(lo, self.header.base_offset) + k
        offs = self._offset_list()
        return offs[bisect.bisect_left(offs, lo) + k]

    def between(self, lo: int, hi: int) -> list[ConsumerRecord]:
        """The records with ``lo <= offset < hi``."""
        recs = self.records()
        if self.contiguous:
            base = self.header.base_offset
            return recs[max(lo - base, 0):max(hi - base, 0)]
        offs = self._offset_list()
        return recs[bisect.bisect_left(offs, lo):bisect.bisect_left(offs, hi)]


def _as_list(other: Any) -> Any:
    return other._items() if isinstance(other, RecordList) else other


class RecordList(MutableSequence[ConsumerRecord]):
    """The records ``poll`` returned for one partition: list-like, decoded on first access.

    ``len()`` and truth need no decoding.  Any other use decodes (each batch once) into an
    ordinary list of ConsumerRecord, which from then on is what this object delegates to.
    """

    __slots__ = ("_pieces", "_len", "_list")

    def __init__(self, records: Iterable[ConsumerRecord] = ()) -> None:
        self._pieces: list[tuple[FetchedBatch, int, int]] = []
        self._list: list[ConsumerRecord] | None = list(records)
        self._len = 0

    @classmethod
    def _lazy(cls) -> RecordList:
        rl = cls.__new__(cls)
        rl._pieces = []
        rl._list = None
        rl._len = 0
        return rl

    def _add(self, batch: FetchedBatch, lo: int, hi: int, n: int) -> None:
        """Append the ``n`` records of ``batch`` with ``lo <= offset < hi`` (not decoded yet)."""
        if self._list is not None:
            self._list += batch.between(lo, hi)
        else:
            self._pieces.append((batch, lo, hi))
            self._len += n

    def _merge(self, other: RecordList) -> None:
        """Append ``other``'s records (still undecoded if both are)."""
        if self._list is None and other._list is None:
            self._pieces += other._pieces
            self._len += other._len
        else:
            self._items().extend(other._items())

    def _items(self) -> list[ConsumerRecord]:
        lst = self._list
        if lst is None:
            lst = []
            for batch, lo, hi in self._pieces:
                lst += batch.between(lo, hi)
            self._list = lst
            self._pieces = []
        return lst

    # -- read ------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._len if self._list is None else len(self._list)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return iter(self._items())

    def __reversed__(self) -> Iterator[ConsumerRecord]:
        return reversed(self._items())

    def __contains__(self, item: object) -> bool:
        return item in self._items()

    @overload
    def __getitem__(self, i: SupportsIndex) -> ConsumerRecord: ...
    @overload
    def __getitem__(self, i: slice) -> list[ConsumerRecord]: ...
    def __getitem__(self, i: SupportsIndex | slice) -> ConsumerRecord | list[ConsumerRecord]:
        return self._items()[i]

    def index(self, value: Any, start: SupportsIndex = 0, stop: SupportsIndex | None = None) -> int:
        return self._items().index(value, start, len(self) if stop is None else stop)

    def count(self, value: Any) -> int:
        return self._items().count(value)

    def copy(self) -> list[ConsumerRecord]:
        return list(self._items())

    def __repr__(self) -> str:
        return repr(self._items())

    def __eq__(self, other: object) -> bool:
        return self._items() == _as_list(other)

    def __ne__(self, other: object) -> bool:
        return self._items() != _as_list(other)

    def __lt__(self, other: Any) -> bool:
        return self._items() < _as_list(other)

    def __le__(self, other: Any) -> bool:
        return self._items() <= _as_list(other)

    def __gt__(self, other: Any) -> bool:
        return self._items() > _as_list(other)

    def __ge__(self, other: Any) -> bool:
        return self._items() >= _as_list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __add__(self, other: Iterable[ConsumerRecord]) -> list[ConsumerRecord]:
        return self._items() + list(other)

    def __radd__(self, other: Iterable[ConsumerRecord]) -> list[ConsumerRecord]:
        return list(other) + self._items()

    def __mul__(self, n: SupportsIndex) -> list[ConsumerRecord]:
        return self._items() * n

    __rmul__ = __mul__

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (self._items(),))  # pickles (and copies) as the list it stands for

    # -- write (as a list's) -----------------------------------------------------------

    @overload
    def __setitem__(self, i: SupportsIndex, value: ConsumerRecord) -> None: ...
    @overload
    def __setitem__(self, i: slice, value: Iterable[ConsumerRecord]) -> None: ...
    def __setitem__(self, i: Any, value: Any) -> None:
        self._items()[i] = value

    def __delitem__(self, i: SupportsIndex | slice) -> None:
        del self._items()[i]

    def insert(self, index: SupportsIndex, value: ConsumerRecord) -> None:
        self._items().insert(index, value)

    def append(self, value: ConsumerRecord) -> None:
        self._items().append(value)

    def extend(self, values: Iterable[ConsumerRecord]) -> None:
        self._items().extend(values)

    def __iadd__(self, values: Iterable[ConsumerRecord]) -> RecordList:  # type: ignore[override,misc]
        self._items().extend(values)
        return self

    def __imul__(self, n: SupportsIndex) -> RecordList:
        self._items().__imul__(n)
        return self

    def pop(self, index: SupportsIndex = -1) -> ConsumerRecord:
        return self._items().pop(index)

    def remove(self, value: ConsumerRecord) -> None:
        self._items().remove(value)

    def clear(self) -> None:
        self._items().clear()

    def reverse(self) -> None:
        self._items().reverse()

    def sort(self, *, key: Any = None, reverse: bool = False) -> None:
        self._items().sort(key=key, reverse=reverse)
