"""A classic group: members, generation, leader, protocol (Kafka's ClassicGroup)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from shoal.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from shoal.coordinator.group.member import ClassicMember
from shoal.coordinator.group.protocol_vote import select_protocol
from shoal.coordinator.group.records import OffsetAndMetadata, group_metadata_tombstone
from shoal.coordinator.group.state import GroupState, check_transition
from shoal.coordinator.group.types import GroupBase, GroupType, OffsetExpiration, TopicPartition
from shoal.coordinator.result import Record
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.describe_groups_response import DescribeGroupsResponse
from shoal.protocol.generated.group_metadata_value import GroupMetadataValue
from shoal.protocol.generated.list_groups_response import ListGroupsResponse

log = logging.getLogger(__name__)
E = ErrorCode
S = GroupState
# (group, member, now_ms): the member showed it is alive (a commit counts as a heartbeat).
KeepAlive = Callable[["ClassicGroup", ClassicMember, int], None]


class ClassicGroup(GroupBase):
    """State of one classic group (a `types.Group`). Pure data plus the rules that only touch it."""

    States = GroupState
    group_type = GroupType.CLASSIC

    def __init__(self, group_id: str, now_ms: int | None, state: GroupState = GroupState.EMPTY,
                 keep_alive: KeepAlive | None = None) -> None:
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        # insertion-ordered: the first remaining member becomes leader.
        self.members: dict[str, ClassicMember] = {}
        self.pending_members: set[str] = set()
        self.static_members: dict[str, str] = {}  # group_instance_id -> member_id
        self.pending_sync_members: set[str] = set()
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.keep_alive = keep_alive

    # ------------------------------------------------------------ state
    def transition_to(self, target: GroupState, now_ms: int | None) -> None:
        check_transition(self.group_id, self.state, target)
        log.info("[GroupId %s] Transitioned from %s to %s.", self.group_id, self.state.value, target.value)
        self.state = target
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # ------------------------------------------------------------ members
    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add_member(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def remove_member(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync_members.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A known instance id now held by a different member id."""
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member: ClassicMember) -> ClassicMember:
        """Swap `old_member_id` for `new_member`, keeping position, leadership, assignment."""
        old = self.members[old_member_id]
        items = [(new_member.member_id if k == old_member_id else k, new_member if k == old_member_id else v)
                 for k, v in self.members.items()]
        self.members = dict(items)
        new_member.assignment = old.assignment
        self.static_members[group_instance_id] = new_member.member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member.member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member.member_id)
        return old

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count() and not self.pending_members

    def maybe_elect_new_joined_leader(self) -> bool:
        """Kafka's maybeElectNewJoinedLeader: make sure the leader is a member that rejoined.

        A static leader that did not rejoin stays a member, but cannot run the
        assignment: the first member that did rejoin takes over. False if no
        member rejoined (or there is no leader).
        """
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is None:
            return False
        if leader.is_awaiting_join:
            return True
        for m in self.members.values():
            if m.is_awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def not_yet_rejoined_members(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------ protocols
    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        """Kafka's supportsProtocols: can a member with these protocols join?"""
        if self.state == GroupState.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        if protocol_type != (self.protocol_type or ""):
            return False
        n = len(self.members)
        counts: dict[str, int] = {}
        for m in self.members.values():
            for name in set(m.protocol_names()):
                counts[name] = counts.get(name, 0) + 1
        return any(counts.get(name, 0) == n for name in protocol_names)

    def select_protocol(self) -> str:
        if not self.members:
            raise ValueError("cannot select a protocol for an empty group")
        return select_protocol([m.protocol_names() for m in self.members.values()])

    def compute_subscribed_topics(self) -> set[str] | None:
        """Union of members' subscribed topics for consumer-protocol groups, else None."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                parsed = subscribed_topics(m.metadata(self.protocol_name))
            except KeyError:
                return None
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        """Bump the generation; pick the protocol; CompletingRebalance or Empty."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members = set(self.members)

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """(member_id, group_instance_id, metadata of the chosen protocol) for the leader."""
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    # ------------------------------------------------------------ records
    def metadata_value(self, assignment: dict[str, bytes]) -> GroupMetadataValue:
        """The GroupMetadata record's value for the members and `assignment`."""
        ts = self.current_state_timestamp
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "", generation=self.generation_id, protocol=self.protocol_name,
            leader=self.leader_id, current_state_timestamp=-1 if ts is None else ts, members=[
                GroupMetadataValue.MemberMetadata(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms, subscription=m.metadata(self.protocol_name or ""),
                    assignment=assignment.get(m.member_id, b""))
                for m in self.members.values()])

    def replay_metadata(self, version: int, v: GroupMetadataValue) -> None:
        """Apply a GroupMetadata record: members (kept objects for known ids), generation, Stable/Empty."""
        self.protocol_type = v.protocol_type or None
        self.generation_id = v.generation
        self.protocol_name = v.protocol
        self.leader_id = v.leader
        ts = v.current_state_timestamp if version >= 2 else -1
        members: dict[str, ClassicMember] = {}
        for mm in v.members:
            m = self.members.get(mm.member_id)
            if m is None:
                m = ClassicMember(
                    member_id=mm.member_id, group_instance_id=mm.group_instance_id if version >= 3 else None,
                    client_id=mm.client_id, client_host=mm.client_host,
                    rebalance_timeout_ms=mm.rebalance_timeout if version >= 1 and mm.rebalance_timeout >= 0
                    else mm.session_timeout,
                    session_timeout_ms=mm.session_timeout, protocol_type=v.protocol_type,
                    protocols=[(v.protocol or "", bytes(mm.subscription))],
                )
            m.assignment = bytes(mm.assignment)
            members[mm.member_id] = m
        self.members = members
        self.static_members = {m.group_instance_id: m.member_id for m in members.values()
                               if m.group_instance_id is not None}
        self.pending_sync_members &= set(members)
        target = S.STABLE if members else S.EMPTY
        if self.state != target:
            self.state = target
        self.current_state_timestamp = None if ts == -1 else ts
        self.subscribed_topics = self.compute_subscribed_topics()

    # ------------------------------------------------------------ the Group protocol
    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int, *,
                               transactional: bool, now_ms: int, api_version: int = 9) -> ErrorCode | None:
        if self.state == S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation >= 0 or member_id != "" or instance_id is not None:
            if self.is_static_member_fenced(member_id, instance_id):
                return E.FENCED_INSTANCE_ID
            if not self.has_member(member_id):
                return E.UNKNOWN_MEMBER_ID
            if generation != self.generation_id:
                return E.ILLEGAL_GENERATION
        elif not transactional and self.state != S.EMPTY:
            # Only members may commit to a group that has members. (KIP-447: a producer naming only
            # the group, old clients or send_offsets with a group id, may.)
            return E.UNKNOWN_MEMBER_ID
        if transactional:
            return None
        if self.state == S.COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        member = self.members.get(member_id)
        if member is not None and self.keep_alive is not None and self.state in (S.STABLE, S.PREPARING_REBALANCE):
            self.keep_alive(self, member, now_ms)  # a commit from a member counts as a heartbeat
        return None

    def validate_offset_fetch(self, member_id: str | None = None, member_epoch: int = -1) -> ErrorCode | None:
        return E.GROUP_ID_NOT_FOUND if self.state == S.DEAD else None

    def validate_offset_delete(self, partitions: list[TopicPartition]
                               ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        if self.state == S.DEAD:
            return E.GROUP_ID_NOT_FOUND
        if self.state == S.EMPTY:
            return dict.fromkeys(partitions, E.NONE)
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return E.NON_EMPTY_GROUP
        return {(t, p): E.GROUP_SUBSCRIBED_TO_TOPIC if self.is_subscribed_to_topic(t) else E.NONE
                for t, p in partitions}

    def offset_expiration(self) -> OffsetExpiration | None:
        """Kafka's ClassicGroup.offsetExpirationCondition."""
        def committed(om: OffsetAndMetadata) -> int:
            return om.commit_timestamp

        if self.protocol_type and self.state == S.EMPTY and self.current_state_timestamp is not None:
            emptied = self.current_state_timestamp  # counted from when the group became Empty
            return OffsetExpiration(lambda om: emptied)
        if self.protocol_type and self.state == S.EMPTY:
            return OffsetExpiration(committed)
        if self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.state == S.STABLE and self.subscribed_topics is not None:
            return OffsetExpiration(committed, self.subscribed_topics)
        return None if self.protocol_type else OffsetExpiration(committed)

    def tombstone_records(self) -> list[Record]:
        return [group_metadata_tombstone(self.group_id)]

    def describe(self) -> DescribeGroupsResponse.DescribedGroup:
        if self.state == S.DEAD:
            return dead_group_description(self.group_id)
        stable = self.state == S.STABLE
        return DescribeGroupsResponse.DescribedGroup(
            error_code=0, group_id=self.group_id, group_state=self.state.value,
            protocol_type=self.protocol_type or "", protocol_data=(self.protocol_name or "") if stable else "",
            members=[DescribeGroupsResponse.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(self.protocol_name) if stable and self.protocol_name else b"",
                member_assignment=m.assignment if stable else b"") for m in self.members.values()])

    def list_entry(self) -> ListGroupsResponse.ListedGroup | None:
        if self.state == S.DEAD:
            return None
        return ListGroupsResponse.ListedGroup(group_id=self.group_id, protocol_type=self.protocol_type or "",
                                              group_state=self.state.value, group_type=self.type.value)


def dead_group_description(group_id: str) -> DescribeGroupsResponse.DescribedGroup:
    """DescribeGroups of a group that does not exist: Dead, no error (as Kafka)."""
    return DescribeGroupsResponse.DescribedGroup(error_code=0, group_id=group_id, group_state=S.DEAD.value,
                                                 protocol_type="", protocol_data="", members=[])
