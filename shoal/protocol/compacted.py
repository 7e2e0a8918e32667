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
"""

from __future__ import annotations

from shoal.protocol import record_batch as rb


def _skip_headers(data: bytes, pos: int) -> int:
    n, pos = rb.read_varint(data, pos)
    for _ in range(n):
        klen, pos = rb.read_varint(data, pos)
        pos += klen
        vlen, pos = rb.read_varint(data, pos)
        if vlen > 0:
            pos += vlen
    return pos


def collect_latest(data: bytes, count: int, latest: dict[bytes, bytes | None]) -> None:
    """Add the (key -> value) of `count` records in a batch's records section to `latest`.

    The hot loop: single-byte varints are decoded inline, the length,
    timestamp-delta and offset-delta varints are skipped without decoding.
    """
    rv = rb.read_varint
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
        pos += 1
        b = data[pos]
        if b < 128:
            klen = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            klen, pos = rv(data, pos)
        if klen < 0:
            key = None
        else:
            key = data[pos:pos + klen]
            pos += klen
        b = data[pos]
        if b < 128:
            vlen = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            vlen, pos = rv(data, pos)
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




class LatestValues:
    """Accumulates batches of a compacted (maybe transactional) log, in log order."""

    def __init__(self, transactional: bool = True) -> None:
        self.latest: dict[bytes, bytes | None] = {}
        self.pending: dict[int, dict[bytes, bytes | None]] = {}  # producer id -> its open transaction's records
        self.transactional = transactional

    def add(self, buf: bytes | memoryview, start: int = 0) -> None:
        """Take the whole batches of ``buf`` (records at offsets below ``start`` are skipped)."""
        for h in rb.iter_batches(buf):
            if h.last_offset < start:
                continue
            if h.attributes & rb.CONTROL_MASK:
                recs = self.pending.pop(h.producer_id, None)
                if recs is not None and _is_commit(buf, h):
                    self.latest.update(recs)
                continue
            payload = rb.records_payload(buf, h)
            if self.transactional and h.attributes & rb.TRANSACTIONAL_MASK:
                collect_latest(payload, h.records_count, self.pending.setdefault(h.producer_id, {}))
            elif self.pending:
                fresh: dict[bytes, bytes | None] = {}
                collect_latest(payload, h.records_count, fresh)
                for recs in self.pending.values():
                    for key in fresh:
                        recs.pop(key, None)
                self.latest.update(fresh)
            else:
                collect_latest(payload, h.records_count, self.latest)


def _is_commit(buf: bytes | memoryview, h: rb.BatchHeader) -> bool:
    try:
        return rb.control_type(buf, h) == rb.CONTROL_COMMIT
    except rb.RecordBatchError:
        return False
