"""Differential test: shoal's codec against kafka-python 3.0.12 (a test-only oracle).

For every message kafka-python also defines and every version both know, a
seeded populated instance is encoded by both libraries from the same field
values: the bytes must be identical, and each library decodes the other's.
"""

from __future__ import annotations

import importlib
import pkgutil
import random
from typing import Any

import pytest

kafka_protocol = pytest.importorskip("kafka.protocol")
from kafka.protocol.api_data import ApiData  # noqa: E402
from kafka.protocol.api_message import ApiMessage  # noqa: E402

from shoal.protocol.codegen import snake  # noqa: E402
from shoal.protocol.generated import message_class  # noqa: E402
from tests.unit.protocol_samples import SPECS, populated  # noqa: E402

SEEDS = 4


def _kafka_python_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or info.name.endswith("generate_stubs"):
            continue
        try:
            mod = importlib.import_module(info.name)
        except Exception:  # some optional modules need extras; not the ones we compare
            continue
        for name, obj in vars(mod).items():
            if (
                isinstance(obj, type)
                and issubclass(obj, (ApiMessage, ApiData))
                and obj not in (ApiMessage, ApiData)
                and name in SPECS
                and getattr(obj, "_json", None) is not None
            ):
                found[name] = obj
    return found


KP = _kafka_python_classes()

REQUIRED = [
    "ApiVersionsRequest", "ApiVersionsResponse", "MetadataRequest", "MetadataResponse",
    "ProduceRequest", "ProduceResponse", "FetchRequest", "FetchResponse",
    "ListOffsetsRequest", "ListOffsetsResponse", "FindCoordinatorRequest", "FindCoordinatorResponse",
    "JoinGroupRequest", "JoinGroupResponse", "SyncGroupRequest", "SyncGroupResponse",
    "HeartbeatRequest", "HeartbeatResponse", "LeaveGroupRequest", "LeaveGroupResponse",
    "OffsetCommitRequest", "OffsetCommitResponse", "OffsetFetchRequest", "OffsetFetchResponse",
    "DescribeGroupsRequest", "DescribeGroupsResponse", "ListGroupsRequest", "ListGroupsResponse",
    "CreateTopicsRequest", "CreateTopicsResponse", "DeleteTopicsRequest", "DeleteTopicsResponse",
    "CreatePartitionsRequest", "CreatePartitionsResponse", "DescribeConfigsRequest",
    "DescribeConfigsResponse", "DescribeClusterRequest", "DescribeClusterResponse",
    "InitProducerIdRequest", "InitProducerIdResponse",
    "ConsumerProtocolSubscription", "ConsumerProtocolAssignment",
]  # fmt: skip


def _kp_unstable_max(cls: type) -> bool:
    return bool(cls._json.get("latestVersionUnstable", False))


def _versions(name: str) -> list[int]:
    spec = SPECS[name]
    kp = KP[name]
    hi = min(spec.valid.hi, kp._struct._versions[1] if hasattr(kp._struct, "_versions") else spec.valid.hi)
    hi = min(hi, kp.max_version)
    if spec.latest_unstable and hi == spec.valid.hi or _kp_unstable_max(kp) and hi == kp.max_version:
        hi -= 1
    return list(range(0, hi + 1))


def to_kp(kp_struct: Any, obj: Any, version: int, top: type | None = None) -> Any:
    """Build the kafka-python object with the same field values as a shoal object."""
    vals: dict[str, Any] = {}
    for f in kp_struct.fields.values():
        bitfield = f._json["type"] == "bitfield"
        # kafka-python renames its authorized-operations fields to bitfields (sets
        # of bit numbers).
        attr = snake(f._json["name"])
        if bitfield:
            attr = next(a for a in obj._FIELDS if a.endswith("authorized_operations"))
        if not f.for_version_q(version) or not hasattr(obj, attr):
            continue
        val = getattr(obj, attr)
        if bitfield:
            val = {b for b in range(32) if (val >> b) & 1}
        elif f.is_struct():
            val = None if val is None else to_kp(f, val, version)
        elif f.is_struct_array():
            val = None if val is None else [to_kp(f, x, version) for x in val]
        elif isinstance(val, memoryview):
            val = bytes(val)
        vals[f.name] = val
    if top is not None:
        return top(version=version, **vals)
    return kp_struct.data_class(**vals)


