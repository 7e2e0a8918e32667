"""A share group (Kafka's ShareGroup, KIP-932) and its members (ShareGroupMember).

Changed only by replaying records (`replay.py`); the `types.Group` protocol is what offsets and the
admin APIs see of it. A share group has no revocation phase: a member takes its target assignment
at once, so its states are only Empty, Stable (members) and Dead (deleted), as Kafka reports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from uuid import UUID

from shoal.coordinator.group.consumer.member import Partitions
from shoal.coordinator.group.modern import ModernGroup
from shoal.coordinator.group.share import records as R
from shoal.coordinator.group.types import GroupType, OffsetExpiration, TopicPartition
from shoal.coordinator.result import Record
from shoal.protocol.errors import ErrorCode

E = ErrorCode

STABLE_MEMBER_STATE = 0  # Kafka's MemberState.STABLE, the only state a share member is in


class ShareGroupState(Enum):
    """Kafka's ShareGroupState; `.value` is what the describe and list APIs report."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ShareMember:
    """Everything the coordinator holds of a share member; replaced (never mutated) on change."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE_MEMBER_STATE
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Partitions = field(default_factory=dict)

    def metadata_fields(self) -> tuple:
        """What a ShareGroupMemberMetadata record holds: a change here is written as one."""
        return self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names


@dataclass(frozen=True)
class InitializedTopic:
    """A topic of ShareGroupStatePartitionMetadata: its name and the partitions concerned."""

    name: str
    partitions: frozenset[int]


class ShareGroup(ModernGroup):
    """One share group of a shard (a `types.Group`)."""

    States = ShareGroupState
    group_type = GroupType.SHARE

    def __init__(self, group_id: str, epoch: int = 1) -> None:
        # Kafka's ModernGroup starts every group at epoch 1 (0 is a joining member's epoch).
        super().__init__(group_id, epoch)
        self.metadata_hash = 0
        self.assignment_timestamp = 0
        self.members: dict[str, ShareMember] = {}
        # ShareGroupStatePartitionMetadata: topic id -> (name, partitions)
        self.initializing: dict[UUID, InitializedTopic] = {}
        self.initialized: dict[UUID, InitializedTopic] = {}
        self.deleting: dict[UUID, str] = {}

    # ------------------------------------------------------------ changes (from replay only)
    def update_member(self, member: ShareMember) -> None:
        self.members[member.member_id] = member
        self.update_state()

    def remove_member(self, member_id: str) -> None:
        self.members.pop(member_id, None)
        self.update_state()

    def update_state(self) -> None:
        """Kafka's ShareGroup.maybeUpdateGroupState: Empty without members, else Stable."""
        if self.state != ShareGroupState.DEAD:
            self.state = ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    # ------------------------------------------------------------ the Group protocol
    def _not_consumer(self) -> ErrorCode:
        # Kafka 4.4's ShareGroup.validateOffsetCommit/Fetch/Delete throw GroupIdNotFoundException
        # ("Group %s is not a consumer group.").
        return E.GROUP_ID_NOT_FOUND

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int, *,
                               transactional: bool, now_ms: int, api_version: int = 9) -> ErrorCode | None:
        return self._not_consumer()

    def validate_offset_fetch(self, member_id: str | None = None, member_epoch: int = -1) -> ErrorCode | None:
        return self._not_consumer()

    def validate_offset_delete(self, partitions: list[TopicPartition]
                               ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        return self._not_consumer()

    def offset_expiration(self) -> OffsetExpiration | None:
        """A share group has no committed offsets of its own (Kafka: shouldExpire is false)."""
        return None

    def tombstone_records(self) -> list[Record]:
        """Kafka's ShareGroup.createGroupTombstoneRecords, in its order."""
        gid, t = self.group_id, R.tombstone
        records: list[Record] = [t(R.CURRENT_MEMBER_ASSIGNMENT, gid, mid) for mid in self.members]
        records += [t(R.TARGET_ASSIGNMENT_MEMBER, gid, mid) for mid in self.members]
        records.append(t(R.TARGET_ASSIGNMENT_METADATA, gid))
        records += [t(R.MEMBER_METADATA, gid, mid) for mid in self.members]
        return records + [t(R.STATE_PARTITION_METADATA, gid), t(R.GROUP_METADATA, gid)]
