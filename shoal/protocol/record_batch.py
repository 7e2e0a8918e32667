"""RecordBatch v2 (magic 2): header parsing, validation, building and iterating records.

Layout of one batch (big-endian; offsets in bytes from the batch start)::

     0 baseOffset int64          27 baseTimestamp int64
     8 batchLength int32         35 maxTimestamp int64
    12 partitionLeaderEpoch int32 43 producerId int64
    16 magic int8 (= 2)          51 producerEpoch int16
    17 crc uint32 (CRC-32C of    53 baseSequence int32
       bytes 21..end)            57 recordsCount int32
    21 attributes int16          61 records (maybe compressed)
    23 lastOffsetDelta int32

``batchLength`` counts from byte 12 to the end, so a batch occupies
``batchLength + 12`` bytes (``LOG_OVERHEAD`` = 12). Kafka's ``message.max.bytes``
/ ``max.message.bytes`` is compared with that whole size (``sizeInBytes`` in the
Java code, log overhead included), which is why its default is 1048588 =
1 MiB + 12.

The broker path (``validate_batches``, ``set_base_offset``,
``set_log_append_time``) never decodes records: it reads fixed header fields
and checks the CRC with the C extension. ``iter_records`` / ``build_batch`` are
for clients, coordinators and the log cleaner.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from google_crc32c import value as _crc32c

from shoal.protocol import compression as _compression
from shoal.protocol.errors import CodedError, ErrorCode
from shoal.protocol.primitives import uvarint_bytes

MAGIC = 2
LOG_OVERHEAD = 12
HEADER_SIZE = 61
# batchLength of a batch with no records at all.
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

LENGTH_OFFSET = 8
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
RECORDS_COUNT_OFFSET = 57

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

NO_PRODUCER_ID = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiib")  # up to and including magic
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")

assert _HEADER.size == HEADER_SIZE


class RecordBatchError(CodedError, ValueError):
    """Base class of record-batch errors, each carrying the Kafka error it stands for."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class CorruptRecordError(RecordBatchError):
    """Bad CRC, impossible length, truncated batch (CORRUPT_MESSAGE)."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class RecordTooLargeError(RecordBatchError):
    """A batch is larger than the allowed maximum (MESSAGE_TOO_LARGE)."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class InvalidRecordError(RecordBatchError):
    """A well-formed batch that breaks a produce rule (INVALID_RECORD)."""

    error_code = ErrorCode.INVALID_RECORD


class UnsupportedMessageFormatError(RecordBatchError):
    """A magic 0/1 message set (UNSUPPORTED_FOR_MESSAGE_FORMAT).

    Legacy message sets put ``magic`` at byte 16 too, so they are told apart
    from v2 batches by the same field; shoal stores only magic 2.
    """

    error_code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class BatchHeader:
    """The fixed 61-byte header of one batch, plus where it starts in its buffer."""

    __slots__ = (
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
        "position",
    )

    def __init__(
        self,
        base_offset: int,
        batch_length: int,
        partition_leader_epoch: int,
        magic: int,
        crc: int,
        attributes: int,
        last_offset_delta: int,
        base_timestamp: int,
        max_timestamp: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        records_count: int,
        position: int = 0,
    ) -> None:
        self.base_offset = base_offset
        self.batch_length = batch_length
        self.partition_leader_epoch = partition_leader_epoch
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.records_count = records_count
        self.position = position

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    def __repr__(self) -> str:
        return (
            f"BatchHeader(base_offset={self.base_offset}, size={self.size}, "
            f"last_offset_delta={self.last_offset_delta}, records={self.records_count}, "
            f"attributes={self.attributes:#x}, producer_id={self.producer_id}, "
            f"producer_epoch={self.producer_epoch}, base_sequence={self.base_sequence}, "
            f"max_timestamp={self.max_timestamp}, position={self.position})"
        )


