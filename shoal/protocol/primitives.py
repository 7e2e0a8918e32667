"""Wire primitives shared by the generated codec and the framing code.

Unsigned varints (flexible versions), tagged-field skipping and the errors the
generated decoders raise. Kept tiny and dependency free: generated modules
import these names at module load and call them on the hot path.
"""

from __future__ import annotations

from shoal.protocol.errors import DecodeError, UnsupportedVersionError

__all__ = [
    "DecodeError",
    "UnsupportedVersionError",
    "read_uvarint",
    "skip_tagged_fields",
    "truncated",
    "uvarint_bytes",
]

# One-byte varints are by far the common case (lengths + 1, counts, tags).
_UV_SMALL: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(128))


def uvarint_bytes(value: int) -> bytes:
    """Encode an unsigned varint (LEB128, 7 bits per byte)."""
    if value < 128:
        if value < 0:
            raise ValueError(f"negative unsigned varint {value}")
        return _UV_SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read an unsigned varint at ``pos``; return (value, new_pos)."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        result = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, pos
            shift += 7
            if shift > 63:
                raise DecodeError("varint too long")
    except IndexError:
        raise DecodeError("truncated varint") from None


def skip_tagged_fields(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """Skip a tagged-fields section (count, then tag/size/data triples)."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    if pos > len(buf):
        raise DecodeError("truncated tagged field")
    return pos


def truncated() -> DecodeError:
    """The error a decoder raises when the buffer ends early."""
    return DecodeError("truncated message")


def null_error(field: str) -> DecodeError:
    """The error for a null value in a field that is not nullable in this version."""
    return DecodeError(f"non-nullable field {field} was serialized as null")
