"""Building RecordBatch v2 bytes: ``build_batch`` from records, the producer's one-pass
``encode_records`` + ``build_batch_encoded``, transaction markers (``build_control_batch``) and the
log cleaner's ``rebuild_batch``; with the zigzag varint encoding they share. The layout and the
reading side are in ``record_batch``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from google_crc32c import extend as _crc32c_extend
from google_crc32c import value as _crc32c

from shoal.protocol import compression as _compression
from shoal.protocol.primitives import uvarint_bytes
from shoal.protocol.record_batch import (
    _CONTROL_KEY,
    _CONTROL_VALUE,
    _HEADER,
    _U32,
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_MASK,
    CRC_OFFSET,
    MAGIC,
    MIN_BATCH_LENGTH,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Buffer,
    Record,
)

# ---------------------------------------------------------------------------
# varints (zigzag, as Kafka's ByteUtils.writeVarint / writeVarlong)


def _encode_varint(n: int) -> bytes:
    return uvarint_bytes((n << 1) ^ (n >> 63))


# Lengths and deltas are nearly always small: encode them by table lookup.
_VARINT_CACHE_MAX = 1 << 14
_VARINT_CACHE = [_encode_varint(n) for n in range(-1, _VARINT_CACHE_MAX)]


def _varint(n: int) -> bytes:
    if -1 <= n < _VARINT_CACHE_MAX:
        return _VARINT_CACHE[n + 1]
    return _encode_varint(n)


# Public for the producer, which encodes each record into its batch as it is sent: SMALL_VARINTS[n]
# is varint(n) for 0 <= n < len(SMALL_VARINTS), without a call.
varint = _varint
SMALL_VARINTS = _VARINT_CACHE[1:]


# ---------------------------------------------------------------------------
# building

RecordInput = tuple[int, Buffer | None, Buffer | None, Sequence[tuple[str | bytes, Buffer | None]] | None]


def _put_bytes(out: bytearray, b: Buffer | None) -> None:
    """Append a varint-length byte field (None: null, length -1)."""
    if b is None:
        out += b"\x01"  # varint(-1)
    else:
        out += _varint(len(b))
        out += b


def _encode_record(out: bytearray, offset_delta: int, ts_delta: int, key, value, headers) -> None:
    body = bytearray(b"\x00")
    body += _varint(ts_delta)
    body += _varint(offset_delta)
    _put_bytes(body, key)
    _put_bytes(body, value)
    body += encode_headers(headers) if headers else b"\x00"
    out += _varint(len(body))
    out += body


def encode_headers(headers: Sequence[tuple[str | bytes, bytes | None]] | None) -> bytes:
    """A record's headers section: the count, then each key and value (a None value is null)."""
    if not headers:
        return b"\x00"
    out = bytearray(_varint(len(headers)))
    for hk, hv in headers:
        hkb = hk.encode("utf-8") if isinstance(hk, str) else bytes(hk)
        out += _varint(len(hkb))
        out += hkb
        _put_bytes(out, hv)
    return bytes(out)


