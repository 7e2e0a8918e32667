"""Round trip every generated message at every version with populated values
(``tests/unit/protocol_samples.populated``: a non-default value in every field of the version)."""

from __future__ import annotations

import random
import uuid

import pytest

from shoal.protocol import codegen
from shoal.protocol.errors import DecodeError, UnsupportedVersionError
from shoal.protocol.generated import MODULES, message_class
from tests.unit.protocol_samples import SPECS, populated, primitive


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
            obj = cls(**{f.attr: primitive(f.elem, random.Random(name), codegen.default_value(f))})
            if f.is_array:
                obj = cls(**{f.attr: [primitive(f.elem, random.Random(name), None)]})
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
