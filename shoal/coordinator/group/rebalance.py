"""The classic group's rebalance machinery: delayed joins, completing a join, sync and session expiry.

Follows Kafka's classic GroupCoordinator (InitialDelayedJoin, DelayedJoin,
heartbeat and pending-sync expiry); `classic.ClassicGroupManager` adds the
request handlers on top. Time comes in as `now_ms`; timers live in the
shard's `Timers`; records go out through `shard.emit` which also replays them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from shoal.coordinator.group.group import ClassicGroup
from shoal.coordinator.group.member import ClassicMember, PendingRequest
from shoal.coordinator.group.records import group_metadata_key, group_metadata_value
from shoal.coordinator.group.responses import join_response, sync_response
from shoal.coordinator.group.state import GroupState
from shoal.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from shoal.coordinator.group.shard import GroupCoordinatorShard

log = logging.getLogger(__name__)
E = ErrorCode
S = GroupState


def heartbeat_timer_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


def _join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def _sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)

class ClassicGroups(MutableMapping[str, ClassicGroup]):
    """The shard's classic groups: a view of its registry in which groups of other types are absent."""

    def __init__(self, groups: dict[str, Any]) -> None:
        self._groups = groups

    def __getitem__(self, group_id: str) -> ClassicGroup:
        group = self._groups[group_id]
        if not isinstance(group, ClassicGroup):
            raise KeyError(group_id)
        return group

    def __setitem__(self, group_id: str, group: ClassicGroup) -> None:
        self._groups[group_id] = group

    def __delitem__(self, group_id: str) -> None:
        self[group_id]  # noqa: B018 - KeyError for a group of another type
        del self._groups[group_id]

    def __iter__(self) -> Iterator[str]:
        return iter([gid for gid, g in self._groups.items() if isinstance(g, ClassicGroup)])

    def __len__(self) -> int:
        return sum(1 for g in self._groups.values() if isinstance(g, ClassicGroup))


