"""Versioned encoding of "data" messages: an int16 version, then the body.

This is how Kafka stores its internal records (OffsetCommitKey/Value,
GroupMetadataKey/Value, TransactionLogKey/Value, ...) and how the consumer
protocol blobs (ConsumerProtocolSubscription/Assignment) travel inside
JoinGroup/SyncGroup.
"""

from __future__ import annotations

import struct
from typing import Any, Protocol, TypeVar

from shoal.protocol.errors import DecodeError, UnsupportedVersionError

__all__ = ["decode_versioned", "encode_versioned"]

_H = struct.Struct(">h")


class _Message(Protocol):
    MAX_VERSION: int

    def encode_into(self, out: bytearray, version: int) -> None: ...


T = TypeVar("T")


def encode_versioned(obj: _Message, version: int) -> bytes:
    """int16 ``version`` followed by ``obj`` encoded at that version."""
    out = bytearray(_H.pack(version))
    obj.encode_into(out, version)
    return bytes(out)


def decode_versioned(
    cls: type[T], buf: bytes | bytearray | memoryview, *, newer_as_latest: bool = False
) -> tuple[T, int]:
    """Read the int16 version then the body; return (message, version).

    ``newer_as_latest``: decode versions above ``cls.MAX_VERSION`` with the
    latest known layout (Kafka's rule for the consumer protocol blobs, whose
    newer versions only append fields). Otherwise such versions raise
    ``UnsupportedVersionError``.
    """
    try:
        (version,) = _H.unpack_from(buf, 0)
    except struct.error:
        raise DecodeError("truncated version prefix") from None
    c: Any = cls
    use = version
    if version > c.MAX_VERSION and newer_as_latest:
        use = c.MAX_VERSION
    if version < 0:
        raise UnsupportedVersionError(f"{c.__name__} version {version}")
    obj, _end = c.decode_from(buf, 2, use)
    return obj, version
