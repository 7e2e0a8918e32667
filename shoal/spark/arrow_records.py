"""Kafka RecordBatch v2 bytes to Arrow columns, and rows back to RecordBatch bytes.

The read path never makes a Python object per record: the batches of a
fetch are decompressed and laid end to end, one Python loop finds where each
record's body starts (only its length varint is read), and the rest is numpy
over all records at once: the timestamp and offset deltas and the key and
value lengths are varints decoded column-wise, and the key and value bytes are
gathered into the data buffers of Arrow binary arrays. Headers, when asked for
and present, take a per-record path.

Spark's Kafka schema, with its exact Arrow types (Spark refuses anything else):
``key binary, value binary, topic string, partition int, offset long,
timestamp timestamp (µs, UTC), timestampType int`` and, with
``includeHeaders``, ``headers array<struct<key string, value binary>>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from shoal.protocol import record_batch as rb

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_BASE_FIELDS = [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
                ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32())]
_PAD = b"\0" * 16  # so a vectorised varint read may look past the last byte
_GATHER_COPY_ABOVE = 256  # mean value size from which a per-record copy beats the byte mask


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(("headers", HEADERS_TYPE))
    return pa.schema(fields)




@dataclass
class Decoded:
    """Rows decoded from one fetch, and where reading goes on."""

    batch: pa.RecordBatch | None
    next_offset: int  # the offset after the last batch looked at (control and aborted batches too)


def _record_bodies(data: bytes, count: int, base: int, starts: list[int], lengths: list[int]) -> None:
    """Append, for each record of a batch's records section, where its body starts and its length."""
    p = 0
    rv = rb.read_varint
    for _ in range(count):
        c = data[p]
        if c < 128:
            n = (c >> 1) ^ -(c & 1)
            p += 1
        else:
            c1 = data[p + 1]
            if c1 < 128:
                raw = (c & 0x7F) | (c1 << 7)
                n = (raw >> 1) ^ -(raw & 1)
                p += 2
            else:
                n, p = rv(data, p)
        if n < 0 or p + n > len(data):
            raise rb.CorruptRecordError("record length runs past the end of its batch")
        starts.append(base + p)
        lengths.append(n)
        p += n
    if p != len(data):
        raise rb.CorruptRecordError("the records of a batch do not fill it")


def _varints(arr: np.ndarray, pos: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints starting at each of ``pos``: (values, sizes in bytes)."""
    raw = np.zeros(len(pos), np.int64)
    size = np.zeros(len(pos), np.int64)
    active = np.ones(len(pos), bool)
    shift = 0
    for k in range(max_bytes):
        b = arr[pos + k].astype(np.int64)
        raw |= np.where(active, (b & 0x7F) << shift, 0)
        size += active
        active &= b >= 128
        shift += 7
        if not active.any():
            break
    return (raw >> 1) ^ -(raw & 1), size


def _binary(data: bytes, arr: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary array of the byte ranges [start, start + length) of ``data`` (length -1: null)."""
    valid = lengths >= 0
    lens = np.where(valid, lengths, 0)
    offsets = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    if total > 0x7FFFFFFF:
        raise ValueError("more than 2 GiB of keys or values in one Arrow batch")
    if len(lens) and total / len(lens) >= _GATHER_COPY_ABOVE:
        out = bytearray(total)
        mv = memoryview(data)
        o = 0
        for s, n in zip(starts[valid].tolist(), lens[valid].tolist(), strict=True):
            out[o:o + n] = mv[s:s + n]
            o += n
        buf = pa.py_buffer(out)
    else:
        mark = np.zeros(len(arr) + 1, np.int8)
        mark[starts[valid]] += 1
        mark[(starts + lens)[valid]] -= 1
        buf = pa.py_buffer(arr[np.cumsum(mark[:-1], dtype=np.int8).view(bool)])
    nulls = int(len(lens) - valid.sum())
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.binary(), len(lens), [validity, pa.py_buffer(offsets.astype(np.int32)), buf],
                                 null_count=nulls)


def _headers(data: bytes, header_pos: np.ndarray) -> pa.Array:
    """The headers column, decoded record by record (only when some record has headers)."""
    out = []
    rv = rb.read_varint
    for p in header_pos.tolist():
        n, p = rv(data, p)
        hs = []
        for _ in range(n):
            klen, p = rv(data, p)
            if klen < 0:
                raise rb.CorruptRecordError("null header key")
            hkey = data[p:p + klen].decode("utf-8", "replace")
            p += klen
            vlen, p = rv(data, p)
            hval = None if vlen < 0 else data[p:p + vlen]
            p += max(vlen, 0)
            hs.append({"key": hkey, "value": hval})
        out.append(hs)
    return pa.array(out, HEADERS_TYPE)


