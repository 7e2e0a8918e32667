"""Subscription/Assignment blobs: round trips v0-v3, other clients' encodings, forward compatibility."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.assignors import Assignment, Subscription, TopicPartition
from shoal.assignors.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

TP = TopicPartition


def _str(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def _tps(groups: list[tuple[str, list[int]]]) -> bytes:
    out = struct.pack(">i", len(groups))
    for t, ps in groups:
        out += _str(t) + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    return out


FULL = Subscription(
    ["t0", "t1"],
    user_data=b"ud",
    owned_partitions=[TP("t0", 0), TP("t1", 2), TP("t0", 1)],
    generation_id=7,
    rack_id="rack-a",
)


def test_subscription_v3_round_trip_and_layout() -> None:
    buf = encode_subscription(FULL)
    expected = (
        struct.pack(">h", 3)
        + struct.pack(">i", 2)
        + _str("t0")
        + _str("t1")
        + _bytes(b"ud")
        + _tps([("t0", [0, 1]), ("t1", [2])])
        + struct.pack(">i", 7)
        + _str("rack-a")
    )
    assert buf == expected
    back = decode_subscription(buf)
    assert back.topics == ["t0", "t1"] and back.user_data == b"ud"
    assert back.owned_partitions == [TP("t0", 0), TP("t0", 1), TP("t1", 2)]
    assert (back.generation_id, back.rack_id) == (7, "rack-a")


@pytest.mark.parametrize(
    "version,owned,gen,rack",
    [
        (0, [], -1, None),
        (1, [TP("t0", 0), TP("t0", 1), TP("t1", 2)], -1, None),
        (2, [TP("t0", 0), TP("t0", 1), TP("t1", 2)], 7, None),
        (3, [TP("t0", 0), TP("t0", 1), TP("t1", 2)], 7, "rack-a"),
    ],
)
def test_subscription_each_version_keeps_its_fields(
    version: int, owned: list, gen: int, rack: str | None
) -> None:
    buf = encode_subscription(FULL, version)
    assert buf[:2] == struct.pack(">h", version)
    back = decode_subscription(buf)
    assert (back.topics, back.user_data, list(back.owned_partitions), back.generation_id, back.rack_id) == (
        ["t0", "t1"],
        b"ud",
        owned,
        gen,
        rack,
    )


def test_assignment_round_trip_all_versions() -> None:
    a = Assignment([TP("t1", 3), TP("t0", 0), TP("t1", 4)], user_data=b"\x00\x01")
    for v in range(4):
        buf = encode_assignment(a, v)
        assert buf == struct.pack(">h", v) + _tps([("t1", [3, 4]), ("t0", [0])]) + _bytes(b"\x00\x01")
        assert decode_assignment(buf) == Assignment([TP("t1", 3), TP("t1", 4), TP("t0", 0)], b"\x00\x01")
    assert decode_assignment(encode_assignment(Assignment([]))) == Assignment([], None)


def test_bad_versions_rejected() -> None:
    with pytest.raises(ValueError):
        encode_subscription(FULL, 4)
    with pytest.raises(ValueError):
        encode_assignment(Assignment([]), -1)
    with pytest.raises(ValueError):
        decode_subscription(b"\xff\xff" + b"\x00" * 8)
    with pytest.raises(ValueError):
        decode_subscription(b"\x00")
    with pytest.raises(ValueError):
        decode_subscription(struct.pack(">hi", 0, 5) + _str("t0"))  # 5 topics announced, 1 present


def test_newer_version_decoded_as_v3_ignoring_trailing_bytes() -> None:
    body = encode_subscription(FULL, 3)[2:]
    future = struct.pack(">h", 9) + body + b"\x01\x02\x03 some future field"
    back = decode_subscription(future)
    assert back.generation_id == 7 and back.rack_id == "rack-a" and back.user_data == b"ud"
    abody = encode_assignment(Assignment([TP("t", 1)], b"u"), 3)[2:]
    assert decode_assignment(struct.pack(">h", 5) + abody + b"\xde\xad") == Assignment([TP("t", 1)], b"u")


def test_librdkafka_subscription_layout() -> None:
    # librdkafka writes v3 with empty (not null) UserData, an owned-partitions array and a null rack.
    buf = (
        struct.pack(">h", 3)
        + struct.pack(">i", 1)
        + _str("orders")
        + _bytes(b"")
        + _tps([("orders", [2, 0])])
        + struct.pack(">i", 12)
        + _str(None)
    )
    s = decode_subscription(buf)
    assert s.topics == ["orders"] and s.user_data == b""
    assert s.owned_partitions == [TP("orders", 2), TP("orders", 0)]
    assert s.generation_id == 12 and s.rack_id is None


def test_short_bodies_from_old_clients() -> None:
    # Old librdkafka: Assignment without the trailing UserData; a header version above the fields sent.
    old = struct.pack(">h", 0) + _tps([("t", [0, 1])])
    assert decode_assignment(old) == Assignment([TP("t", 0), TP("t", 1)], None)
    v1_fields_v3_header = (
        struct.pack(">h", 3) + struct.pack(">i", 1) + _str("t") + _bytes(None) + _tps([("t", [4])])
    )
    s = decode_subscription(v1_fields_v3_header)
    assert s.owned_partitions == [TP("t", 4)] and s.generation_id == -1 and s.rack_id is None
    assert decode_assignment(b"") == Assignment([])


def test_kafka_python_and_aiokafka_encodings() -> None:
    from aiokafka.protocol.group import MemberAssignment, ProtocolMetadata
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KAsg
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KSub

    kbuf = KSub(
        version=3,
        topics=["a", "b"],
        user_data=b"xy",
        owned_partitions=[("a", [0, 1])],
        generation_id=5,
        rack_id="r1",
    ).encode()
    s = decode_subscription(kbuf)
    assert (s.topics, s.user_data, s.owned_partitions, s.generation_id, s.rack_id) == (
        ["a", "b"],
        b"xy",
        [TP("a", 0), TP("a", 1)],
        5,
        "r1",
    )
    assert encode_subscription(s) == kbuf
    kasg = KAsg(version=0, assigned_partitions=[("a", [0, 2])], user_data=None).encode()
    assert decode_assignment(kasg) == Assignment([TP("a", 0), TP("a", 2)], None)
    assert encode_assignment(Assignment([TP("a", 0), TP("a", 2)]), 0) == kasg

    s = decode_subscription(ProtocolMetadata(0, ["a", "b"], b"").encode())
    assert s.topics == ["a", "b"] and s.user_data == b"" and s.owned_partitions == []
    a = decode_assignment(MemberAssignment(0, [("a", [0, 2])], b"").encode())
    assert a == Assignment([TP("a", 0), TP("a", 2)], b"")


_topic = st.text(alphabet="abcxyz-_.0123456789", min_size=1, max_size=12)


@given(
    topics=st.lists(_topic, max_size=5),
    user_data=st.one_of(st.none(), st.binary(max_size=40)),
    owned=st.lists(st.tuples(_topic, st.integers(0, 2**31 - 1)), max_size=10, unique=True),
    gen=st.integers(-1, 2**31 - 1),
    rack=st.one_of(st.none(), _topic),
)
def test_subscription_round_trip_property(topics, user_data, owned, gen, rack) -> None:
    sub = Subscription(topics, user_data, [TP(t, p) for t, p in owned], gen, rack)
    back = decode_subscription(encode_subscription(sub))
    assert back.topics == topics and back.user_data == user_data
    assert back.generation_id == gen and back.rack_id == rack
    # Grouped by topic on the wire: same partitions, topic order of first appearance.
    assert sorted(back.owned_partitions) == sorted(sub.owned_partitions)
