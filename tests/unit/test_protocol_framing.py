"""Headers and frames: versions, request header v0/v1/v2, the ApiVersions rule."""

from __future__ import annotations

import struct

import pytest

from shoal.protocol.errors import DecodeError
from shoal.protocol.framing import (
    decode_request_header,
    decode_response_header,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)
from shoal.protocol.generated import API_BY_KEY, API_KEYS
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.api_versions_request import ApiVersionsRequest
from shoal.protocol.generated.metadata_request import MetadataRequest
from shoal.protocol.versioned import decode_versioned, encode_versioned


def test_header_versions() -> None:
    assert request_header_version(API_KEYS["Metadata"], 8) == 1
    assert request_header_version(API_KEYS["Metadata"], 9) == 2
    assert request_header_version(API_KEYS["Fetch"], 11) == 1
    assert request_header_version(API_KEYS["Fetch"], 12) == 2
    assert request_header_version(API_KEYS["ControlledShutdown"], 0) == 0
    assert request_header_version(API_KEYS["ControlledShutdown"], 1) == 1
    assert response_header_version(API_KEYS["Metadata"], 9) == 1
    assert response_header_version(API_KEYS["Metadata"], 8) == 0
    assert response_header_version(API_KEYS["Produce"], 9) == 1
    # ApiVersions responses always use header v0, even for flexible versions.
    for v in range(5):
        assert response_header_version(ApiKey.API_VERSIONS, v) == 0
    assert request_header_version(ApiKey.API_VERSIONS, 3) == 2
    # A newer-than-known version of a flexible API is still flexible.
    assert request_header_version(ApiKey.API_VERSIONS, 99) == 2


def test_api_table() -> None:
    spec = API_BY_KEY[ApiKey.FETCH]
    assert spec.name == "Fetch" and spec.api_key == ApiKey.FETCH and spec.flexible_min == 12
    assert spec.request.__name__ == "FetchRequest" and spec.response.__name__ == "FetchResponse"
    assert (spec.min_version, spec.max_version) == (spec.request.MIN_VERSION, spec.request.MAX_VERSION)
    assert API_BY_KEY[ApiKey.API_VERSIONS].flexible_min == 3 and API_BY_KEY[ApiKey.PRODUCE].name == "Produce"
    assert API_BY_KEY[API_KEYS["ControlledShutdown"]].flexible_min == 3
    for key, s in API_BY_KEY.items():
        assert s.request.API_KEY == key == s.response.API_KEY
        assert s.request.TYPE == "request" and s.response.TYPE == "response"
    assert len(API_BY_KEY) == 91  # the shared schemas' 88, and Kafka 4.x's share-group offsets APIs (90-92)


def _request_frame(header: bytes, body: bytes) -> bytes:
    return struct.pack(">i", len(header) + len(body)) + header + body


def test_decode_request_header_v0() -> None:
    raw = struct.pack(">hhi", ApiKey.CONTROLLED_SHUTDOWN, 0, 99) + b"BODY"
    hdr, off = decode_request_header(raw)
    assert (hdr.request_api_key, hdr.request_api_version, hdr.correlation_id) == (ApiKey.CONTROLLED_SHUTDOWN, 0, 99)
    assert hdr.client_id == "" and raw[off:] == b"BODY"  # absent in v0: the default


def test_decode_request_header_v1() -> None:
    raw = struct.pack(">hhih", ApiKey.METADATA, 8, 5, 3) + b"abc" + b"BODY"
    hdr, off = decode_request_header(raw)
    assert (hdr.request_api_key, hdr.request_api_version, hdr.correlation_id, hdr.client_id) == (
        ApiKey.METADATA,
        8,
        5,
        "abc",
    )
    assert raw[off:] == b"BODY"
    raw = struct.pack(">hhih", ApiKey.METADATA, 8, 5, -1) + b"BODY"
    hdr, off = decode_request_header(raw)
    assert hdr.client_id is None and raw[off:] == b"BODY"


