"""RecordBatch v2 (magic 2): the layout, header parsing and checks, CRC, and decoding records.

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
and checks the CRC with the C extension. ``iter_records`` is for clients,
coordinators and the log cleaner. Building batches is in ``record_encode``;
reading every record of a produced batch (Kafka's LogValidator) in ``record_checks``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from google_crc32c import value as _crc32c

from shoal.protocol import compression as _compression
from shoal.protocol.errors import CodedError, ErrorCode

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
# varints (zigzag, as Kafka's ByteUtils.readVarint / readVarlong; writing them is in record_encode)


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
