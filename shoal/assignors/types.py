"""Value types shared by every assignor: TopicPartition, Subscription, Assignment, ClusterMetadata.

They mirror the Java client's ``ConsumerPartitionAssignor`` types so that assignor code
ports over with few changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

EAGER = "EAGER"
COOPERATIVE = "COOPERATIVE"

DEFAULT_GENERATION = -1

_NO_RACKS: frozenset[str] = frozenset()


class TopicPartition(NamedTuple):
    """A partition of a topic; hashable and sorts by (topic, partition)."""

    topic: str
    partition: int


@dataclass(slots=True)
class Subscription:
    """What one member sends when joining: its topics, plus data for the assignor.

    ``owned_partitions``, ``generation_id`` and ``rack_id`` travel in the consumer
    protocol blob from v1, v2 and v3 on. ``group_instance_id`` is not in the blob:
    the coordinator knows it from JoinGroup; range and roundrobin order static members
    by it as Java does.
    """

    topics: Sequence[str]
    user_data: bytes | None = None
    owned_partitions: Sequence[TopicPartition] = ()
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None
    group_instance_id: str | None = None


@dataclass(slots=True)
class Assignment:
    """What one member receives: its partitions and optional assignor data."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None


@dataclass(frozen=True)
class ClusterMetadata:
    """The part of cluster metadata an assignor needs.

    ``partitions_per_topic`` maps topic -> partition count. ``partition_racks`` maps
    topic -> a sequence indexed by partition of the racks holding a replica of it
    (all replicas, in or out of the ISR, per KIP-881); topics or partitions left out
    have no known racks.
    """

    partitions_per_topic: Mapping[str, int]
    partition_racks: Mapping[str, Sequence[frozenset[str]]] = field(default_factory=dict)

    @classmethod
    def from_replicas(
        cls,
        replicas: Mapping[str, Sequence[Iterable[int]]],
        node_racks: Mapping[int, str | None],
    ) -> ClusterMetadata:
        """Build from topic -> [replica node ids per partition] and node id -> rack."""
        counts: dict[str, int] = {}
        racks: dict[str, tuple[frozenset[str], ...]] = {}
        for topic, parts in replicas.items():
            counts[topic] = len(parts)
            racks[topic] = tuple(
                frozenset(r for n in nodes if (r := node_racks.get(n)) is not None) for nodes in parts
            )
        return cls(counts, racks)

    def racks(self, topic: str, partition: int) -> frozenset[str]:
        """Racks of the replicas of one partition (empty when unknown)."""
        per = self.partition_racks.get(topic)
        if per is None or partition >= len(per):
            return _NO_RACKS
        return per[partition]

    @property
    def has_racks(self) -> bool:
        """True if any partition has a known replica rack."""
        return any(any(r for r in per) for per in self.partition_racks.values())


def member_sort_key(member_id: str, sub: Subscription) -> tuple[int, str, str]:
    """Java's MemberInfo order: members with a group.instance.id first, by it; then by member id."""
    gid = sub.group_instance_id
    if gid is not None:
        return (0, gid, member_id)
    return (1, member_id, "")
