"""Request/response framing: size prefix and headers.

A Kafka frame is ``int32 size`` followed by a header and the message body.
Request header v0 (ControlledShutdown v0 only): api_key, api_version,
correlation_id; v1 adds a nullable int16-length client_id; v2 adds a tagged
fields section (client_id stays a classic int16 string so old brokers can read
any ApiVersions request). Response header v0 is the correlation id; v1 adds
tagged fields. ApiVersions responses always use response header v0.
"""

from __future__ import annotations

import struct

from shoal.protocol.errors import DecodeError
from shoal.protocol.generated import FLEXIBLE_MIN_BY_KEY
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.request_header import RequestHeader
from shoal.protocol.primitives import skip_tagged_fields

__all__ = [
    "decode_request_header",
    "decode_response_header",
    "encode_request",
    "encode_response",
    "request_header_version",
    "response_header_version",
    "start_request",
]

_I32 = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_SIZE_CORR = struct.Struct(">ii")
_SIZE_CORR_TAGS = struct.Struct(">iiB")


def _is_flexible(api_key: int, api_version: int) -> bool:
    flex = FLEXIBLE_MIN_BY_KEY.get(api_key)
    return flex is not None and api_version >= flex


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version: 2 if the API version is flexible, else 1 (ControlledShutdown v0: 0)."""
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if _is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version: 1 if flexible, else 0; ApiVersions responses are always 0."""
    if api_key == ApiKey.API_VERSIONS:
        # Kafka keeps v0 so a client that sent a too-new version can still parse the error.
        return 0
    return 1 if _is_flexible(api_key, api_version) else 0


def decode_request_header(buf: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Decode the header of a request (``buf`` starts after the size prefix).

    Reads api_key and api_version first, then the header version they imply.
    An unknown api key is decoded as header v1 (key, version, correlation id,
    client id) so the caller can still answer or close. Returns the header and
    the offset at which the body starts.
    """
    try:
        api_key, api_version = _KEY_VERSION.unpack_from(buf, 0)
    except struct.error:
        raise DecodeError("truncated request header") from None
    hv = request_header_version(api_key, api_version)
    return RequestHeader.decode_from(buf, 0, hv)


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: bytes | bytearray | memoryview,
) -> bytes:
    """A complete request frame: size prefix, header of the right version, body."""
    out = start_request(api_key, api_version, correlation_id, client_id)
    out += body
    return bytes(finish_frame(out))


def start_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> bytearray:
    """A size placeholder and the request header; append the body (with ``encode_into``, so a
    Produce request's records are copied once), then call ``finish_frame``."""
    hv = request_header_version(api_key, api_version)
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id if hv >= 1 else None,
    )
    out = bytearray(4)
    header.encode_into(out, hv)
    return out


def encode_response(correlation_id: int, header_version: int, body: bytes | bytearray | memoryview) -> bytes:
    """A complete response frame: size prefix, response header, body."""
    out = start_response(correlation_id, header_version)
    out += body
    return bytes(finish_frame(out))


def start_response(correlation_id: int, header_version: int) -> bytearray:
    """A size placeholder and the response header; append the body (e.g. with
    ``encode_into``, so records are copied once), then call ``finish_frame``."""
    if header_version == 0:
        return bytearray(_SIZE_CORR.pack(0, correlation_id))
    if header_version == 1:
        # v1 = correlation id + empty tagged-fields section
        return bytearray(_SIZE_CORR_TAGS.pack(0, correlation_id, 0))
    raise ValueError(f"unknown response header version {header_version}")


def finish_frame(out: bytearray) -> bytearray:
    """Write the size prefix of a frame built from ``start_response``."""
    _I32.pack_into(out, 0, len(out) - 4)
    return out


def decode_response_header(buf: bytes | bytearray | memoryview, header_version: int) -> tuple[int, int]:
    """Decode a response header (``buf`` starts after the size prefix): (correlation_id, body_offset)."""
    try:
        (correlation_id,) = _I32.unpack_from(buf, 0)
    except struct.error:
        raise DecodeError("truncated response header") from None
    if header_version == 0:
        return correlation_id, 4
    if header_version == 1:
        return correlation_id, skip_tagged_fields(buf, 4)
    raise ValueError(f"unknown response header version {header_version}")