def _assemble(
    payload: bytes | bytearray,
    *,
    count: int,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    attributes: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
) -> bytes:
    header = _HEADER.pack(
        base_offset,
        MIN_BATCH_LENGTH + len(payload),
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    # The CRC runs over the header after it, then the records: computed in two steps, so that
    # the records are copied once, into the batch (a producer's batches are large).
    if not isinstance(payload, bytes):
        payload = bytes(payload)  # the checksum takes bytes only
    crc = _crc32c_extend(_crc32c(header[ATTRIBUTES_OFFSET:]), payload)
    return b"".join((header[:CRC_OFFSET], _U32.pack(crc), header[ATTRIBUTES_OFFSET:], payload))


def _attributes(compression: int, timestamp_type: int, is_transactional: bool, is_control: bool) -> int:
    if compression not in _compression.CODEC_NAMES:
        raise ValueError(f"unknown compression codec {compression}")
    return (
        compression
        | (TIMESTAMP_TYPE_MASK if timestamp_type else 0)
        | (TRANSACTIONAL_MASK if is_transactional else 0)
        | (CONTROL_MASK if is_control else 0)
    )


def _finish_payload(raw: bytearray, compression: int, level: int | None) -> bytes | bytearray:
    if compression == _compression.NONE:
        return raw
    return _compression.compress(compression, raw, level)


def build_batch(
    records: Iterable[RecordInput],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = 0,
    compression_level: int | None = None,
) -> bytes:
    """Encode records ``(timestamp, key, value, headers)`` as one v2 batch.

    Offsets are consecutive from ``base_offset``; the first record's timestamp
    is the base timestamp. ``headers`` is a sequence of ``(str, bytes|None)``
    (or None for no headers).
    """
    raw = bytearray()
    count = 0
    base_ts = None
    max_ts = NO_TIMESTAMP
    for ts, key, value, headers in records:
        if base_ts is None:
            base_ts = ts
        if ts > max_ts:
            max_ts = ts
        _encode_record(raw, count, ts - base_ts, key, value, headers)
        count += 1
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    return _assemble(
        _finish_payload(raw, compression, compression_level),
        count=count,
        base_offset=base_offset,
        last_offset_delta=count - 1,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        attributes=_attributes(compression, timestamp_type, is_transactional, False),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


@dataclass(frozen=True)
class EncodedRecords:
    """A batch's records section already encoded (offset deltas 0..count-1), uncompressed.

    What a bulk writer hands to the producer: the header (producer id, epoch,
    sequence) is added when the batch is drained, by ``build_batch_encoded``.
    """

    data: bytes
    count: int
    base_timestamp: int
    max_timestamp: int


def encode_records(
    records: Sequence[tuple[int, bytes | None, bytes | None, Sequence[tuple[str | bytes, bytes | None]] | None]],
) -> EncodedRecords:
    """The records section ``build_batch`` would write for ``records`` (offset deltas 0..n-1, the
    first timestamp the base), byte for byte; with ``build_batch_encoded``, the same batch.

    For producers: each record's length is worked out from its parts rather than by encoding
    its body separately and copying it, and every part is joined once at the end.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    varint = _varint
    base_ts = records[0][0]
    max_ts = NO_TIMESTAMP
    parts: list[bytes] = []
    add = parts.append
    for i, (ts, key, value, headers) in enumerate(records):
        if ts > max_ts:
            max_ts = ts
        ts_delta = varint(ts - base_ts)
        offset_delta = varint(i)
        hdrs = encode_headers(headers) if headers else b"\x00"
        size = 1 + len(ts_delta) + len(offset_delta) + len(hdrs)
        if key is None:
            key_len = b"\x01"
            size += 1
        else:
            key_len = varint(len(key))
            size += len(key_len) + len(key)
        if value is None:
            value_len = b"\x01"
            size += 1
        else:
            value_len = varint(len(value))
            size += len(value_len) + len(value)
        add(varint(size))
        add(b"\x00")  # attributes
        add(ts_delta)
        add(offset_delta)
        add(key_len)
        if key is not None:
            add(key)
        add(value_len)
        if value is not None:
            add(value)
        add(hdrs)
    return EncodedRecords(b"".join(parts), len(records), base_ts, max_ts)


def build_batch_encoded(
    records: EncodedRecords,
    *,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """One v2 batch (base offset 0) around an already encoded records section."""
    if records.count <= 0:
        raise ValueError("a record batch needs at least one record")
    return _assemble(
        _finish_payload(records.data, compression, compression_level),
        count=records.count,
        base_offset=0,
        last_offset_delta=records.count - 1,
        base_timestamp=records.base_timestamp,
        max_timestamp=records.max_timestamp,
        attributes=_attributes(compression, 0, is_transactional, False),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=-1,
    )


def build_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Encode a transaction marker (CONTROL_ABORT or CONTROL_COMMIT) as a control batch."""
    if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise ValueError(f"unknown control type {control_type}")
    raw = bytearray()
    _encode_record(
        raw, 0, 0, _CONTROL_KEY.pack(0, control_type), _CONTROL_VALUE.pack(0, coordinator_epoch), None
    )
    return _assemble(
        raw,
        count=1,
        base_offset=base_offset,
        last_offset_delta=0,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        attributes=TRANSACTIONAL_MASK | CONTROL_MASK,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        partition_leader_epoch=partition_leader_epoch,
    )


def rebuild_batch(
    header: BatchHeader, records: Sequence[Record], *, compression_level: int | None = None
) -> bytes:
    """Re-encode a subset of a batch's records, keeping its header identity.

    Used by the log cleaner: base offset, last offset delta (so the batch keeps
    its offset range and the producer's last sequence), producer id/epoch,
    base sequence, attributes and partition leader epoch are kept; records keep
    their absolute offsets and timestamps (offset deltas may now have gaps).
    """
    if not records:
        raise ValueError("rebuild_batch needs at least one record")
    raw = bytearray()
    base_ts = header.base_timestamp
    log_append = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    max_ts = header.max_timestamp if log_append else NO_TIMESTAMP
    for r in records:
        if not log_append and r.timestamp > max_ts:
            max_ts = r.timestamp
        _encode_record(raw, r.offset - header.base_offset, r.timestamp - base_ts, r.key, r.value, r.headers)
    codec = header.attributes & COMPRESSION_MASK
    return _assemble(
        _finish_payload(raw, codec, compression_level),
        count=len(records),
        base_offset=header.base_offset,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        attributes=header.attributes,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
    )