def test_decode_request_header_v2_client_id_is_not_compact() -> None:
    # v2: int16-length client id (never compact), then a tagged-field section.
    raw = struct.pack(">hhih", ApiKey.METADATA, 12, 5, 3) + b"abc" + b"\x00" + b"BODY"
    hdr, off = decode_request_header(raw)
    assert hdr.client_id == "abc" and raw[off:] == b"BODY"
    # with an unknown tagged field in the header
    raw = struct.pack(">hhih", ApiKey.METADATA, 12, 5, 3) + b"abc" + b"\x01\x07\x02zz" + b"BODY"
    hdr, off = decode_request_header(raw)
    assert hdr.client_id == "abc" and raw[off:] == b"BODY"
    with pytest.raises(DecodeError):
        decode_request_header(b"\x00\x03")


def test_encode_request_round_trip() -> None:
    body = MetadataRequest(topics=None).encode(12)
    frame = encode_request(ApiKey.METADATA, 12, 77, "cli", body)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    assert frame[4:] == struct.pack(">hhih", ApiKey.METADATA, 12, 77, 3) + b"cli\x00" + body
    hdr, off = decode_request_header(memoryview(frame)[4:])
    assert hdr.correlation_id == 77 and hdr.client_id == "cli"
    assert MetadataRequest.decode(memoryview(frame)[4 + off :], 12).topics is None
    # non-flexible: header v1 (no tags)
    frame = encode_request(ApiKey.API_VERSIONS, 2, 1, None, b"")
    assert frame == struct.pack(">ihhih", 10, ApiKey.API_VERSIONS, 2, 1, -1)
    # ApiVersions v3 body is flexible; header v2
    body = ApiVersionsRequest(client_software_name="shoal", client_software_version="0.1").encode(3)
    frame = encode_request(ApiKey.API_VERSIONS, 3, 1, "c", body)
    hdr, off = decode_request_header(frame[4:])
    assert ApiVersionsRequest.decode(frame[4 + off :], 3).client_software_name == "shoal"


def test_encode_response_headers() -> None:
    assert encode_response(5, 0, b"xy") == struct.pack(">ii", 6, 5) + b"xy"
    assert encode_response(5, 1, b"xy") == struct.pack(">iib", 7, 5, 0) + b"xy"
    assert decode_response_header(struct.pack(">i", 5) + b"xy", 0) == (5, 4)
    assert decode_response_header(struct.pack(">ib", 5, 0) + b"xy", 1) == (5, 5)
    assert decode_response_header(struct.pack(">ib", 5, 1) + b"\x03\x01z" + b"xy", 1) == (5, 8)
    with pytest.raises(DecodeError):
        decode_response_header(b"\x00", 0)


def test_versioned_data_records() -> None:
    from shoal.protocol.generated.consumer_protocol_subscription import ConsumerProtocolSubscription
    from shoal.protocol.generated.offset_commit_key import OffsetCommitKey
    from shoal.protocol.generated.offset_commit_value import OffsetCommitValue

    key = OffsetCommitKey(group="g", topic="t", partition=3)
    data = encode_versioned(key, 1)
    assert data == b"\x00\x01" + b"\x00\x01g\x00\x01t\x00\x00\x00\x03"
    assert decode_versioned(OffsetCommitKey, data) == (key, 1)
    val = OffsetCommitValue(offset=10, leader_epoch=2, metadata="m", commit_timestamp=123)
    assert decode_versioned(OffsetCommitValue, encode_versioned(val, 3)) == (val, 3)
    with pytest.raises(Exception):  # noqa: B017 - version 9 is unknown for offsets
        decode_versioned(OffsetCommitValue, b"\x00\x09" + val.encode(3))
    # consumer protocol: newer versions decode with the latest layout
    sub = ConsumerProtocolSubscription(topics=["a"], rack_id="r1", generation_id=4)
    newer = b"\x00\x07" + sub.encode(3) + b"future-bytes"
    got, version = decode_versioned(ConsumerProtocolSubscription, newer, newer_as_latest=True)
    assert version == 7 and got == sub
