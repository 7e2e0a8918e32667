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
from shoal.protocol.record_encode import EncodedRecords

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


def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A binary or string array's (offsets, data bytes, validity or None), nulls of length 0."""
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        arr = arr.view(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary())
    if not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
        raise TypeError(f"expected a binary or string column, not {arr.type}")
    valid = None
    if arr.null_count:
        valid = np.asarray(arr.is_valid())
    width = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], width)[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(0, np.uint8)
    if valid is not None and (np.diff(offsets)[~valid] != 0).any():
        # Arrow lets a null slot own bytes: compact them away so valid bytes lie end to end.
        return _binary_parts(pa.array(arr.to_pylist(), arr.type))
    return offsets, data, valid


def _varint_size(z: np.ndarray) -> np.ndarray:
    """Bytes of the (already zig-zagged, < 2**35) varints ``z``."""
    return 1 + (z >= 1 << 7) + (z >= 1 << 14) + (z >= 1 << 21) + (z >= 1 << 28)


def _put_varints(out: np.ndarray, pos: np.ndarray, z: np.ndarray, size: np.ndarray) -> None:
    for k in range(5):
        m = size > k
        if not m.any():
            return
        byte = (z[m] >> (7 * k)) & 0x7F
        out[pos[m] + k] = byte | np.where(size[m] > k + 1, 0x80, 0)


def _put_bytes(out: np.ndarray, start: np.ndarray, lens: np.ndarray, offsets: np.ndarray, data: np.ndarray) -> None:
    """Copy the values (end to end in ``data``) to ``out`` at ``start``, each ``lens`` long."""
    total = int(offsets[-1] - offsets[0])
    if total == 0:
        return
    mark = np.zeros(len(out) + 1, np.int8)
    nz = lens > 0
    mark[start[nz]] += 1
    mark[(start + lens)[nz]] -= 1
    out[np.cumsum(mark[:-1], dtype=np.int8).view(bool)] = data[offsets[0]:offsets[-1]]


def encode_records(keys: pa.Array | None, values: pa.Array, timestamp: int,
                   headers: Sequence[bytes] | None = None) -> EncodedRecords:
    """The records section of one batch, offsets 0.., every record stamped ``timestamp`` (ms).

    ``keys``/``values`` are Arrow binary or string arrays (nulls allowed);
    ``headers`` optional per-record encoded header sections (count varint and
    headers), else every record has none. Laid out column-wise with numpy: the
    varints of all records at once, then the key and value bytes in two masked
    copies.
    """
    n = len(values)
    if n == 0:
        raise ValueError("a record batch needs at least one record")
    voff, vdata, vvalid = _binary_parts(values)
    vlen = np.diff(voff)
    vz = vlen * 2 if vvalid is None else np.where(vvalid, vlen * 2, 1)  # zig-zag; -1 (null) is 1
    if keys is None:
        koff, kdata, klen = np.zeros(n + 1, np.int64), np.zeros(0, np.uint8), np.zeros(n, np.int64)
        kz = np.ones(n, np.int64)
    else:
        koff, kdata, kvalid = _binary_parts(keys)
        klen = np.diff(koff)
        kz = klen * 2 if kvalid is None else np.where(kvalid, klen * 2, 1)
    hlen = np.ones(n, np.int64) if headers is None else np.fromiter(map(len, headers), np.int64, n)
    od = np.arange(n, dtype=np.int64) * 2
    od_size, kz_size, vz_size = _varint_size(od), _varint_size(kz), _varint_size(vz)
    body = 2 + od_size + kz_size + klen + vz_size + vlen + hlen  # attributes and timestamp delta: 1 byte each
    body_size = _varint_size(body * 2)
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(body_size + body, out=starts[1:])
    out = np.zeros(int(starts[-1]), np.uint8)  # zeros: attributes, timestamp delta 0, no headers
    pos = starts[:-1].copy()
    _put_varints(out, pos, body * 2, body_size)
    pos += body_size + 2
    _put_varints(out, pos, od, od_size)
    pos += od_size
    _put_varints(out, pos, kz, kz_size)
    pos += kz_size
    _put_bytes(out, pos, klen, koff, kdata)
    pos += klen
    _put_varints(out, pos, vz, vz_size)
    pos += vz_size
    _put_bytes(out, pos, vlen, voff, vdata)
    if headers is not None:
        pos += vlen
        mv = memoryview(out)
        for p, h in zip(pos.tolist(), headers, strict=True):
            mv[p:p + len(h)] = h
    return EncodedRecords(out.tobytes(), n, timestamp, timestamp)
