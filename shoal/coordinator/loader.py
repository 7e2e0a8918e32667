"""Reading a `__consumer_offsets` partition back for replay.

Loading is compaction: only the last record of each key matters, so the
loader keeps the last value per key (raw bytes, undecoded) and the shard
replays each distinct key once. Record framing is walked with a tight loop
that reads only the key and value (no headers, no Record objects).
"""

from __future__ import annotations

from collections.abc import Iterator

from shoal.protocol import record_batch as rb

_READ_CHUNK = 8 * 1024 * 1024


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


def iter_log_chunks(log, start: int, end: int) -> Iterator[tuple[bytes | memoryview, int]]:
    """(buffer of whole batches, next offset) from `start` up to `end`."""
    offset = start
    while offset < end:
        buf = log.read(offset, _READ_CHUNK)
        if not buf:
            return
        last = None
        for h in rb.iter_batches(buf):
            last = h
        if last is None:
            return
        yield buf, last.base_offset + last.last_offset_delta + 1
        offset = last.base_offset + last.last_offset_delta + 1


def latest_records(log) -> dict[bytes, bytes | None]:
    """Last value of every key in the log (control batches skipped), in first-seen key order."""
    latest: dict[bytes, bytes | None] = {}
    start = log.log_start_offset
    end = log.log_end_offset
    for buf, _next in iter_log_chunks(log, start, end):
        for h in rb.iter_batches(buf):
            if h.attributes & rb.CONTROL_MASK:
                continue
            collect_latest(rb.records_payload(buf, h), h.records_count, latest)
    return latest
