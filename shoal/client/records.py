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
from itertools import repeat
from operator import add
from typing import Any, SupportsIndex, overload

from shoal.protocol.compression import NONE, CompressionError, decompress
from shoal.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    HEADER_SIZE,
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
_NO_HEADERS: list[tuple[str, bytes | None]] = []  # only ever copied
# Where the records section starts in a batch's CRC span (the bytes from its attributes on).
SPAN_RECORDS = HEADER_SIZE - ATTRIBUTES_OFFSET


def decode_records(data: bytes, h: BatchHeader, topic: str, partition: int, start: int = 0) -> list[ConsumerRecord]:
    """Every record of one batch's (decompressed) records section, from ``data[start:]``, as
    ConsumerRecords.

    The same fields as ``record_batch.iter_records`` (LogAppendTime batches report the batch's
    max timestamp).  The cost is per record, so the loop (``_columns``) does as little as it
    can: one- and two-byte varints (nearly all of them) are read inline, and it only gathers
    each record's timestamp delta, key and value; the records are then built by ``zip`` and
    ``map``, in C (``_assemble``).
    """
    tsds: list[int] = []
    keys: dict[int, bytes | None] = {}  # record index -> its key, if not null
    values: list[bytes | None] = []
    gaps: dict[int, int] = {}  # record index -> offset delta, where it is not the index
    headers: dict[int, list[tuple[str, bytes | None]]] = {}  # record index -> its headers, if any
    try:
        _columns(data, start, h.records_count, tsds, keys, values, gaps, headers)
    except IndexError:
        raise CorruptRecordError("record data is truncated") from None
    return _assemble(h, topic, partition, tsds, keys, values, gaps, headers)


def _columns(data: bytes, pos: int, n: int, tsds: list[int], keys: dict[int, bytes | None], values: list[bytes | None],
             gaps: dict[int, int], headers: dict[int, list[tuple[str, bytes | None]]]) -> None:
    """Read ``n`` records from ``data[pos:]`` into the columns (see decode_records); raises
    CorruptRecordError, or IndexError where the data ends early."""
    zz = _ZIGZAG
    rv = read_varint
    tsd_add = tsds.append
    value_add = values.append
    end_all = len(data)
    for i in range(n):
        b = data[pos]  # the record's length
        if b < 128:
            length = zz[b]
            pos += 1
        else:
            c = data[pos + 1]
            if c < 128:
                v = (b & 127) | (c << 7)
                length = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                length, pos = rv(data, pos)
        end = pos + length
        if length < 0 or end > end_all:
            raise CorruptRecordError("record length runs past the end of the batch")
        b = data[pos + 1]  # past the record's attributes (unused): the timestamp delta
        if b < 128:
            tsd_add(zz[b])
            pos += 2
        else:
            tsd, pos = rv(data, pos + 1)
            tsd_add(tsd)
        b = data[pos]  # the offset delta
        if b < 128:
            od = zz[b]
            pos += 1
        else:
            c = data[pos + 1]
            if c < 128:
                v = (b & 127) | (c << 7)
                od = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                od, pos = rv(data, pos)
        if od != i:
            gaps[i] = od
        b = data[pos]  # the key's length
        if b == 1:  # -1: null (no entry)
            pos += 1
        elif not b & 0x81:  # one byte, not negative
            k = pos + 1 + (b >> 1)
            keys[i] = data[pos + 1:k]
            pos = k
        else:
            k, pos = rv(data, pos)
            keys[i] = None if k < 0 else data[pos:pos + k]
            pos += max(k, 0)
        b = data[pos]  # the value's length
        if not b & 0x81:  # one byte, not negative
            k = pos + 1 + (b >> 1)
            value_add(data[pos + 1:k])
            pos = k
        elif b & 0x80 and data[pos + 1] < 128 and not b & 1:  # two bytes, not negative
            k = pos + 2 + (((b & 127) | (data[pos + 1] << 7)) >> 1)
            value_add(data[pos + 2:k])
            pos = k
        else:
            k, pos = rv(data, pos)
            value_add(None if k < 0 else data[pos:pos + k])
            pos += max(k, 0)
        if data[pos] == 0:  # no headers: the common case, without a call
            pos += 1
        else:
            headers[i], pos = read_headers(data, pos)
        if pos != end:
            raise CorruptRecordError("record length does not match its contents")


def _assemble(h: BatchHeader, topic: str, partition: int, tsds: list[int], keys: dict[int, bytes | None],
              values: list[bytes | None], gaps: dict[int, int], headers: dict[int, list[tuple[str, bytes | None]]],
              ) -> list[ConsumerRecord]:
    """The ConsumerRecords of a batch from its decoded columns, built by ``zip``/``map`` (in C)."""
    n = h.records_count
    base = h.base_offset
    offsets: Iterable[int]
    if not gaps:
        offsets = range(base, base + n)
    elif n == h.last_offset_delta + 1:
        # The count says the deltas are 0 .. n - 1 (positions are counted so): not a batch to serve.
        raise CorruptRecordError(f"batch at offset {base} has out-of-order offsets")
    else:
        offsets = [base + gaps.get(i, i) for i in range(n)]
    if h.attributes & TIMESTAMP_TYPE_MASK:
        timestamps: Iterable[int] = repeat(h.max_timestamp, n)
        tt = 1
    else:
        timestamps = map(add, repeat(h.base_timestamp, n), tsds)
        tt = 0
    kcol: Iterable[bytes | None] = map(keys.get, range(n)) if keys else repeat(None, n)
    # A fresh empty list for each record without headers (copies of an empty list, made in C).
    hcol: Iterable[list[tuple[str, bytes | None]]] = (
        [headers.get(i) or [] for i in range(n)] if headers else map(list.copy, repeat(_NO_HEADERS, n)))
    return list(map(_new_tuple, repeat(ConsumerRecord, n), zip(
        repeat(topic, n), repeat(partition, n), offsets, timestamps, repeat(tt, n), kcol, values, hcol, strict=False)))


class FetchedBatch:
    """One data batch of a fetch response; its records decoded on first use, then kept.

    ``span`` is the copy of the batch that its CRC was computed over (from the attributes to
    the end; google_crc32c only reads ``bytes``): when given, the records are decoded from it,
    in place, and the response's buffer is not kept.
    """

    __slots__ = ("_data", "_span", "header", "topic", "partition", "contiguous", "_records", "_offsets")

    def __init__(self, data: Any, header: BatchHeader, topic: str, partition: int, span: bytes | None = None) -> None:
        self._data: Any = data if span is None else None
        self._span = span
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
            span = self._span
            codec = h.attributes & COMPRESSION_MASK
            if span is not None and codec == NONE:
                recs = decode_records(span, h, self.topic, self.partition, SPAN_RECORDS)
            else:
                payload: bytes | bytearray
                if span is None:
                    payload = records_payload(self._data, h)
                else:
                    try:
                        payload = decompress(codec, memoryview(span)[SPAN_RECORDS:])
                    except CompressionError as e:
                        raise CorruptRecordError(str(e)) from e
                if not isinstance(payload, bytes):  # a codec may hand back a bytearray: keys and values are bytes
                    payload = bytes(payload)
                recs = decode_records(payload, h, self.topic, self.partition)
            # The buffers stay: another thread (the sync face's application and I/O threads both
            # read batches) may be decoding it too; both get equal records, either list is kept.
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
