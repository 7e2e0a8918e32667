"""The interface of the server-side assignors (KIP-848): what the group coordinator hands an
assignor and what it gets back. Re-exported by `shoal.assignors.server`; see its docstring.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol
from uuid import UUID

Assignment = dict[UUID, frozenset[int]]  # topic id -> partitions of one member


class SubscriptionType(Enum):
    """Whether every member subscribes to the same topics (Kafka picks its builder by this)."""

    HOMOGENEOUS = "HOMOGENEOUS"
    HETEROGENEOUS = "HETEROGENEOUS"


@dataclass(frozen=True)
class MemberSpec:
    """One member as an assignor sees it: its subscription, rack, and current target assignment."""

    subscribed_topic_ids: frozenset[UUID]
    rack_id: str | None = None
    instance_id: str | None = None
    assigned: Mapping[UUID, frozenset[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicSpec:
    """A subscribed topic: its partition count and, per partition, the racks of its replicas."""

    name: str
    num_partitions: int
    partition_racks: Mapping[int, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupSpec:
    """The members of a group, by member id.

    The assignors do not depend on the mapping's order: Kafka's iterate members in an order of
    their own (sorted member ids, or static members by instance id for `range`), and so do ours.
    """

    members: Mapping[str, MemberSpec]

    @property
    def subscription_type(self) -> SubscriptionType:
        """HOMOGENEOUS when every member subscribes to the same topics (unknown ones included, as
        Kafka computes it from subscribed topic names)."""
        subscriptions = {m.subscribed_topic_ids for m in self.members.values()}
        return SubscriptionType.HOMOGENEOUS if len(subscriptions) <= 1 else SubscriptionType.HETEROGENEOUS


class ServerAssignor(Protocol):
    """A server-side assignor: `name` is what `group.remote.assignor` and
    `group.consumer.assignors` call it."""

    name: str

    def assign(self, group: GroupSpec, topics: Mapping[UUID, TopicSpec]) -> dict[str, Assignment]:
        """Every member's target assignment: each partition of a subscribed topic to exactly one
        member subscribed to it; members without partitions map to {}."""
        ...
