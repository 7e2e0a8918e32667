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
def typed_key(record_types: dict, record_type: int, group_id: str, second: str | None = None) -> bytes:
    """A modern group record's key: its type (the key version) then the key's fields; ``record_types``
    maps a type to (key class, value class, the name of the key's field after the group id, if any:
    ``member_id``, or ``regular_expression`` for a consumer group's regex record)."""
    cls, _, field = record_types[record_type]
    key = cls(group_id=group_id, **({field: second} if field else {}))
    return _H.pack(record_type) + key.encode(record_type)


def typed_value(message: Any, version: int = 0) -> bytes:
    """A modern group record's value at its data version (0 for all of them in Kafka 4.4)."""
    return _H.pack(version) + message.encode(version)


def sorted_pairs(partitions: Mapping[Any, Iterable[int]]) -> list[tuple[Any, list[int]]]:
    """(topic id, sorted partitions) pairs in topic-id order, topics without partitions left out."""
    return [(t, sorted(ps)) for t, ps in sorted(partitions.items(), key=lambda kv: str(kv[0])) if ps]


def typed_decode_key(record_types: dict, key: bytes | memoryview) -> tuple[int, str, str | None]:
    """(record type, group id, the key's second field or None) of a modern group record's key."""
    record_type = _H.unpack_from(key, 0)[0]
    cls, _, field = record_types[record_type]
    k = cls.decode(memoryview(key)[2:], record_type)
    return record_type, k.group_id, (getattr(k, field) if field else None)


def typed_decode_value(record_types: dict, record_type: int, value: bytes | memoryview) -> Any:
    """A modern group record's value, decoded at the data version it carries."""
    _, cls, _ = record_types[record_type]
    return cls.decode(memoryview(value)[2:], _H.unpack_from(value, 0)[0])


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