def decode_fetch(buf: bytes | memoryview, topic: str, partition: int, start: int, until: int, *,
                 aborted: Iterable[tuple[int, int]] = (), include_headers: bool = False) -> Decoded:
    """Rows with offsets in [start, until) from the whole batches of a fetch response.

    ``aborted`` is the fetch's aborted-transaction list as (first offset,
    producer id): a producer's transactional batches are dropped from that
    offset until its ABORT marker, as Kafka's consumer does. Control batches
    never make rows. A trailing partial batch is ignored (fetch responses may
    end with one).
    """
    pending = sorted(aborted)
    aborted_pids: set[int] = set()
    payloads: list[bytes] = []
    starts: list[int] = []
    lengths: list[int] = []
    counts: list[int] = []
    base_offsets: list[int] = []
    base_ts: list[int] = []
    log_append: list[int] = []  # LogAppendTime batches: their max timestamp, else -1
    size = 0
    next_offset = start
    for h in rb.iter_batches(buf):
        if h.base_offset >= until:
            next_offset = max(next_offset, until)  # the range ends in a gap (compacted, markers)
            break
        while pending and pending[0][0] <= h.last_offset:
            aborted_pids.add(pending.pop(0)[1])
        next_offset = max(next_offset, h.next_offset)
        if h.last_offset < start:
            continue
        if h.is_control:
            if h.producer_id in aborted_pids and rb.control_type(buf, h) == rb.CONTROL_ABORT:
                aborted_pids.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborted_pids:
            continue
        data = rb.records_payload(buf, h)
        _record_bodies(data, h.records_count, size, starts, lengths)
        payloads.append(data)
        size += len(data)
        counts.append(h.records_count)
        base_offsets.append(h.base_offset)
        base_ts.append(h.base_timestamp)
        log_append.append(h.max_timestamp if h.timestamp_type == rb.LOG_APPEND_TIME else -1)
    if not starts:
        return Decoded(None, next_offset)
    data = b"".join(payloads)
    arr = np.frombuffer(data + _PAD, np.uint8)
    pos = np.asarray(starts, np.int64) + 1  # past the record attributes byte
    ts_delta, n = _varints(arr, pos, 10)
    pos += n
    offset_delta, n = _varints(arr, pos, 5)
    pos += n
    klen, n = _varints(arr, pos, 5)
    pos += n
    kstart = pos.copy()
    pos += np.maximum(klen, 0)
    vlen, n = _varints(arr, pos, 5)
    pos += n
    vstart = pos.copy()
    pos += np.maximum(vlen, 0)
    reps = np.asarray(counts)
    offsets = np.repeat(np.asarray(base_offsets, np.int64), reps) + offset_delta
    append_ts = np.repeat(np.asarray(log_append, np.int64), reps)
    ts_ms = np.where(append_ts >= 0, append_ts, np.repeat(np.asarray(base_ts, np.int64), reps) + ts_delta)
    keep = (offsets >= start) & (offsets < until)
    arr = arr[:len(data)]
    columns = [_binary(data, arr, kstart, klen), _binary(data, arr, vstart, vlen),
               pa.array(np.full(len(offsets), topic, object), pa.string()),
               pa.array(np.full(len(offsets), partition, np.int32)),
               pa.array(offsets),
               pa.array(ts_ms * 1000, pa.timestamp("us", tz="UTC")),
               pa.array((append_ts >= 0).astype(np.int32))]
    if include_headers:
        if arr[pos].any():
            columns.append(_headers(data, pos))
        else:
            columns.append(pa.array([[]] * len(offsets), HEADERS_TYPE))
    batch = pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
    if not keep.all():
        batch = batch.filter(pa.array(keep))
    return Decoded(batch if batch.num_rows else None, next_offset)


def encode_rows(rows: Sequence[tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]] | None]],
                *, compression: int = 0) -> bytes:
    """One RecordBatch v2 of ``(timestamp ms, key, value, headers)`` rows (offsets from 0)."""
    return rb.build_batch(rows, compression=compression)
