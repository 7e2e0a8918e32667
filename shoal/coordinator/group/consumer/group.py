"""A consumer group (Kafka's ConsumerGroup): members, epochs, target assignment, partition owners.

Changed only by replaying records (`heartbeat.ConsumerGroupManager.replay`); the `types.Group`
protocol is what offsets and the admin APIs see of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from enum import Enum
from uuid import UUID

from shoal.coordinator.group.consumer import records as R
from shoal.coordinator.group.consumer.member import ConsumerMember, Partitions
from shoal.coordinator.group.consumer.topics import TopicMeta
from shoal.coordinator.group.modern import ModernGroup
from shoal.coordinator.group.records import OffsetAndMetadata
from shoal.coordinator.group.types import GroupType, OffsetExpiration, TopicPartition
from shoal.coordinator.result import Record
from shoal.protocol.errors import ErrorCode

E = ErrorCode
NO_OWNER = -1


class ConsumerGroupState(Enum):
    """Kafka's consumer group states; `.value` is what DescribeGroups/ListGroups report."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class ConsumerGroup(ModernGroup):
    """One consumer group of a shard (a `types.Group`)."""

    States = ConsumerGroupState
    group_type = GroupType.CONSUMER

    def __init__(self, group_id: str, epoch: int = 0) -> None:
        super().__init__(group_id, epoch)
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.subscription_metadata: dict[str, TopicMeta] = {}  # subscribed topic name -> metadata
        self.partition_epochs: dict[tuple[UUID, int], int] = {}  # owned partition -> its owner's epoch
        # The members' regexes resolved against the cluster's topics (regex -> topic names), from
        # ConsumerGroupRegularExpression records (key version 16) as Kafka 4.1+ keeps them.
        self.resolved_regexes: dict[str, frozenset[str]] = {}

    # ------------------------------------------------------------ reads
    def member(self, member_id: str) -> ConsumerMember | None:
        return self.members.get(member_id)

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        member_id = None if instance_id is None else self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def current_partition_epoch(self, topic_id: UUID, partition: int) -> int:
        """The epoch of the partition's owner, NO_OWNER (-1) when no member owns it."""
        return self.partition_epochs.get((topic_id, partition), NO_OWNER)

    def target_of(self, member_id: str, instance_id: str | None = None) -> Partitions:
        """A member's target assignment; a static member replacing another gets the other's."""
        if member_id in self.target:
            return self.target[member_id]
        previous = None if instance_id is None else self.static_members.get(instance_id)
        return self.target.get(previous, {}) if previous is not None else {}

    def member_topics(self, member: ConsumerMember,
                      resolved: Mapping[str, frozenset[str]] | None = None) -> frozenset[str]:
        """A member's subscription: its topic names and the topics its regex resolves to."""
        regex = member.subscribed_topic_regex
        if not regex:
            return frozenset(member.subscribed_topic_names)
        table = self.resolved_regexes if resolved is None else resolved
        return frozenset(member.subscribed_topic_names) | table.get(regex, frozenset())

    def subscribed_regexes(self, old: ConsumerMember | None = None, new: ConsumerMember | None = None) -> set[str]:
        """The regexes the members subscribe with, `old`'s replaced by `new`'s."""
        members = [m for m in self.members.values() if old is None or m.member_id != old.member_id]
        if new is not None:
            members.append(new)
        return {m.subscribed_topic_regex for m in members if m.subscribed_topic_regex}

    def preferred_assignor(self, old: ConsumerMember | None = None,
                           new: ConsumerMember | None = None) -> str | None:
        """The server assignor most members name, `old` replaced by `new` (Kafka's
        computePreferredServerAssignor); None when no member names one."""
        counts: Counter[str] = Counter()
        for m in self.members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] += 1
        if old is not None and old.server_assignor is not None:
            counts[old.server_assignor] -= 1
        if new is not None and new.server_assignor is not None:
            counts[new.server_assignor] += 1
        best = [(n, name) for name, n in counts.items() if n > 0]
        return max(best)[1] if best else None

    # ------------------------------------------------------------ changes (from replay only)
    def update_member(self, new: ConsumerMember) -> None:
        old = self.members.get(new.member_id)
        self.members[new.member_id] = new
        if old is not None:
            self._drop_epochs(old)
        self._add_epochs(new)
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        self.update_state()

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._drop_epochs(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self.update_state()

    def _drop_epochs(self, m: ConsumerMember) -> None:
        for partitions in (m.assigned, m.pending_revocation):
            for topic_id, ps in partitions.items():
                for p in ps:
                    if self.partition_epochs.get((topic_id, p)) == m.member_epoch:
                        del self.partition_epochs[(topic_id, p)]

    def _add_epochs(self, m: ConsumerMember) -> None:
        for partitions in (m.assigned, m.pending_revocation):
            for topic_id, ps in partitions.items():
                for p in ps:
                    self.partition_epochs[(topic_id, p)] = m.member_epoch

    def update_state(self) -> None:
        """Kafka's maybeUpdateGroupState."""
        if self.state == ConsumerGroupState.DEAD:
            return
        if not self.members:
            self.state = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            self.state = ConsumerGroupState.ASSIGNING
        elif any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            self.state = ConsumerGroupState.RECONCILING
        else:
            self.state = ConsumerGroupState.STABLE

    # ------------------------------------------------------------ the Group protocol
    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int, *,
                               transactional: bool, now_ms: int, api_version: int = 9) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetCommit: a commit is no heartbeat in this protocol."""
        if self.state == ConsumerGroupState.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and not self.members:
            return None  # an admin client or a consumer outside the group: allowed while Empty
        member = self.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        classic = member.classic is not None  # a classic member of a mixed group (Kafka: useClassicProtocol)
        if not transactional and not classic and api_version < 9:
            return E.UNSUPPORTED_VERSION  # members of the new protocol must commit with v9+
        if generation != member.member_epoch:
            return E.ILLEGAL_GENERATION if classic else E.STALE_MEMBER_EPOCH
        return None

    def validate_offset_fetch(self, member_id: str | None = None, member_epoch: int = -1) -> ErrorCode | None:
        if self.state == ConsumerGroupState.DEAD:
            return E.GROUP_ID_NOT_FOUND
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        return None if member_epoch == member.member_epoch else E.STALE_MEMBER_EPOCH

    def validate_offset_delete(self, partitions: list[TopicPartition]
                               ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        if self.state == ConsumerGroupState.DEAD:
            return E.GROUP_ID_NOT_FOUND
        return {(t, p): E.GROUP_SUBSCRIBED_TO_TOPIC if self.is_subscribed_to_topic(t) else E.NONE
                for t, p in partitions}

    def offset_expiration(self) -> OffsetExpiration | None:
        """From the commit timestamp; offsets of subscribed topics never expire (Kafka)."""
        def committed(om: OffsetAndMetadata) -> int:
            return om.commit_timestamp

        return OffsetExpiration(committed, {t for m in self.members.values() for t in self.member_topics(m)})

    def tombstone_records(self) -> list[Record]:
        """Kafka's createGroupTombstoneRecords, in its order."""
        gid = self.group_id
        records: list[Record] = []
        per_member = [R.remove_member_records(gid, mid) for mid in self.members]
        records += [r[0] for r in per_member]
        records += [r[1] for r in per_member]
        records.append(R.tombstone(R.TARGET_ASSIGNMENT_METADATA, gid))
        records += [r[2] for r in per_member]
        records += [R.regex_tombstone(gid, regex) for regex in sorted(self.resolved_regexes)]
        records += [R.tombstone(R.PARTITION_METADATA, gid), R.group_epoch_tombstone(gid)]
        return records