class Record(NamedTuple):
    """One decoded record. ``headers`` keys are str, values bytes or None."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class ControlRecord(NamedTuple):
    """A decoded transaction marker: ``control_type`` 0 abort, 1 commit."""

    control_type: int
    version: int
    coordinator_epoch: int


Buffer = bytes | bytearray | memoryview


def _check_magic(magic: int, pos: int) -> None:
    if magic != MAGIC:
        if magic in (0, 1):
            raise UnsupportedMessageFormatError(
                f"message format v{magic} (magic {magic}) at position {pos} is not supported; "
                "only RecordBatch v2 is"
            )
        raise CorruptRecordError(f"unknown magic {magic} at position {pos}")


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the batch header at ``pos`` (no CRC check)."""
    if len(buf) - pos < HEADER_SIZE:
        if len(buf) - pos >= MAGIC_OFFSET + 1:
            _check_magic(buf[pos + MAGIC_OFFSET], pos)
        raise CorruptRecordError(f"truncated batch header at position {pos}")
    fields = _HEADER.unpack_from(buf, pos)
    _check_magic(fields[3], pos)
    if fields[1] < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {fields[1]} at position {pos} is below the minimum")
    return BatchHeader(*fields, pos)


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C of a batch's bytes from ``attributes`` to its end."""
    # The C extension only takes bytes (not memoryview/bytearray): one copy.
    return _crc32c(bytes(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]))


def validate_batches(
    buf: Buffer,
    max_batch_bytes: int | None = None,
    *,
    client: bool = True,
) -> list[BatchHeader]:
    """Validate every batch of a produce payload; return their headers in order.

    Checks magic, lengths (every batch whole, nothing trailing) and the CRC.
    ``max_batch_bytes`` is compared with each batch's whole size including the
    12-byte log overhead, as Kafka compares ``max.message.bytes``.
    With ``client`` (the default, a producer's payload) Kafka's extra produce
    rules apply: at least one record, ``recordsCount == lastOffsetDelta + 1``,
    a producer id implies a sequence, and no control batches.

    Raises CorruptRecordError, RecordTooLargeError, InvalidRecordError or
    UnsupportedMessageFormatError.
    """
    n = len(buf)
    if n == 0:
        raise InvalidRecordError("produce payload holds no record batch")
    mv = memoryview(buf)
    headers: list[BatchHeader] = []
    pos = 0
    unpack_prefix = _PREFIX.unpack_from
    unpack = _HEADER.unpack_from
    while pos < n:
        if n - pos < MAGIC_OFFSET + 1:
            raise CorruptRecordError(f"{n - pos} trailing bytes at position {pos} are not a batch")
        _, batch_length, _, magic = unpack_prefix(mv, pos)
        _check_magic(magic, pos)
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {batch_length} at position {pos} is below the minimum")
        size = batch_length + LOG_OVERHEAD
        if max_batch_bytes is not None and size > max_batch_bytes:
            raise RecordTooLargeError(
                f"the record batch size is {size} bytes which exceeds the maximum of {max_batch_bytes}"
            )
        if pos + size > n:
            raise CorruptRecordError(f"batch at position {pos} claims {size} bytes but only {n - pos} remain")
        h = BatchHeader(*unpack(mv, pos), pos)
        if _crc32c(bytes(mv[pos + ATTRIBUTES_OFFSET : pos + size])) != h.crc:
            raise CorruptRecordError(f"CRC mismatch in batch at position {pos}")
        if h.last_offset_delta < 0 or h.records_count < 0:
            raise CorruptRecordError(f"negative offset delta or record count in batch at position {pos}")
        if client:
            if h.records_count <= 0:
                raise InvalidRecordError(f"invalid reported count for record batch: {h.records_count}")
            if h.records_count != h.last_offset_delta + 1:
                raise InvalidRecordError(
                    f"inconsistent batch offset range (last offset delta {h.last_offset_delta}) "
                    f"and count of records {h.records_count}"
                )
            if h.producer_id >= 0 and h.base_sequence < 0:
                raise InvalidRecordError(
                    f"invalid sequence number {h.base_sequence} in record batch with producerId {h.producer_id}"
                )
            if h.attributes & CONTROL_MASK:
                raise InvalidRecordError("clients are not allowed to write control records")
        headers.append(h)
        pos += size
    return headers


