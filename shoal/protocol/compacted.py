"""The last value of each key of a compacted log, read in log order, transaction-aware.

Reading a compacted topic back (a coordinator loading ``__consumer_offsets`` or
``__transaction_state``, an analytics job reading ``__consumer_offsets``) is
compaction: only the last record of each key matters. ``LatestValues`` takes
record batches in log order and keeps the last raw value per key; records of a
transaction wait per producer id until its marker: COMMIT makes them the
latest values, ABORT drops them, and a plain record written after a pending
one for the same key supersedes it (it is later in the log). Record framing is
walked with a tight loop that reads only the key and value (no headers, no
Record objects).

Superseded batches are skipped without walking their records (issue 22: a
load of 10M offset commits took ~9 s, nearly all of it in the record walk). A
coordinator writes the same shape of batch again and again: a consumer commits
the offsets of the same partitions, so each commit is a batch with the same
keys in the same order and values of the same sizes, and only the last one
matters. When a walked batch starts with the same key and has the same size and
record count as the previous walked batch starting with that key, its *layout*
is learnt: its keys, where its values are, and every byte that is not a value.
A later batch equal to a layout outside its values has exactly those keys and
value positions: it only replaces the layout's pending payload (one struct
unpack and tuple comparison in C; no record walked, no value sliced), and its
values are written into ``latest`` when something else touches those keys, or
``latest`` is read. Layouts own disjoint sets of keys, so a batch matching one
affects no other; a batch that is walked first writes back (and forgets) the
layouts owning any of its keys, so every key's value and first-seen position
are those of a record-by-record replay.
"""

from __future__ import annotations

import struct

from shoal.protocol import record_batch as rb

# zigzag value of a one-byte varint (None: the varint is longer, decode it with read_varint)
_ZIGZAG: list[int | None] = [(b >> 1) ^ -(b & 1) if b < 0x80 else None for b in range(256)]


def _skip_headers(data: bytes, pos: int) -> int:
    n, pos = rb.read_varint(data, pos)
    for _ in range(n):
        klen, pos = rb.read_varint(data, pos)
        pos += klen
        vlen, pos = rb.read_varint(data, pos)
        if vlen > 0:
            pos += vlen
    return pos


def _key_at(data: bytes, pos: int) -> tuple[int, int]:
    """(key length, position of the key) of the record starting at `pos`."""
    while data[pos] > 127:  # record length
        pos += 1
    pos += 2  # its last byte + attributes
    while data[pos] > 127:  # timestamp delta
        pos += 1
    pos += 1
    while data[pos] > 127:  # offset delta
        pos += 1
    klen = _ZIGZAG[data[pos + 1]]
    if klen is None:
        return rb.read_varint(data, pos + 1)
    return klen, pos + 2


def collect_latest(data: bytes, count: int, latest: dict[bytes, bytes | None]) -> None:
    """Add the (key -> value) of `count` records in a batch's records section to `latest`.

    The hot loop: single-byte varints are decoded by table, the length,
    timestamp-delta and offset-delta varints are skipped without decoding.
    """
    rv = rb.read_varint
    zz = _ZIGZAG
    pos = 0
    for _ in range(count):
        while data[pos] > 127:  # record length
            pos += 1
        pos += 2  # its last byte + attributes
        while data[pos] > 127:  # timestamp delta
            pos += 1
        pos += 1
        while data[pos] > 127:  # offset delta
            pos += 1
        klen = zz[data[pos + 1]]
        if klen is None:
            klen, pos = rv(data, pos + 1)
        else:
            pos += 2
        if klen < 0:
            key = None
        else:
            key = data[pos:pos + klen]
            pos += klen
        vlen = zz[data[pos]]
        if vlen is None:
            vlen, pos = rv(data, pos)
        else:
            pos += 1
        if vlen < 0:
            value = None
        else:
            value = data[pos:pos + vlen]
            pos += vlen
        if data[pos] == 0:  # no headers (always, for coordinator records)
            pos += 1
        else:
            pos = _skip_headers(data, pos)
        if key is not None:  # a record without key is not a coordinator record
            latest[key] = value


