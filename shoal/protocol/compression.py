"""Record-batch compression codecs (Kafka attribute bits 0-2), backed by cramjam.

Codec ids follow Kafka: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

Wire details that differ from "just call the library":

- snappy: the Java client writes the *xerial* framing (SnappyOutputStream: a
  16-byte header ``\\x82SNAPPY\\x00`` + version 1 + compatible version 1, then
  blocks of ``int32 BE length + raw snappy``). librdkafka reads both xerial and
  raw snappy, and writes raw. We write xerial (like Java) so every client can
  read us, and read both.
- lz4: the LZ4 *frame* format (KIP-57), with independent blocks because the
  Java reader (KafkaLZ4BlockInputStream) rejects linked blocks.
- zstd: a standard zstd frame; frames without a content size (what streaming
  compressors such as zstd-jni write) decode fine.
- gzip: RFC 1952; several concatenated members decode as one stream.
"""

from __future__ import annotations

import struct

import cramjam

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_BY_NAME = {name: codec for codec, name in CODEC_NAMES.items()}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
# SnappyOutputStream's default block size.
XERIAL_BLOCK_SIZE = 32 * 1024

_BE_INT32 = struct.Struct(">i")


class CompressionError(ValueError):
    """Raised when a payload cannot be (de)compressed or the codec is unknown."""


def codec_from_name(name: str) -> int:
    """Map a Kafka ``compression.type`` value ("gzip", "lz4", ...) to a codec id."""
    try:
        return CODEC_BY_NAME[name.lower()]
    except KeyError:
        raise CompressionError(f"unknown compression type {name!r}") from None


def xerial_snappy_compress(
    data: bytes | bytearray | memoryview, block_size: int = XERIAL_BLOCK_SIZE
) -> bytes:
    """Compress with snappy in the xerial block framing the Java client writes."""
    mv = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(mv), block_size):
        block = bytes(cramjam.snappy.compress_raw(mv[start : start + block_size]))
        parts.append(_BE_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def snappy_decompress(data: bytes | bytearray | memoryview, limit: int | None = None) -> bytes:
    """Decompress raw snappy or xerial-framed snappy (detected by its magic); the result is at
    most ``limit`` bytes (else CompressionError), checked before anything is decompressed."""
    mv = memoryview(data)
    total = 0

    def check(block: memoryview) -> None:
        nonlocal total
        if limit is not None:
            total += cramjam.snappy.decompress_raw_len(block)
            if total > limit:
                raise CompressionError(f"decompressed size exceeds {limit} bytes")

    if len(mv) >= 16 and mv[:8] == XERIAL_MAGIC:
        out = []
        pos = 16
        end = len(mv)
        while pos < end:
            if pos + 4 > end:
                raise CompressionError("truncated xerial snappy block header")
            (n,) = _BE_INT32.unpack_from(mv, pos)
            pos += 4
            if n < 0 or pos + n > end:
                raise CompressionError("truncated xerial snappy block")
            check(mv[pos : pos + n])
            out.append(bytes(cramjam.snappy.decompress_raw(mv[pos : pos + n])))
            pos += n
        return b"".join(out)
    check(mv)
    return bytes(cramjam.snappy.decompress_raw(mv))


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32_short(data: bytes) -> int:
    """xxHash32 (seed 0) of fewer than 16 bytes: what an LZ4 frame descriptor's checksum needs."""
    h = (_P5 + len(data)) & _M32
    i = 0
    while i + 4 <= len(data):
        h = (_rotl((h + int.from_bytes(data[i:i + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    for b in data[i:]:
        h = (_rotl((h + b * _P5) & _M32, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def lz4_fix_header_checksum(data: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
    """Kafka before 0.10 wrote LZ4 frames whose descriptor checksum also covered the magic number
    (KAFKA-3160); magic-0 messages still carry them. Recompute it so a standard reader accepts
    the frame (Kafka's reader ignores it for magic 0)."""
    if len(data) < 7 or bytes(data[:4]) != b"\x04\x22\x4d\x18":
        return data
    flg = data[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)  # content size, dictionary id
    if len(data) <= end:
        return data
    fixed = bytearray(data)
    fixed[end] = (_xxh32_short(bytes(fixed[4:end])) >> 8) & 0xFF
    return fixed


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` with a Kafka codec id; ``level`` None means the codec default."""
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.compress(data, level=6 if level is None else level))
        if codec == SNAPPY:
            return xerial_snappy_compress(data)
        if codec == LZ4:
            c = cramjam.lz4.Compressor(level=level, block_linked=False)
            c.compress(bytes(data))  # the streaming API takes bytes only
            return bytes(c.finish())
        if codec == ZSTD:
            return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))
    except cramjam.CompressionError as e:
        raise CompressionError(f"{CODEC_NAMES.get(codec, codec)} compression failed: {e}") from e
    raise CompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview, limit: int | None = None) -> bytes | bytearray:
    """Decompress ``data`` written with Kafka codec id ``codec``.

    With ``limit``, memory stays bounded whatever the payload claims: a result longer than
    ``limit`` bytes raises CompressionError instead of being built (a few KB of zeros compress
    to gigabytes).
    """
    try:
        if codec == NONE:
            return bytes(data)
        if codec == SNAPPY:
            return snappy_decompress(data, limit)
        if codec in (GZIP, LZ4, ZSTD):
            module = {GZIP: cramjam.gzip, LZ4: cramjam.lz4, ZSTD: cramjam.zstd}[codec]
            if limit is None:
                return bytes(module.decompress(data))
            return _decompress_bounded(module, data, limit)
    except cramjam.DecompressionError as e:
        raise CompressionError(f"{CODEC_NAMES.get(codec, codec)} decompression failed: {e}") from e
    raise CompressionError(f"unknown compression codec {codec}")


def _decompress_bounded(module, data: bytes | bytearray | memoryview, limit: int) -> bytearray:
    # cramjam writes into a buffer it cannot grow: start from a size most payloads fit in and
    # grow it fourfold, never past the limit.
    size = min(limit, max(8 * len(data), 1 << 18))
    while True:
        out = bytearray(size)
        try:
            n = module.decompress_into(data, out)
        except cramjam.DecompressionError as e:
            if "whole buffer" not in str(e):  # corrupt data, not a full buffer
                raise
            if size >= limit:
                raise CompressionError(f"decompressed size exceeds {limit} bytes") from e
            size = min(limit, size * 4)
            continue
        del out[n:]
        return out