def _kp_encode(cls: type, obj: Any, version: int) -> bytes:
    if issubclass(cls, ApiData):
        return obj.encode(version=version, header=False)
    obj._header = None  # decoded ApiMessage objects lack it
    return obj.encode(version=version)


def _kp_decode(cls: type, data: bytes, version: int) -> Any:
    if issubclass(cls, ApiData):
        return cls.decode(data, version=version, header=False)
    # The generic body decoder: kafka-python's ApiVersionsResponse.decode reads any
    # error response as v0 (a client-side rule, not the wire format under test).
    return ApiMessage.decode.__func__(cls, data, version=version)


def test_required_messages_present() -> None:
    missing = [n for n in REQUIRED if n not in KP]
    assert not missing, missing
    assert len(KP) >= 90


@pytest.mark.parametrize("name", sorted(KP))
def test_same_bytes_as_kafka_python(name: str) -> None:
    spec = SPECS[name]
    cls = message_class(name)
    kp = KP[name]
    versions = _versions(name)
    assert versions, name
    for v in versions:
        for seed in range(SEEDS):
            obj = populated(spec, v, random.Random(f"kp/{name}/{v}/{seed}"))
            ours = obj.encode(v)
            theirs = _kp_encode(kp, to_kp(kp._struct, obj, v, top=kp), v)
            assert ours == theirs, f"{name} v{v} seed {seed}: bytes differ\n{obj!r}"
            # each decodes the other's bytes
            assert cls.decode(theirs, v) == obj
            back = _kp_decode(kp, ours, v)
            assert _kp_encode(kp, back, v) == ours


@pytest.mark.parametrize(
    "name", ["ApiVersionsRequest", "MetadataRequest", "FetchRequest", "JoinGroupRequest"]
)
def test_request_frames_match_kafka_python(name: str) -> None:
    from shoal.protocol.framing import decode_request_header, encode_request

    cls = message_class(name)
    kp = KP[name]
    for v in _versions(name):
        obj = populated(SPECS[name], v, random.Random(f"frame/{name}/{v}"))
        ours = encode_request(cls.API_KEY, v, 12345, "client-é", obj.encode(v))
        theirs_obj = to_kp(kp._struct, obj, v, top=kp)
        theirs_obj.with_header(correlation_id=12345, client_id="client-é")
        theirs = theirs_obj.encode(version=v, header=True, framed=True)
        assert ours == bytes(theirs), f"{name} v{v}"
        hdr, off = decode_request_header(memoryview(ours)[4:])
        assert (hdr.request_api_key, hdr.request_api_version, hdr.correlation_id) == (cls.API_KEY, v, 12345)
        assert hdr.client_id == "client-é" and cls.decode(memoryview(ours)[4 + off :], v) == obj


@pytest.mark.parametrize("name", ["ApiVersionsResponse", "MetadataResponse", "FetchResponse"])
def test_response_frames_decode_in_kafka_python(name: str) -> None:
    from shoal.protocol.framing import encode_response, response_header_version

    cls = message_class(name)
    kp = KP[name]
    for v in _versions(name):
        obj = populated(SPECS[name], v, random.Random(f"rframe/{name}/{v}"))
        if name == "ApiVersionsResponse":
            obj.error_code = 0  # kafka-python reads error responses as v0
        frame = encode_response(777, response_header_version(cls.API_KEY, v), obj.encode(v))
        back = kp.decode(frame, version=v, header=True, framed=True)
        assert back.header.correlation_id == 777
        back._header = None
        assert bytes(back.encode(version=v)) == obj.encode(v)
