"""A classic group: members, generation, leader, protocol (Kafka's ClassicGroup)."""

from __future__ import annotations

from shoal.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from shoal.coordinator.group.member import ClassicMember
from shoal.coordinator.group.protocol_vote import select_protocol
from shoal.coordinator.group.state import GroupState, check_transition


class ClassicGroup:
    """State of one classic group. Pure data plus the rules that only touch it."""

    def __init__(self, group_id: str, now_ms: int | None, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = state
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

    # ------------------------------------------------------------ state
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int | None) -> None:
        check_transition(self.group_id, self.state, target)
        self.previous_state = self.state
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