class _Layout:
    """The shape of a batch's records section whose records all have a key: its keys in order,
    and two struct formats over the section, one reading every byte that is not a value (equal
    for two sections: same keys, same value positions) and one reading the values."""

    __slots__ = ("count", "size", "keys", "nulls", "frames", "_frame_struct", "_value_struct", "last")

    def __init__(self, data: bytes, count: int, keys: list[bytes], spans: list[tuple[int, int]]) -> None:
        self.count = count
        self.size = len(data)
        self.keys = tuple(keys)
        self.nulls = tuple(i for i, (start, _end) in enumerate(spans) if start < 0)  # null values
        frame_fmt, value_fmt, prev = ["<"], ["<"], 0
        for start, end in spans:
            if start >= 0:
                frame_fmt.append(f"{start - prev}s{end - start}x")
                value_fmt.append(f"{start - prev}x{end - start}s")
                prev = end
        frame_fmt.append(f"{len(data) - prev}s")
        value_fmt.append(f"{len(data) - prev}x")
        self._frame_struct = struct.Struct("".join(frame_fmt))
        self._value_struct = struct.Struct("".join(value_fmt))
        self.frames = self._frame_struct.unpack(data)
        self.last: bytes | None = None  # a later section of this layout, not yet written to `latest`

    @classmethod
    def learn(cls, data: bytes, count: int) -> _Layout | None:
        """The layout of a records section (walked as `collect_latest` does), or None when a
        record has no key or headers."""
        keys: list[bytes] = []
        spans: list[tuple[int, int]] = []
        pos = 0
        for _ in range(count):
            klen, pos = _key_at(data, pos)
            if klen < 0:
                return None
            keys.append(data[pos:pos + klen])
            vlen, pos = rb.read_varint(data, pos + klen)
            if vlen < 0:
                spans.append((-1, -1))
            else:
                spans.append((pos, pos + vlen))
                pos += vlen
            if data[pos] != 0:
                return None
            pos += 1
        return cls(data, count, keys, spans)

    def matches(self, data: bytes, count: int) -> bool:
        return count == self.count and len(data) == self.size and self._frame_struct.unpack(data) == self.frames

    def values(self, data: bytes) -> list[bytes | None]:
        if not self.nulls:
            return list(self._value_struct.unpack(data))
        found = iter(self._value_struct.unpack(data))
        nulls = set(self.nulls)
        return [None if i in nulls else next(found) for i in range(self.count)]


class LatestValues:
    """Accumulates batches of a compacted (maybe transactional) log, in log order."""

    def __init__(self, transactional: bool = True) -> None:
        self._latest: dict[bytes, bytes | None] = {}
        self.pending: dict[int, dict[bytes, bytes | None]] = {}  # producer id -> its open transaction's records
        self.transactional = transactional
        self._owner: dict[bytes, _Layout] = {}  # key -> the layout holding it
        self._dirty: dict[_Layout, None] = {}  # layouts with a `last` section to write back
        # first key of a walked section -> (size, count): seen again, the section gets a layout
        self._seen: dict[bytes, tuple[int, int]] = {}

    @property
    def latest(self) -> dict[bytes, bytes | None]:
        """The last value of every key, in first-seen key order (tombstones as None)."""
        for layout in list(self._dirty):
            self._write_back(layout)
        return self._latest

    def add(self, buf: bytes | memoryview, start: int = 0) -> None:
        """Take the whole batches of ``buf`` (records at offsets below ``start`` are skipped)."""
        for h in rb.iter_batches(buf):
            if h.last_offset < start:
                continue
            if h.attributes & rb.CONTROL_MASK:
                recs = self.pending.pop(h.producer_id, None)
                if recs is not None and _is_commit(buf, h):
                    if self._owner:
                        self._write_back_owners(recs)
                    self._latest.update(recs)
                continue
            payload = rb.records_payload(buf, h)
            if self.transactional and h.attributes & rb.TRANSACTIONAL_MASK:
                collect_latest(payload, h.records_count, self.pending.setdefault(h.producer_id, {}))
            else:
                self._add_plain(payload, h.records_count)

    def _add_plain(self, payload: bytes, count: int) -> None:
        first = None
        if count:
            klen, pos = _key_at(payload, 0)
            if klen >= 0:
                first = payload[pos:pos + klen]
        layout = None if first is None else self._owner.get(first)
        if layout is not None and layout.matches(payload, count):
            if self.pending:
                self._unpend(layout.keys)
            layout.last = payload
            self._dirty[layout] = None
            return
        if not self._owner and not self.pending:
            collect_latest(payload, count, self._latest)
        else:
            fresh: dict[bytes, bytes | None] = {}
            collect_latest(payload, count, fresh)
            if self._owner:
                self._write_back_owners(fresh, forget=True)
            if self.pending:
                self._unpend(fresh)
            self._latest.update(fresh)
        if first is not None:
            if self._seen.get(first) == (len(payload), count):
                del self._seen[first]
                self._learn(payload, count)
            else:
                self._seen[first] = (len(payload), count)

    def _unpend(self, keys: tuple[bytes, ...] | dict[bytes, bytes | None]) -> None:
        for recs in self.pending.values():
            for key in keys:
                recs.pop(key, None)

    def _learn(self, payload: bytes, count: int) -> None:
        """Give the section just written to `latest` a layout, owning its keys (no layout owns
        any of them: `_write_back_owners(forget=True)` ran)."""
        layout = _Layout.learn(payload, count)
        if layout is not None:
            for key in layout.keys:
                self._owner[key] = layout

    def _write_back_owners(self, keys: dict[bytes, bytes | None], forget: bool = False) -> None:
        """Before writing `keys` to `latest`: write back the layouts holding any of them (and,
        with `forget`, drop those layouts: the newest section shape takes their keys)."""
        owner = self._owner
        for key in keys:
            layout = owner.get(key)
            if layout is None:
                continue
            if layout in self._dirty:
                self._write_back(layout)
            if forget:
                for k in layout.keys:
                    owner.pop(k, None)

    def _write_back(self, layout: _Layout) -> None:
        del self._dirty[layout]
        payload, layout.last = layout.last, None
        if payload is not None:
            self._latest.update(zip(layout.keys, layout.values(payload), strict=True))


def _is_commit(buf: bytes | memoryview, h: rb.BatchHeader) -> bool:
    try:
        return rb.control_type(buf, h) == rb.CONTROL_COMMIT
    except rb.RecordBatchError:
        return False
