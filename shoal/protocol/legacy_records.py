"""Message sets in the message formats before v2 (magic 0 and 1), for old request versions.

Produce v0-v2 carry message sets; Fetch v0-v3 must answer with them (v0-v1 magic 0, v2-v3
magic 1). shoal stores only v2 record batches, so, as Kafka 3.x did, produced message sets are
converted up to one v2 batch on append, and fetched batches are converted down to messages.

A message set is a sequence of ``offset int64, size int32, message``; a message is
``crc uint32, magic int8, attributes int8, [timestamp int64 (magic 1)], key bytes, value bytes``
with a CRC-32 (IEEE) over everything after the CRC. Attributes bits 0-2 are the compression
codec; a compressed message (a "wrapper") holds a whole inner message set in its value. In magic
1 the inner offsets are relative (0..n-1) and bit 3 is the timestamp type.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from typing import NamedTuple

from shoal.protocol import compression as _compression
from shoal.protocol.record_batch import CorruptRecordError, InvalidRecordError

_ENTRY = struct.Struct(">qi")  # offset, message size
_HEAD = struct.Struct(">Ibb")  # crc, magic, attributes
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
NO_TIMESTAMP = -1
MIN_MESSAGE_V0 = 14  # crc, magic, attributes, key length, value length
LOG_APPEND_TIME = 0x08


class LegacyMessage(NamedTuple):
    offset: int
    magic: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None


def _bytes_field(buf: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError("message is truncated")
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise CorruptRecordError("message is truncated")
    return bytes(buf[pos:pos + n]), pos + n


def parse_message_set(data: bytes | bytearray | memoryview, *, max_decompressed: int = 1 << 30,
                      allow_partial: bool = False, _depth: int = 0) -> tuple[list[LegacyMessage], int]:
    """The messages of a message set (wrappers opened: their inner messages, with absolute
    offsets), and the codec of the first wrapper (0 if none). Raises CorruptRecordError for a
    bad CRC, size or truncation (a partial last entry is ignored with ``allow_partial``),
    InvalidRecordError for what Kafka refuses (a magic above 1, a zstd wrapper, a nested one)."""
    buf = memoryview(data)
    end = len(buf)
    pos = 0
    out: list[LegacyMessage] = []
    codec_seen = 0
    while pos < end:
        stop = _entry_end(buf, pos, end, allow_partial)
        if stop is None:
            break
        message, codec = _read_message(buf, pos, stop)
        if codec == _compression.NONE:
            out.append(message)
        else:
            if _depth:
                raise InvalidRecordError("a compressed message inside a compressed message")
            out.extend(_unwrap(message, codec, max_decompressed))
            codec_seen = codec_seen or codec
        pos = stop
    return out, codec_seen


def _entry_end(buf: memoryview, pos: int, end: int, allow_partial: bool) -> int | None:
    """Where the entry at ``pos`` ends; None for a partial last entry when ``allow_partial``."""
    if end - pos < _ENTRY.size:
        if allow_partial:
            return None
        raise CorruptRecordError("message set ends with a partial entry")
    _, size = _ENTRY.unpack_from(buf, pos)
    start = pos + _ENTRY.size
    if size < MIN_MESSAGE_V0:
        raise CorruptRecordError(f"message size {size} is below the minimum")
    if start + size > end:
        if allow_partial:
            return None
        raise CorruptRecordError("message set ends with a partial message")
    return start + size


def _read_message(buf: memoryview, pos: int, stop: int) -> tuple[LegacyMessage, int]:
    """The message of the entry at ``pos`` (ending at ``stop``), CRC checked, and its codec."""
    (offset,) = _I64.unpack_from(buf, pos)
    start = pos + _ENTRY.size
    crc, magic, attributes = _HEAD.unpack_from(buf, start)
    if magic not in (0, 1):
        raise InvalidRecordError(f"message magic {magic} inside a message set")
    if zlib.crc32(buf[start + 4:stop]) != crc:
        raise CorruptRecordError(f"message at offset {offset} fails its CRC")
    p = start + _HEAD.size
    timestamp = NO_TIMESTAMP
    if magic == 1:
        if p + 8 > stop:
            raise CorruptRecordError("message is truncated")
        (timestamp,) = _I64.unpack_from(buf, p)
        p += 8
    key, p = _bytes_field(buf, p, stop)
    value, p = _bytes_field(buf, p, stop)
    if p != stop:
        raise CorruptRecordError(f"message at offset {offset} has {stop - p} bytes left over")
    ts_type = 1 if magic == 1 and attributes & LOG_APPEND_TIME else 0
    return LegacyMessage(offset, magic, timestamp, ts_type, key, value), attributes & 0x07


def _unwrap(wrapper: LegacyMessage, codec: int, max_decompressed: int) -> list[LegacyMessage]:
    """The inner messages of a compressed message, with absolute offsets (and the wrapper's
    log append time, if it has one)."""
    magic, value = wrapper.magic, wrapper.value
    if codec >= _compression.ZSTD:
        raise InvalidRecordError(f"compression codec {codec} in a message format {magic} message")
    if value is None:
        raise CorruptRecordError("a compressed message without a value")
    if codec == _compression.LZ4 and magic == 0:
        value = _compression.lz4_fix_header_checksum(value)
    try:
        inner_data = _compression.decompress(codec, value, max_decompressed)
    except _compression.CompressionError as e:
        raise InvalidRecordError(str(e)) from None
    inner, _ = parse_message_set(inner_data, max_decompressed=max_decompressed, _depth=1)
    if magic == 1 and inner:  # relative inner offsets: the wrapper has the last one
        base = wrapper.offset - inner[-1].offset
        inner = [m._replace(offset=base + m.offset) for m in inner]
    if wrapper.timestamp_type == 1:  # the wrapper's log append time applies to every inner message
        inner = [m._replace(timestamp=wrapper.timestamp, timestamp_type=1) for m in inner]
    return inner


def encode_message(offset: int, magic: int, timestamp: int, timestamp_type: int,
                   key: bytes | None, value: bytes | None) -> bytes:
    """One uncompressed message-set entry."""
    body = bytearray(struct.pack(">bb", magic, LOG_APPEND_TIME if magic == 1 and timestamp_type == 1 else 0))
    if magic == 1:
        body += _I64.pack(timestamp)
    for field in (key, value):
        if field is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(field))
            body += field
    crc = zlib.crc32(body)
    return _ENTRY.pack(offset, len(body) + 4) + struct.pack(">I", crc) + bytes(body)


def encode_message_set(messages: Iterable[LegacyMessage], magic: int) -> bytes:
    return b"".join(encode_message(m.offset, magic, m.timestamp if magic == 1 else NO_TIMESTAMP,
                                   m.timestamp_type, m.key, m.value) for m in messages)
