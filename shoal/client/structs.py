"""Plain value types the client hands to and receives from applications."""

from __future__ import annotations

from typing import NamedTuple

from shoal.assignors.types import TopicPartition

__all__ = [
    "TopicPartition",
    "OffsetAndMetadata",
    "RecordMetadata",
    "ConsumerRecord",
    "ConsumerGroupMetadata",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
]

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1


class OffsetAndMetadata(NamedTuple):
    """A committed (or to-be-committed) offset: the next offset to consume."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class RecordMetadata(NamedTuple):
    """Where a produced record landed."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1


class ConsumerRecord(NamedTuple):
    """One record returned by ``poll``."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's group membership, for ``send_offsets_to_transaction`` (KIP-447 fencing)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