class ClassicRebalancer:
    """The classic groups of a shard, their timers, and how a rebalance runs."""

    def __init__(self, shard: GroupCoordinatorShard) -> None:
        self.shard = shard
        self.config = shard.config
        self.timers = shard.timers
        # group_id -> "initial" | "normal": which kind of join timer is pending.
        self._join_kind: dict[str, str] = {}
        self.completed_rebalances = 0  # generations begun with members (a metric; not state)

    # ================================================================ helpers
    @property
    def groups(self) -> ClassicGroups:
        # Kafka's type check (getOrMaybeCreateClassicGroup): a group of another type is not found.
        return ClassicGroups(self.shard.groups)

    def new_group(self, group_id: str, now_ms: int | None) -> ClassicGroup:
        return ClassicGroup(group_id, now_ms, keep_alive=self.schedule_heartbeat)

    def _respond(self, waiter: PendingRequest, response: Any) -> None:
        self.shard.respond(waiter.token, response)

    def _join_error(self, waiter: PendingRequest, error: int, member_id: str = "") -> None:
        self._respond(waiter, join_response(waiter.api_version, error=error, member_id=member_id))

    def _sync_error(self, waiter: PendingRequest, error: int) -> None:
        self._respond(waiter, sync_response(waiter.api_version, error=error))

    def release_waiters(self, member: ClassicMember, error: int, *, name_member: bool = True) -> None:
        """Answer the member's parked JoinGroup (naming its member id, if ``name_member``) and SyncGroup
        with ``error``."""
        if member.join_waiter is not None:
            self._join_error(member.join_waiter, error, member.member_id if name_member else "")
            member.join_waiter = None
        if member.sync_waiter is not None:
            self._sync_error(member.sync_waiter, error)
            member.sync_waiter = None

    def schedule_heartbeat(self, group: ClassicGroup, member: ClassicMember, now_ms: int, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        gid, mid = group.group_id, member.member_id
        self.timers.schedule(heartbeat_timer_key(gid, mid), now_ms + timeout, lambda t: self._expire_heartbeat(gid, mid, t))

    def _schedule_pending_heartbeat(self, group: ClassicGroup, member_id: str, now_ms: int, timeout_ms: int) -> None:
        gid = group.group_id
        self.timers.schedule(heartbeat_timer_key(gid, member_id), now_ms + timeout_ms,
                             lambda t: self._expire_heartbeat(gid, member_id, t))

    def _current_join_result(self, v: int, group: ClassicGroup, member_id: str, include_members: bool = True) -> Any:
        members = group.current_member_metadata() if include_members and group.is_leader(member_id) else []
        return join_response(v, error=E.NONE, member_id=member_id, generation_id=group.generation_id,
                             protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                             leader=group.leader_id or "", members=members)

    # ================================================================ rebalance machinery
    def maybe_prepare_rebalance(self, group: ClassicGroup, now_ms: int, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, now_ms, reason)

    def prepare_rebalance(self, group: ClassicGroup, now_ms: int, reason: str) -> None:
        log.info("Preparing to rebalance group %s in state %s with old generation %d (__consumer_offsets-%d) "
                 "(reason: %s)", group.group_id, group.state.value, group.generation_id, self.shard.partition, reason)
        if group.state == S.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        self.timers.cancel(_sync_key(group.group_id))
        gid = group.group_id
        if group.state == S.EMPTY:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(gid, now_ms, delay, remaining)
        else:
            self._schedule_join_timeout(group, now_ms)
        group.transition_to(S.PREPARING_REBALANCE, now_ms)

    def _schedule_join_timeout(self, group: ClassicGroup, now_ms: int) -> None:
        """The join phase ends at the rebalance timeout (or earlier, once all members rejoined)."""
        gid = group.group_id
        self._join_kind[gid] = "normal"
        self.timers.schedule(_join_key(gid), now_ms + group.rebalance_timeout_ms(),
                             lambda t: self._on_join_timeout(gid, t))

    def _schedule_initial_join(self, gid: str, now_ms: int, delay: int, remaining: int) -> None:
        self._join_kind[gid] = "initial"
        self.timers.schedule(_join_key(gid), now_ms + delay,
                             lambda t: self._on_initial_join_timeout(gid, delay, remaining, t))

    def _on_initial_join_timeout(self, gid: str, delay: int, remaining: int, now_ms: int) -> None:
        group = self.groups.get(gid)
        if group is None or group.state != S.PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining != 0:
            # Kafka's InitialDelayedJoin: members keep arriving, wait another delay (bounded).
            group.new_member_added = False
            next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            next_remaining = max(remaining - delay, 0)
            self._schedule_initial_join(gid, now_ms, next_delay, next_remaining)
            return
        self.complete_join(group, now_ms)

    def _on_join_timeout(self, gid: str, now_ms: int) -> None:
        group = self.groups.get(gid)
        if group is not None and group.state == S.PREPARING_REBALANCE:
            self.complete_join(group, now_ms)

    def _try_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if (group.state == S.PREPARING_REBALANCE and self._join_kind.get(group.group_id) == "normal"
                and group.has_all_members_joined()):
            self.complete_join(group, now_ms)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        for m in group.members.values():
            m.assignment = b""
            if m.sync_waiter is not None:
                self._sync_error(m.sync_waiter, error)
                m.sync_waiter = None

    def complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        """Kafka's onCompleteJoin: drop non-rejoined dynamic members, next generation, answer joins."""
        gid = group.group_id
        self.timers.cancel(_join_key(gid))
        self._join_kind.pop(gid, None)
        if group.state == S.DEAD:
            return
        for m in group.not_yet_rejoined_members():
            if not m.is_static:
                log.info("[GroupId %s] Removing dynamic member %s: it did not rejoin in time.", gid, m.member_id)
                self._remove_member(group, m)
        if group.members and not group.maybe_elect_new_joined_leader():
            # Only static members that did not rejoin are left: nobody could run the
            # assignment. As Kafka, wait another rebalance timeout (their sessions
            # expire meanwhile, or they come back).
            self._schedule_join_timeout(group, now_ms)
            return
        group.init_next_generation(now_ms)
        if group.state == S.EMPTY:
            log.info("Group %s with generation %d is now empty (__consumer_offsets-%d).", gid, group.generation_id,
                     self.shard.partition)
            self.store_group(group, {})
            return
        log.info("Stabilized group %s generation %d (__consumer_offsets-%d) with %d members; leader %s, "
                 "protocol %s.", gid, group.generation_id, self.shard.partition, group.size(), group.leader_id,
                 group.protocol_name)
        self.completed_rebalances += 1
        for m in group.members.values():
            if m.join_waiter is not None:
                waiter, m.join_waiter = m.join_waiter, None
                self._respond(waiter, self._current_join_result(waiter.api_version, group, m.member_id))
            m.is_new = False
            self.schedule_heartbeat(group, m, now_ms)
        generation = group.generation_id
        self.timers.schedule(_sync_key(gid), now_ms + group.rebalance_timeout_ms(),
                             lambda t: self._on_sync_timeout(gid, generation, t))

    def _on_sync_timeout(self, gid: str, generation: int, now_ms: int) -> None:
        group = self.groups.get(gid)
        if group is None or group.generation_id != generation:
            return
        if group.state in (S.COMPLETING_REBALANCE, S.STABLE) and group.pending_sync_members:
            log.info("[GroupId %s] Members %s did not send SyncGroup for generation %d in time: removing them.",
                     gid, sorted(group.pending_sync_members), generation)
            for mid in list(group.pending_sync_members):
                m = group.members.get(mid)
                if m is not None:
                    self._remove_member(group, m)
            group.pending_sync_members.clear()
            self.prepare_rebalance(group, now_ms, "Removing members that did not sync in time")

    def _remove_member(self, group: ClassicGroup, member: ClassicMember) -> None:
        """Remove without reacting (callers decide about rebalancing)."""
        self.release_waiters(member, E.UNKNOWN_MEMBER_ID, name_member=False)
        self.timers.cancel(heartbeat_timer_key(group.group_id, member.member_id))
        group.remove_member(member.member_id)

    def remove_member_and_update_group(self, group: ClassicGroup, member: ClassicMember, now_ms: int,
                                       reason: str) -> None:
        self._remove_member(group, member)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, now_ms, reason)
        elif group.state == S.PREPARING_REBALANCE:
            self._try_complete_join(group, now_ms)

    def _expire_heartbeat(self, gid: str, member_id: str, now_ms: int) -> None:
        group = self.groups.get(gid)
        if group is None or group.state == S.DEAD:
            return
        if member_id in group.pending_members:
            log.info("[GroupId %s] Pending member %s has been removed after session timeout expiration.",
                     gid, member_id)
            group.pending_members.discard(member_id)
            self._try_complete_join(group, now_ms)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("[GroupId %s] Member %s has been removed from the group due to heartbeat expiration.",
                 gid, member_id)
        self.remove_member_and_update_group(group, member, now_ms, f"removing member {member_id} on heartbeat expiration")

    def store_group(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        """Emit the GroupMetadata record for the group's members and `assignment`."""
        self.shard.emit(group_metadata_key(group.group_id), group_metadata_value(group.metadata_value(assignment)))
