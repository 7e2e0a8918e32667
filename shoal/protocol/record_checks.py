"""Validating records on produce: Kafka's LogValidator reading every record of every batch of a
produce request (``validate_records``, ``check_records``) and the records it refuses one by one
(``RecordError``, KIP-467). The batch headers are checked before, by ``record_batch.validate_batches``.
"""

from __future__ import annotations

from collections.abc import Sequence

from shoal.protocol import compression as _compression
from shoal.protocol.record_batch import (
    COMPRESSION_MASK,
    HEADER_SIZE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Buffer,
    InvalidRecordError,
    read_varint,
)


def _varint_at(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zigzag varint of up to 5 bytes (Kafka's readVarint) in a produced record."""
    return read_varint(buf, pos, 28, InvalidRecordError)


class RecordError:
    """One record Kafka's LogValidator refuses (KIP-467): its index in the batch and why. The
    whole batch is refused; the produce response names every such record."""

    __slots__ = ("index", "missing_key", "timestamp")

    def __init__(self, index: int, missing_key: bool = False, timestamp: int | None = None):
        self.index = index
        self.missing_key = missing_key
        self.timestamp = timestamp  # set when the record's timestamp is out of bounds

    def __repr__(self) -> str:
        return f"RecordError({self.index}, missing_key={self.missing_key}, timestamp={self.timestamp})"


def check_records(data: Buffer, count: int, key_required: bool = False,
                  timestamp_bounds: tuple[int, int, int] | None = None) -> list[RecordError]:
    """Check that ``data`` (a batch's decompressed records section) holds exactly ``count``
    well-formed records, as Kafka's DefaultRecord.readFrom reads them: lengths that add up, no
    negative header count, no null header key, nothing left over. Raises InvalidRecordError.

    Returns the records Kafka refuses one by one: with ``key_required`` (a compacted topic) each
    record without a key; with ``timestamp_bounds`` ``(base_timestamp, lowest, highest)`` (a
    CreateTime topic whose message.timestamp.before/after.max.ms are set) each record whose
    timestamp falls outside ``[lowest, highest]``.

    This runs on every produced batch, so it walks the bytes without building a record: one- and
    two-byte varints (every delta and length below 8,192: nearly all of them) are decoded inline, a
    call only for longer ones (with 1 KiB values, whose record and value lengths take two bytes,
    those calls were most of the walk's time, and the walk the broker's largest produce cost).
    """
    pos = 0
    end = len(data)
    varint = _varint_at
    errors: list[RecordError] = []
    i = 0
    try:
        for i in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                v = (b & 0x7F) | (data[pos + 1] << 7)
                length = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                length, pos = varint(data, pos)
            record_end = pos + length
            if length <= 0 or record_end > end:
                raise InvalidRecordError(f"record {i} has an invalid size {length}")
            pos += 1  # attributes
            bad_timestamp = None
            if timestamp_bounds is None:
                pos = pos + 1 if data[pos] < 0x80 else _varlong_end(data, pos)  # timestamp delta
            else:
                bad_timestamp, pos = _timestamp_out_of_bounds(data, pos, timestamp_bounds)
            # the offset delta
            pos = pos + 1 if data[pos] < 0x80 else pos + 2 if data[pos + 1] < 0x80 else varint(data, pos)[1]
            b = data[pos]  # key length
            if b < 0x80:
                missing_key = bool(b & 1)
                pos += 1 if missing_key else 1 + (b >> 1)
            else:
                n, pos = varint(data, pos)
                missing_key = n < 0
                pos += max(n, 0)
            # One error per record, the key's first (as Kafka's validateRecord).
            if missing_key and key_required:
                errors.append(RecordError(i, missing_key=True))
            elif bad_timestamp is not None:
                errors.append(RecordError(i, timestamp=bad_timestamp))
            b = data[pos]  # value length (negative: null)
            if b < 0x80:
                pos += 1 if b & 1 else 1 + (b >> 1)
            elif data[pos + 1] < 0x80:
                v = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2 if v & 1 else 2 + (v >> 1)
            else:
                pos = _after_bytes(data, pos)
            pos = _skip_headers(data, pos, i) if data[pos] else pos + 1  # header count
            if pos != record_end:
                raise InvalidRecordError(f"record {i}: expected to read {length} bytes, read "
                                         f"{length + pos - record_end}")
    except IndexError:
        raise InvalidRecordError(f"record {i} is truncated") from None
    if pos != end:
        raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")
    return errors


def _timestamp_out_of_bounds(data: Buffer, pos: int, bounds: tuple[int, int, int]) -> tuple[int | None, int]:
    """The record's timestamp if outside ``bounds`` (base timestamp, lowest, highest), else None;
    and the position after its timestamp delta."""
    delta, pos = read_varint(data, pos, 63, InvalidRecordError)
    base, lowest, highest = bounds
    if not lowest <= base + delta <= highest and base + delta != NO_TIMESTAMP:
        return base + delta, pos
    return None, pos


def _skip_headers(data: Buffer, pos: int, i: int) -> int:
    """The position after record ``i``'s headers (a count, then key and value of each)."""
    headers, pos = _varint_at(data, pos)
    if headers < 0:
        raise InvalidRecordError(f"record {i} has an invalid number of headers {headers}")
    for _ in range(headers):
        n, pos = _varint_at(data, pos)
        if n < 0:
            raise InvalidRecordError(f"record {i} has a header with a null key")
        pos = _after_bytes(data, pos + n)
    return pos


def _after_bytes(data: Buffer, pos: int) -> int:
    """The position after a varint-length byte field (length -1: null)."""
    n, pos = _varint_at(data, pos)
    return pos + n if n > 0 else pos


def _varlong_end(buf: Buffer, pos: int) -> int:
    """The position after a varlong (up to 10 bytes)."""
    for i in range(pos, pos + 10):
        if buf[i] < 0x80:
            return i + 1
    raise InvalidRecordError("varlong is too long")


def validate_records(buf: Buffer, headers: Sequence[BatchHeader], *, key_required: bool = False,
                     timestamp_range: tuple[int, int] | None = None,
                     max_decompressed: int = 1 << 30) -> list[RecordError]:
    """Kafka's LogValidator on produce: every record of every batch read (compressed batches
    decompressed, to at most ``max_decompressed`` bytes). Raises InvalidRecordError for a batch
    that cannot be read; returns the records refused one by one (see check_records), with
    ``timestamp_range`` the ``(lowest, highest)`` CreateTime timestamp accepted."""
    mv = memoryview(buf)
    errors: list[RecordError] = []
    for h in headers:
        start = h.position + HEADER_SIZE
        raw = mv[start : h.position + h.size]
        codec = h.attributes & COMPRESSION_MASK
        if codec == _compression.NONE:
            data = raw
        else:
            try:
                data = _compression.decompress(codec, raw, max_decompressed)
            except _compression.CompressionError as e:
                raise InvalidRecordError(f"batch at position {h.position}: {e}") from None
        bounds = None
        if timestamp_range is not None and not h.attributes & TIMESTAMP_TYPE_MASK:
            bounds = (h.base_timestamp, *timestamp_range)
        errors += check_records(data, h.records_count, key_required, bounds)
    return errors