def iter_batches(buf: Buffer, pos: int = 0, *, check_crc: bool = False) -> Iterator[BatchHeader]:
    """Headers of the whole batches in ``buf``, stopping quietly at a trailing partial batch.

    This is the reader's view (fetch responses may end with a partial batch).
    Raises for bad magic, impossible lengths and (with ``check_crc``) bad CRCs.
    """
    n = len(buf)
    mv = memoryview(buf)
    while n - pos >= HEADER_SIZE:
        _, batch_length, _, magic = _PREFIX.unpack_from(mv, pos)
        _check_magic(magic, pos)
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {batch_length} at position {pos} is below the minimum")
        size = batch_length + LOG_OVERHEAD
        if pos + size > n:
            return
        h = BatchHeader(*_HEADER.unpack_from(mv, pos), pos)
        if check_crc and compute_crc(mv, pos, size) != h.crc:
            raise CorruptRecordError(f"CRC mismatch in batch at position {pos}")
        yield h
        pos += size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Overwrite a batch's base offset in place (not covered by the CRC)."""
    _I64.pack_into(buf, pos, base_offset)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Mark a batch LogAppendTime with ``timestamp`` as its max timestamp; recompute the CRC."""
    size = _I32.unpack_from(buf, pos + LENGTH_OFFSET)[0] + LOG_OVERHEAD
    (attributes,) = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


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


def read_varint(buf: bytes, pos: int, max_shift: int = 63,
                error: type[RecordBatchError] = CorruptRecordError) -> tuple[int, int]:
    """A zigzag varint at `pos`: (value, position after it). Longer than ``max_shift`` allows
    (63: a varlong; 28: Kafka's 5-byte readVarint) raises ``error``."""
    b = buf[pos]
    pos += 1
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos
    result = b & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > max_shift:
            raise error("varint is too long")


# ---------------------------------------------------------------------------
# decoding


def _read_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    """A varint-length byte field (length -1: null) and the position after it."""
    n, pos = read_varint(data, pos)
    if n < 0:
        return None, pos
    return data[pos : pos + n], pos + n


def read_headers(data: bytes, pos: int) -> tuple[list[tuple[str, bytes | None]], int]:
    """A record's headers (count, then key and value of each) and the position after them."""
    nheaders, pos = read_varint(data, pos)
    headers: list[tuple[str, bytes | None]] = []
    for _h in range(nheaders):
        hklen, pos = read_varint(data, pos)
        if hklen < 0:
            raise CorruptRecordError("null header key")
        hkey = data[pos : pos + hklen].decode("utf-8", "replace")
        pos += hklen
        hval, pos = _read_bytes(data, pos)
        headers.append((hkey, hval))
    return headers, pos


def _decode_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int, timestamp_override: int | None
) -> Iterator[Record]:
    rv = read_varint
    pos = 0
    end = len(data)
    for _ in range(count):
        length, pos = rv(data, pos)
        record_end = pos + length
        if length < 0 or record_end > end:
            raise CorruptRecordError("record length runs past the end of the batch")
        pos += 1  # record attributes: unused
        ts_delta, pos = rv(data, pos)
        offset_delta, pos = rv(data, pos)
        key, pos = _read_bytes(data, pos)
        value, pos = _read_bytes(data, pos)
        headers, pos = read_headers(data, pos)
        if pos != record_end:
            raise CorruptRecordError("record length does not match its contents")
        ts = base_timestamp + ts_delta if timestamp_override is None else timestamp_override
        yield Record(base_offset + offset_delta, ts, key, value, headers)


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

    This runs on every produced batch, so it walks the bytes without building a record: one-byte
    varints (nearly every length below 64 and every delta) are decoded inline.
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
            pos = pos + 1 if data[pos] < 0x80 else varint(data, pos)[1]  # offset delta
            b = data[pos]  # key length
            if b < 0x80:
                pos += 1
                missing_key = bool(b & 1)
                if not missing_key:
                    pos += b >> 1
            else:
                n, pos = varint(data, pos)
                missing_key = n < 0
                if n >= 0:
                    pos += n
            # One error per record, the key's first (as Kafka's validateRecord).
            if missing_key and key_required:
                errors.append(RecordError(i, missing_key=True))
            elif bad_timestamp is not None:
                errors.append(RecordError(i, timestamp=bad_timestamp))
            b = data[pos]  # value length
            if b < 0x80:
                pos += 1
                if not b & 1:
                    pos += b >> 1
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


