"""A share group (Kafka's ShareGroup, KIP-932) and its members (ShareGroupMember).

Changed only by replaying records (`replay.py`); the `types.Group` protocol is what offsets and the
admin APIs see of it. A share group has no revocation phase: a member takes its target assignment
at once, so its states are only Empty, Stable (members) and Dead (deleted), as Kafka reports them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from uuid import UUID

from shoal.coordinator.group.consumer.member import Partitions
from shoal.coordinator.group.share import records as R
from shoal.coordinator.group.types import GroupType, OffsetExpiration, TopicPartition
from shoal.coordinator.result import Record
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.describe_groups_response import DescribeGroupsResponse
from shoal.protocol.generated.list_groups_response import ListGroupsResponse

E = ErrorCode
SHARE_PROTOCOL_TYPE = "share"

# Member epochs with a meaning (Kafka's ShareGroupHeartbeatRequest constants).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
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


class ShareGroup:
    """One share group of a shard (a `types.Group`)."""

    def __init__(self, group_id: str, epoch: int = 1) -> None:
        # Kafka's ModernGroup starts every group at epoch 1 (0 is a joining member's epoch).
        self.group_id = group_id
        self.group_epoch = epoch
        self.metadata_hash = 0
        self.assignment_epoch = epoch
        self.assignment_timestamp = 0
        self.state = ShareGroupState.EMPTY
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, Partitions] = {}  # member id -> target assignment
        # ShareGroupStatePartitionMetadata: topic id -> (name, partitions)
        self.initializing: dict[UUID, InitializedTopic] = {}
        self.initialized: dict[UUID, InitializedTopic] = {}
        self.deleting: dict[UUID, str] = {}

    # ------------------------------------------------------------ reads
    def subscribed_topic_names(self, old: ShareMember | None = None, new: ShareMember | None = None) -> set[str]:
        """The topics the members subscribe to, `old`'s subscription replaced by `new`'s."""
        counts: Counter[str] = Counter()
        for m in self.members.values():
            counts.update(m.subscribed_topic_names)
        if old is not None:
            counts.subtract(old.subscribed_topic_names)
        if new is not None:
            counts.update(new.subscribed_topic_names)
        return {t for t, n in counts.items() if n > 0}

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return any(topic in m.subscribed_topic_names for m in self.members.values())

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

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
    @property
    def type(self) -> GroupType:
        return GroupType.SHARE

    @property
    def state_name(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return self.state == ShareGroupState.EMPTY

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

    def validate_delete_group(self) -> ErrorCode | None:
        """Kafka's ShareGroup.validateDeleteGroup: Dead is not found, members make it non-empty."""
        if self.state == ShareGroupState.DEAD:
            return E.GROUP_ID_NOT_FOUND
        return None if self.state == ShareGroupState.EMPTY else E.NON_EMPTY_GROUP

    def offset_expiration(self) -> OffsetExpiration | None:
        """A share group has no committed offsets of its own (Kafka: shouldExpire is false)."""
        return None

    def tombstone_records(self) -> list[Record]:
        """Kafka's ShareGroup.createGroupTombstoneRecords, in its order."""
        gid = self.group_id
        records: list[Record] = [R.current_assignment_tombstone(gid, mid) for mid in self.members]
        records += [R.target_assignment_tombstone(gid, mid) for mid in self.members]
        records.append(R.target_epoch_tombstone(gid))
        records += [R.member_metadata_tombstone(gid, mid) for mid in self.members]
        records.append(R.state_partition_metadata_tombstone(gid))
        records.append(R.group_epoch_tombstone(gid))
        return records

    def describe(self) -> DescribeGroupsResponse.DescribedGroup:
        """DescribeGroups (the classic API) does not describe share groups: answered as for a group
        of another type (the consumer group type does the same), Dead without an error."""
        return DescribeGroupsResponse.DescribedGroup(error_code=0, group_id=self.group_id,
                                                     group_state=ShareGroupState.DEAD.value,
                                                     protocol_type="", protocol_data="", members=[])

    def list_entry(self) -> ListGroupsResponse.ListedGroup | None:
        if self.state == ShareGroupState.DEAD:
            return None
        return ListGroupsResponse.ListedGroup(group_id=self.group_id, protocol_type=SHARE_PROTOCOL_TYPE,
                                              group_state=self.state.value, group_type=self.type.value)
