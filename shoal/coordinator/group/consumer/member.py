"""A member of a consumer group (Kafka's ConsumerGroupMember) and its reconciliation states."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any
from uuid import UUID

Partitions = dict[UUID, frozenset[int]]  # topic id -> partitions

# Member epochs with a meaning (Kafka's ConsumerGroupHeartbeatRequest constants).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(IntEnum):
    """Where a member is in its reconciliation; the value is the one records store."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ClassicMeta:
    """What a member using the classic protocol inside a consumer group adds (Kafka's
    ClassicMemberMetadata): its session timeout and its (protocol name, metadata) list."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(slots=True)
class ConsumerMember:
    """Everything the coordinator holds of a member; replaced (never mutated in place) on change."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    classic: ClassicMeta | None = None  # set for a member speaking the classic protocol

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == target_epoch

    def subscription_fields(self) -> tuple:
        """What a ConsumerGroupMemberMetadata record holds: a change here is written as one."""
        return (self.instance_id, self.rack_id, self.rebalance_timeout_ms, self.client_id, self.client_host,
                self.subscribed_topic_names, self.subscribed_topic_regex, self.server_assignor, self.classic)


def partitions_equal(a: Partitions, b: Partitions) -> bool:
    """Equal assignments, an empty partition set counting as absent."""
    return {t: p for t, p in a.items() if p} == {t: p for t, p in b.items() if p}


def partitions_of(topic_partitions: list[Any]) -> Partitions:
    """A record's list of (topic id, partitions) as Partitions."""
    out: Partitions = {}
    for tp in topic_partitions:
        if tp.partitions:
            out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out
