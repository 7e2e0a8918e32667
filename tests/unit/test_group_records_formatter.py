"""Record formats of `__consumer_offsets` and the console-formatter output."""

from __future__ import annotations

import struct

from shoal.coordinator.group.consumer import records as consumer_records
from shoal.coordinator.group.consumer.member import ClassicMeta, ConsumerMember
from shoal.coordinator.group.formatter import (
    format_group_metadata_record,
    format_offset_record,
    format_record,
)
from shoal.coordinator.group.records import (
    OffsetAndMetadata,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_tombstone,
    group_metadata_value,
    offset_commit_record,
    offset_commit_tombstone,
)
from shoal.protocol.generated.group_metadata_value import GroupMetadataValue


def test_offset_commit_record_bytes_are_kafkas() -> None:
    key, value = offset_commit_record("g", "t", 3, OffsetAndMetadata(2130, 7, "", 1538843128354))
    # key: int16 version 1, then string group, string topic, int32 partition
    assert key == struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3)
    # value v3: offset int64, leader epoch int32, metadata string, commit timestamp int64
    assert value == struct.pack(">hqih", 3, 2130, 7, 0) + struct.pack(">q", 1538843128354)
    _, v1 = offset_commit_record("g", "t", 3, OffsetAndMetadata(1, -1, "m", 5, 10))
    assert v1 == struct.pack(">hqh", 1, 1, 1) + b"m" + struct.pack(">qq", 5, 10)
    assert decode_offset_commit_value(v1) == OffsetAndMetadata(1, -1, "m", 5, 10)


def test_group_metadata_key_version_2() -> None:
    assert group_metadata_key("grp") == struct.pack(">hh", 2, 3) + b"grp"


def test_offsets_formatter() -> None:
    key, value = offset_commit_record("group", "topic", 3,
                                      OffsetAndMetadata(2130, -1, "", 1538843128354, 1539447928354))
    assert format_offset_record(key, value) == (
        "[group,topic,3]::[OffsetMetadata[2130,NO_METADATA],CommitTime 1538843128354,ExpirationTime 1539447928354]")
    key, value = offset_commit_record("group", "topic", 0, OffsetAndMetadata(5, 1, "meta", 10))
    assert format_offset_record(key, value) == "[group,topic,0]::[OffsetMetadata[5,meta],CommitTime 10,ExpirationTime -1]"
    assert format_offset_record(*offset_commit_tombstone("group", "topic", 3)) == "[group,topic,3]::NULL"
    assert format_offset_record(*group_metadata_tombstone("group")) is None


def test_group_metadata_formatter() -> None:
    value = GroupMetadataValue(
        protocol_type="consumer", generation=1, protocol="range", leader="m1", current_state_timestamp=5,
        members=[GroupMetadataValue.MemberMetadata(
            member_id="m1", group_instance_id=None, client_id="consumer-1", client_host="/127.0.0.1",
            rebalance_timeout=300000, session_timeout=10000, subscription=b"", assignment=b"")],
    )
    line = format_group_metadata_record(group_metadata_key("g"), group_metadata_value(value))
    assert line == (
        "g::GroupMetadata(groupId=g, generation=1, protocolType=Some(consumer), currentState=Stable, "
        "members=Map(m1 -> MemberMetadata(memberId=m1, groupInstanceId=None, clientId=consumer-1, "
        "clientHost=/127.0.0.1, sessionTimeoutMs=10000, rebalanceTimeoutMs=300000, supportedProtocols=List(range))))")
    empty = GroupMetadataValue(protocol_type="consumer", generation=2, protocol=None, leader=None, members=[])
    assert format_record(group_metadata_key("g"), group_metadata_value(empty)) == (
        "g::GroupMetadata(groupId=g, generation=2, protocolType=Some(consumer), currentState=Empty, members=Map())")
    assert format_record(*group_metadata_tombstone("g")) == "g::NULL"


# A ConsumerGroupMemberMetadata value as Kafka 4.4 wrote it to its __consumer_offsets for a librdkafka
# member subscribed by regex: its tagged ClassicMemberMetadata (tag 0) holds a varint 0, "null".
KAFKA_MEMBER_VALUE = bytes.fromhex(
    "000000000872646b61666b610b2f3132372e302e302e310109285e72782d2e2a29000493e00001000100")


def test_kafkas_consumer_member_record_decodes_and_prints() -> None:
    key = consumer_records.tombstone(consumer_records.MEMBER_METADATA, "g-rx", "m1")[0]
    v = consumer_records.decode_value(consumer_records.MEMBER_METADATA, KAFKA_MEMBER_VALUE)
    assert (v.client_id, v.subscribed_topic_regex, v.rebalance_timeout_ms, v.classic_member_metadata) == (
        "rdkafka", "(^rx-.*)", 300000, None)
    assert consumer_records.classic_meta_of(v) is None
    line = format_record(key, KAFKA_MEMBER_VALUE)
    assert line is not None and '"subscribedTopicRegex":"(^rx-.*)"' in line and "classicMember" not in line


def test_a_consumer_members_record_is_byte_for_byte_kafkas() -> None:
    member = ConsumerMember("m1", client_id="rdkafka", client_host="/127.0.0.1", subscribed_topic_regex="(^rx-.*)",
                            rebalance_timeout_ms=300000)
    assert consumer_records.member_subscription_record("g-rx", member)[1] == KAFKA_MEMBER_VALUE


def test_a_classic_members_metadata_round_trips() -> None:
    classic = ClassicMeta(45000, (("range", b"\x00\x01"),))
    member = ConsumerMember("m1", client_id="c", client_host="/h", subscribed_topic_names=("t",), classic=classic)
    value = consumer_records.member_subscription_record("g", member)[1]
    decoded = consumer_records.decode_value(consumer_records.MEMBER_METADATA, value)
    assert consumer_records.classic_meta_of(decoded) == classic
    # shoal before this fix wrote a null ClassicMemberMetadata as the byte 0xff: still read as null
    old = KAFKA_MEMBER_VALUE[:-1] + b"\xff"
    assert consumer_records.decode_value(consumer_records.MEMBER_METADATA, old).classic_member_metadata is None
