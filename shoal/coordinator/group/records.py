"""`__consumer_offsets` records in Kafka's formats.

Key   = int16 key version + key struct  (OffsetCommitKey: version 1, GroupMetadataKey: version 2)
Value = int16 value version + value struct, or None for a tombstone.

Versions written are the ones Kafka 3.x/4.x writes (GroupCoordinatorRecordHelpers):
OffsetCommitValue v1 when an expire timestamp is set, else v3; GroupMetadataValue v3.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shoal.coordinator.result import Record
from shoal.protocol.generated.group_metadata_key import GroupMetadataKey
from shoal.protocol.generated.group_metadata_value import GroupMetadataValue
from shoal.protocol.generated.offset_commit_key import OffsetCommitKey
from shoal.protocol.generated.offset_commit_value import OffsetCommitValue

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
NO_PARTITION_LEADER_EPOCH = -1

_H = struct.Struct(">h")


@dataclass(slots=True, frozen=True)
class OffsetAndMetadata:
    """A committed offset as the coordinator holds it."""

    offset: int
    leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None


def offset_commit_value_version(has_expire_timestamp: bool) -> int:
    """Kafka writes v1 (which has ExpireTimestamp) only when one is set, else v3."""
    return 1 if has_expire_timestamp else 3


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _H.pack(OFFSET_COMMIT_KEY_VERSION) + OffsetCommitKey(
        group=group, topic=topic, partition=partition
    ).encode(OFFSET_COMMIT_KEY_VERSION)


def offset_commit_value(om: OffsetAndMetadata) -> bytes:
    version = offset_commit_value_version(om.expire_timestamp is not None)
    value = OffsetCommitValue(
        offset=om.offset,
        leader_epoch=om.leader_epoch,
        metadata=om.metadata,
        commit_timestamp=om.commit_timestamp,
        expire_timestamp=-1 if om.expire_timestamp is None else om.expire_timestamp,
    )
    return _H.pack(version) + value.encode(version)


def offset_commit_record(group: str, topic: str, partition: int, om: OffsetAndMetadata) -> tuple[bytes, bytes]:
    return offset_commit_key(group, topic, partition), offset_commit_value(om)


def offset_commit_tombstone(group: str, topic: str, partition: int) -> tuple[bytes, None]:
    return offset_commit_key(group, topic, partition), None


def group_metadata_key(group: str) -> bytes:
    return _H.pack(GROUP_METADATA_KEY_VERSION) + GroupMetadataKey(group=group).encode(
        GROUP_METADATA_KEY_VERSION
    )


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    return _H.pack(GROUP_METADATA_VALUE_VERSION) + value.encode(GROUP_METADATA_VALUE_VERSION)


def group_metadata_tombstone(group: str) -> tuple[bytes, None]:
    return group_metadata_key(group), None


# ---------------------------------------------------------------- the KIP-848 and share group records
class TypedRecords:
    """The records of a consumer or share group type: each record type (the key version) maps to
    (key class, value class, the name of the key's field after the group id, if any: ``member_id``,
    or ``regular_expression`` for a consumer group's regex record). Values are written at data
    version 0 (all of them are in Kafka 4.4) and read at the version they carry."""

    def __init__(self, types: dict[int, tuple[Any, Any, str | None]]) -> None:
        self.types = types

    def key(self, record_type: int, group_id: str, second: str | None = None) -> bytes:
        cls, _, field = self.types[record_type]
        key = cls(group_id=group_id, **({field: second} if field else {}))
        return _H.pack(record_type) + key.encode(record_type)

    def record(self, record_type: int, group_id: str, value: Any, second: str | None = None) -> Record:
        return self.key(record_type, group_id, second), _H.pack(0) + value.encode(0)

    def tombstone(self, record_type: int, group_id: str, second: str | None = None) -> Record:
        return self.key(record_type, group_id, second), None

    def decode_key(self, key: bytes | memoryview) -> tuple[int, str, str | None]:
        """(record type, group id, the key's second field or None)."""
        record_type = _H.unpack_from(key, 0)[0]
        cls, _, field = self.types[record_type]
        k = cls.decode(memoryview(key)[2:], record_type)
        return record_type, k.group_id, (getattr(k, field) if field else None)

    def decode_value(self, record_type: int, value: bytes | memoryview) -> Any:
        _, cls, _ = self.types[record_type]
        return cls.decode(memoryview(value)[2:], _H.unpack_from(value, 0)[0])


def sorted_pairs(partitions: Mapping[Any, Iterable[int]]) -> list[tuple[Any, list[int]]]:
    """(topic id, sorted partitions) pairs in topic-id order, topics without partitions left out."""
    return [(t, sorted(ps)) for t, ps in sorted(partitions.items(), key=lambda kv: str(kv[0])) if ps]


def topic_partitions(cls: Any, partitions: Mapping[Any, Iterable[int]]) -> list[Any]:
    """``partitions`` as a message's list of ``cls(topic_id, partitions)``, as `sorted_pairs` orders them."""
    return [cls(topic_id=t, partitions=ps) for t, ps in sorted_pairs(partitions)]


# ---------------------------------------------------------------- decoding
def key_version(key: bytes | memoryview) -> int:
    return _H.unpack_from(key, 0)[0]


def decode_offset_commit_key(key: bytes | memoryview) -> OffsetCommitKey:
    version = _H.unpack_from(key, 0)[0]
    return OffsetCommitKey.decode(memoryview(key)[2:], version)


def decode_group_metadata_key(key: bytes | memoryview) -> GroupMetadataKey:
    return GroupMetadataKey.decode(memoryview(key)[2:], GROUP_METADATA_KEY_VERSION)


def decode_offset_commit_value(value: bytes | memoryview) -> OffsetAndMetadata:
    version = _H.unpack_from(value, 0)[0]
    v = OffsetCommitValue.decode(memoryview(value)[2:], version)
    expire = v.expire_timestamp if version == 1 and v.expire_timestamp != -1 else None
    return OffsetAndMetadata(
        offset=v.offset,
        leader_epoch=v.leader_epoch if version >= 3 else NO_PARTITION_LEADER_EPOCH,
        metadata=v.metadata,
        commit_timestamp=v.commit_timestamp,
        expire_timestamp=expire,
    )


def decode_group_metadata_value(value: bytes | memoryview) -> tuple[int, GroupMetadataValue]:
    version = _H.unpack_from(value, 0)[0]
    return version, GroupMetadataValue.decode(memoryview(value)[2:], version)
