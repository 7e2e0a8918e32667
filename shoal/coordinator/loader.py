"""Reading a `__consumer_offsets` partition back for replay.

Loading is compaction: only the last record of each key matters, so the
loader keeps the last value per key (raw bytes, undecoded) and the shard
replays each distinct key once. Record framing is walked with a tight loop
that reads only the key and value (no headers, no Record objects).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

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


@dataclass
class LoadedOffsets:
    """`__consumer_offsets` read back: the last committed value per key, and the records of
    transactions still open (per producer id) that a marker has not yet decided."""

    latest: dict[bytes, bytes | None]
    pending: dict[int, dict[bytes, bytes | None]]


def load_offsets_log(log) -> LoadedOffsets:
    """Transaction-aware replay of an offsets partition, in log order.

    Transactional records wait per producer until its marker: COMMIT makes
    them the latest values, ABORT drops them. A plain record written after a
    pending one for the same key supersedes it (it is later in the log, and
    Kafka keeps the record with the higher offset).
    """
    latest: dict[bytes, bytes | None] = {}
    pending: dict[int, dict[bytes, bytes | None]] = {}
    for buf, _next in iter_log_chunks(log, log.log_start_offset, log.log_end_offset):
        for h in rb.iter_batches(buf):
            if h.attributes & rb.CONTROL_MASK:
                recs = pending.pop(h.producer_id, None)
                if recs is not None and _is_commit(buf, h):
                    latest.update(recs)
                continue
            payload = rb.records_payload(buf, h)
            if h.attributes & rb.TRANSACTIONAL_MASK:
                collect_latest(payload, h.records_count, pending.setdefault(h.producer_id, {}))
            elif pending:
                fresh: dict[bytes, bytes | None] = {}
                collect_latest(payload, h.records_count, fresh)
                for recs in pending.values():
                    for key in fresh:
                        recs.pop(key, None)
                latest.update(fresh)
            else:
                collect_latest(payload, h.records_count, latest)
    return LoadedOffsets(latest, pending)


def _is_commit(buf, h: rb.BatchHeader) -> bool:
    batch = memoryview(buf)[h.position:h.position + h.size]
    try:
        return rb.control_type(bytes(batch)) == rb.CONTROL_COMMIT
    except rb.RecordBatchError:
        return False


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
