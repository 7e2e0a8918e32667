"""Plain value types the client hands to and receives from applications."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import NamedTuple, TypeVar

from shoal.assignors.types import TopicPartition

__all__ = [
    "TopicPartition",
    "OffsetAndMetadata",
    "RecordMetadata",
    "ConsumerRecord",
    "ConsumerGroupMetadata",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "by_topic",
]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

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


def by_topic(items: Iterable[tuple[tuple[K, int], V]]) -> dict[K, list[V]]:
    """``(partition, value)`` pairs grouped by the partition's topic (name or id), in order."""
    out: dict[K, list[V]] = {}
    for tp, value in items:
        out.setdefault(tp[0], []).append(value)
    return out