def records_payload(batch: Buffer, header: BatchHeader | None = None) -> bytes:
    """The (decompressed) records section of the batch starting at byte 0 of ``batch``."""
    h = header if header is not None else parse_header(batch)
    start = h.position + HEADER_SIZE
    end = h.position + h.size
    if len(batch) < end:
        raise CorruptRecordError(f"batch needs {h.size} bytes, buffer has {len(batch) - h.position}")
    raw = memoryview(batch)[start:end]
    codec = h.attributes & COMPRESSION_MASK
    if codec == _compression.NONE:
        return bytes(raw)
    try:
        return _compression.decompress(codec, raw)
    except _compression.CompressionError as e:
        raise CorruptRecordError(str(e)) from e


def iter_records(batch: Buffer, header: BatchHeader | None = None) -> Iterator[Record]:
    """Decode the records of one batch (at ``header.position``, default the start of ``batch``).

    Offsets are absolute. For LogAppendTime batches every record reports the
    batch's max timestamp, as Kafka clients do. Control batches yield their
    control record (decode it with ``parse_control_record``).
    """
    h = header if header is not None else parse_header(batch)
    data = records_payload(batch, h)
    override = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None
    try:
        yield from _decode_records(data, h.records_count, h.base_offset, h.base_timestamp, override)
    except IndexError:
        raise CorruptRecordError("record data is truncated") from None


def iter_all_records(buf: Buffer, *, skip_control: bool = True) -> Iterator[tuple[BatchHeader, Record]]:
    """Every record of every whole batch in ``buf`` (fetch data; a partial tail is ignored)."""
    for h in iter_batches(buf):
        if skip_control and h.attributes & CONTROL_MASK:
            continue
        for r in iter_records(buf, h):
            yield h, r


def parse_control_record(key: Buffer, value: Buffer | None) -> ControlRecord:
    """Decode a control record's key (version, type) and value (version, coordinator epoch)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record key is too short")
    version, ctype = _CONTROL_KEY.unpack_from(key, 0)
    epoch = -1
    if value is not None and len(value) >= _CONTROL_VALUE.size:
        _, epoch = _CONTROL_VALUE.unpack_from(value, 0)
    return ControlRecord(ctype, version, epoch)


def control_record(batch: Buffer, header: BatchHeader | None = None) -> ControlRecord:
    """The marker (type and coordinator epoch) a control batch carries."""
    h = header if header is not None else parse_header(batch)
    if not h.is_control:
        raise ValueError("not a control batch")
    for r in iter_records(batch, h):
        return parse_control_record(r.key, r.value)
    raise CorruptRecordError("control batch without records")


def control_type(batch: Buffer, header: BatchHeader | None = None) -> int:
    """The marker type (CONTROL_ABORT / CONTROL_COMMIT) of a control batch."""
    return control_record(batch, header).control_type


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
    batch = bytearray(
        _HEADER.pack(
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
    )
    batch += payload
    _U32.pack_into(batch, CRC_OFFSET, _crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


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
