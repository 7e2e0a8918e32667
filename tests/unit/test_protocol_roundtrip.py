"""Round trip every generated message at every version with populated values.

``populated(...)`` walks the JSON schema (through the code generator's own
parser) and fills every field present in a version with a non-default value,
including nested arrays, nullable values and tagged fields. The differential
test against kafka-python reuses it.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from shoal.protocol import codegen
from shoal.protocol.codegen import FieldSpec, MessageSpec
from shoal.protocol.errors import DecodeError, UnsupportedVersionError
from shoal.protocol.generated import MODULES, message_class

SPECS: dict[str, MessageSpec] = {s.name: s for s in codegen.load_all()}

_INT_RANGES = {
    "int8": (-128, 127),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_ALPHABET = "abcxyz-_.09ÉéßΩ漢字🙂"


def _primitive(t: str, rng: random.Random, default: object) -> Any:
    while True:
        if t == "bool":
            v: Any = not default
        elif t in _INT_RANGES:
            lo, hi = _INT_RANGES[t]
            v = rng.choice([rng.randint(lo, hi), rng.randint(max(lo, -5), min(hi, 300)), lo, hi])
        elif t == "float64":
            v = rng.uniform(-1e9, 1e9)
        elif t == "string":
            v = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 12)))
        elif t in ("bytes", "records"):
            v = rng.randbytes(rng.choice([1, 5, 40, 200]))
        elif t == "uuid":
            v = uuid.UUID(int=rng.getrandbits(128) | 1)
        else:
            raise AssertionError(t)
        if v != default:
            return v


def _field_present(spec: MessageSpec, f: FieldSpec, v: int) -> bool:
    if f.tag is not None:
        return v in spec.flexible and v in f.tagged
    return v in f.versions


def populated(spec: MessageSpec, version: int, rng: random.Random, struct_name: str | None = None) -> Any:
    """An instance of ``spec``'s class (or one of its structs) with non-default values for ``version``."""
    top = message_class(spec.name)
    st = spec.root if struct_name is None else spec.structs[struct_name]
    cls = top if struct_name is None else getattr(top, struct_name)
    kwargs: dict[str, Any] = {}
    for f in st.fields:
        if not _field_present(spec, f, version):
            continue
        default = codegen.default_value(f)
        nullable = version in f.nullable
        # A null is a non-default value only where the default is not null.
        if nullable and default is not None and rng.random() < 0.3:
            kwargs[f.attr] = None
            continue
        if f.is_array:
            n = rng.randint(1, 3)
            if f.is_struct:
                kwargs[f.attr] = [populated(spec, version, rng, f.elem) for _ in range(n)]
            else:
                kwargs[f.attr] = [_primitive(f.elem, rng, None) for _ in range(n)]
        elif f.is_struct:
            kwargs[f.attr] = populated(spec, version, rng, f.elem)
        else:
            kwargs[f.attr] = _primitive(f.type, rng, default)
    return cls(**kwargs)


def all_cases() -> list[tuple[str, int]]:
    return [(name, v) for name in sorted(SPECS) for v in range(SPECS[name].valid.hi + 1)]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_round_trip_every_version(name: str) -> None:
    spec = SPECS[name]
    cls = message_class(name)
    assert cls.MAX_VERSION == spec.valid.hi and cls.MIN_VERSION == spec.valid.lo
    for v in range(spec.valid.hi + 1):
        for seed in range(3):
            rng = random.Random(f"{name}/{v}/{seed}")
            obj = populated(spec, v, rng)
            data = obj.encode(v)
            back = cls.decode(data, v)
            assert back == obj, f"{name} v{v}: {back!r} != {obj!r}"
            assert back.encode(v) == data
            # bytes-like inputs decode the same
            assert cls.decode(memoryview(data), v) == obj
            assert cls.decode(bytearray(data), v) == obj
            # decode_from honours a start offset and reports the end
            again, end = cls.decode_from(b"\x07\x07" + data, 2, v)
            assert again == obj and end == len(data) + 2


@pytest.mark.parametrize("name", sorted(SPECS))
def test_truncated_input_raises_decode_error(name: str) -> None:
    spec = SPECS[name]
    cls = message_class(name)
    for v in range(spec.valid.hi + 1):
        data = populated(spec, v, random.Random(f"trunc/{name}/{v}")).encode(v)
        for cut in sorted({0, 1, len(data) // 2, len(data) - 1}):
            if cut < 0 or cut >= len(data):
                continue
            try:
                cls.decode(data[:cut], v)
            except DecodeError:
                continue
            # A prefix may itself be a complete message only when trailing fields
            # are all varint/tag sections; never silently wrong otherwise.
            pytest.fail(f"{name} v{v}: truncated to {cut}/{len(data)} bytes decoded without error")


def test_non_ignorable_field_absent_in_version_raises() -> None:
    checked = 0
    for name, spec in sorted(SPECS.items()):
        cls = message_class(name)
        for f in spec.root.fields:
            if f.ignorable or f.is_struct or f.tag is not None:
                continue
            absent = [v for v in range(spec.valid.hi + 1) if v not in f.versions]
            if not absent:
                continue
            obj = cls(**{f.attr: _primitive(f.elem, random.Random(name), codegen.default_value(f))})
            if f.is_array:
                obj = cls(**{f.attr: [_primitive(f.elem, random.Random(name), None)]})
            with pytest.raises(UnsupportedVersionError):
                obj.encode(absent[0])
            checked += 1
    assert checked > 20


def test_ignorable_field_absent_in_version_is_dropped() -> None:
    from shoal.protocol.generated.offset_commit_value import OffsetCommitValue

    v = OffsetCommitValue(offset=5, leader_epoch=9, metadata="m", commit_timestamp=7, expire_timestamp=11)
    back = OffsetCommitValue.decode(v.encode(3), 3)
    assert back.leader_epoch == 9 and back.expire_timestamp == -1


def test_unsupported_version() -> None:
    from shoal.protocol.generated.fetch_request import FetchRequest

    with pytest.raises(UnsupportedVersionError):
        FetchRequest().encode(FetchRequest.MAX_VERSION + 1)
    with pytest.raises(UnsupportedVersionError):
        FetchRequest.decode(b"", -1)


def test_defaults_and_naming() -> None:
    from shoal.protocol.generated.fetch_request import FetchPartition, FetchRequest, FetchTopic
    from shoal.protocol.generated.join_group_request import JoinGroupRequest

    assert FetchRequest.FetchTopic is FetchTopic and FetchRequest.FetchPartition is FetchPartition
    r = FetchRequest()
    assert r.replica_id == -1 and r.max_wait_ms == 0 and r.topics == [] and r.isolation_level == 0
    assert r.cluster_id is None and r.topics is not FetchRequest().topics  # fresh lists
    assert FetchPartition().log_start_offset == -1
    assert FetchTopic().topic_id == uuid.UUID(int=0)
    j = JoinGroupRequest()
    assert j.group_instance_id is None and j.rebalance_timeout_ms == -1
    assert MODULES["FetchRequest"] == "fetch_request"


def test_records_decode_zero_copy() -> None:
    from shoal.protocol.generated.produce_request import ProduceRequest

    req = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"\x01\x02\x03")],
            )
        ],
    )
    for v in (3, 9, 11):
        data = req.encode(v)
        recs = ProduceRequest.decode(data, v).topic_data[0].partition_data[0].records
        assert isinstance(recs, memoryview) and bytes(recs) == b"\x01\x02\x03"


def test_nullable_struct_marker() -> None:
    from shoal.protocol.generated.describe_topic_partitions_response import (
        DescribeTopicPartitionsResponse as R,
    )

    assert R(next_cursor=None).encode(0).endswith(b"\xff\x00")
    with_cursor = R(next_cursor=R.Cursor(topic_name="a", partition_index=3))
    data = with_cursor.encode(0)
    assert b"\x01\x02a\x00\x00\x00\x03\x00" in data
    assert R.decode(data, 0) == with_cursor


def test_bad_utf8_is_decode_error() -> None:
    from shoal.protocol.generated.offset_commit_key import OffsetCommitKey

    with pytest.raises(DecodeError):
        OffsetCommitKey.decode(b"\x00\x01\xff\x00\x00\x00\x00\x00\x00", 1)
