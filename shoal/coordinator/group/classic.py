"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

Follows Kafka's classic GroupCoordinator (GroupMetadataManager's classic
group code): the same states, error codes, delayed joins (InitialDelayedJoin,
DelayedJoin), heartbeat expiry, pending-sync expiry and static membership
(KIP-345, KIP-814). The rebalance machinery and timers are in `rebalance.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shoal.coordinator.group.group import ClassicGroup
from shoal.coordinator.group.member import ClassicMember, PendingRequest
from shoal.coordinator.group.rebalance import ClassicRebalancer, heartbeat_timer_key
from shoal.coordinator.group.records import (
    GROUP_METADATA_KEY_VERSION,
    decode_group_metadata_key,
    decode_group_metadata_value,
)
from shoal.coordinator.group.responses import join_response, sync_response
from shoal.coordinator.group.state import GroupState
from shoal.coordinator.result import ShardRequest
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.heartbeat_response import HeartbeatResponse
from shoal.protocol.generated.leave_group_response import LeaveGroupResponse

if TYPE_CHECKING:
    from shoal.coordinator.group.shard import GroupCoordinatorShard

log = logging.getLogger(__name__)
E = ErrorCode
S = GroupState


class ClassicGroupManager(ClassicRebalancer):
    """Classic-protocol handlers over the shard's groups, timers and output (a `types.GroupTypeManager`)."""

    record_key_versions = frozenset({GROUP_METADATA_KEY_VERSION})

    def __init__(self, shard: GroupCoordinatorShard) -> None:
        super().__init__(shard)
        self._handlers: dict[ApiKey, Callable[[ShardRequest, Any, int], Any]] = {
            ApiKey.JOIN_GROUP: self.join, ApiKey.SYNC_GROUP: self.sync, ApiKey.HEARTBEAT: self.heartbeat,
            ApiKey.LEAVE_GROUP: self.leave}
        self.api_keys = frozenset(self._handlers)

    def handle(self, ctx: ShardRequest, request: Any, now_ms: int) -> Any | None:
        return self._handlers[ctx.api_key](ctx, request, now_ms)

    def _new_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{self.shard.member_id_suffix()}"

    def _validate_current_member(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode | None:
        if group.is_static_member_fenced(member_id, instance_id):
            return E.FENCED_INSTANCE_ID
        if not group.has_member(member_id):
            return E.UNKNOWN_MEMBER_ID
        return None

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.group_max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.state == S.PREPARING_REBALANCE:
            m = group.members.get(member_id)
            return (m is not None and m.is_awaiting_join) or group.awaiting_join_count() < max_size
        return group.has_member(member_id) or group.size() < max_size

    # ================================================================ JoinGroup
    def join(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any | None:
        v = ctx.api_version
        member_id = req.member_id
        instance_id = req.group_instance_id if v >= 5 else None
        session_timeout = req.session_timeout_ms
        rebalance_timeout = req.rebalance_timeout_ms if v >= 1 and req.rebalance_timeout_ms >= 0 else session_timeout
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]

        def err(code: ErrorCode, mid: str = member_id) -> Any:
            return join_response(v, error=code, member_id=mid)

        if not req.group_id:
            return err(E.INVALID_GROUP_ID)
        if not (self.config.group_min_session_timeout_ms <= session_timeout <= self.config.group_max_session_timeout_ms):
            return err(E.INVALID_SESSION_TIMEOUT)
        unknown = member_id == ""
        group = self.groups.get(req.group_id)
        created = False
        if group is None:
            if not unknown:
                return err(E.UNKNOWN_MEMBER_ID)
            group = self.new_group(req.group_id, now_ms)
            self.groups[req.group_id] = group
            created = True
        if not self._accept_joining_member(group, member_id):
            if created:
                del self.groups[req.group_id]
            return err(E.GROUP_MAX_SIZE_REACHED)
        waiter = PendingRequest(ctx.token, v)
        if unknown:
            resp = self._join_new_member(ctx, req, group, instance_id, protocols, session_timeout, rebalance_timeout, waiter, now_ms)
        else:
            resp = self._join_current_member(ctx, req, group, instance_id, protocols, session_timeout, rebalance_timeout, waiter, now_ms)
        if created and not group.members and not group.pending_members and group.state == S.EMPTY:
            # A rejected first join leaves nothing behind (Kafka removes the empty group).
            del self.groups[req.group_id]
        if group.state == S.PREPARING_REBALANCE:
            self._try_complete_join(group, now_ms)
        return resp

    def _join_new_member(self, ctx, req, group, instance_id, protocols, session_timeout, rebalance_timeout, waiter, now_ms):
        v = ctx.api_version
        if group.state == S.DEAD:
            return join_response(v, error=E.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, [p for p, _ in protocols]):
            return join_response(v, error=E.INCONSISTENT_GROUP_PROTOCOL)
        new_id = self._new_member_id(ctx.client_id, instance_id)
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                return self._replace_static_member(ctx, req, group, instance_id, old_id, new_id, protocols,
                                                   session_timeout, rebalance_timeout, waiter, now_ms)
            self._add_member_and_rebalance(ctx, req, group, new_id, instance_id, protocols,
                                           session_timeout, rebalance_timeout, waiter, now_ms)
            return None
        if v >= 4:
            # KIP-394: the member must come back with the id we hand out.
            group.pending_members.add(new_id)
            self._schedule_pending_heartbeat(group, new_id, now_ms, session_timeout)
            return join_response(v, error=E.MEMBER_ID_REQUIRED, member_id=new_id)
        self._add_member_and_rebalance(ctx, req, group, new_id, None, protocols,
                                       session_timeout, rebalance_timeout, waiter, now_ms)
        return None

    def _join_current_member(self, ctx, req, group, instance_id, protocols, session_timeout, rebalance_timeout, waiter, now_ms):
        v = ctx.api_version
        member_id = req.member_id
        if group.state == S.DEAD:
            return join_response(v, error=E.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not group.supports_protocols(req.protocol_type, [p for p, _ in protocols]):
            return join_response(v, error=E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if member_id in group.pending_members:
            self._add_member_and_rebalance(ctx, req, group, member_id, instance_id, protocols,
                                           session_timeout, rebalance_timeout, waiter, now_ms)
            return None
        error = self._validate_current_member(group, member_id, instance_id)
        if error is not None:
            return join_response(v, error=error, member_id=member_id)
        member = group.members[member_id]
        if group.state == S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, session_timeout, rebalance_timeout, waiter, now_ms)
            return None
        if group.state == S.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # Already in this generation: answer with what it would have got.
                return self._current_join_result(v, group, member_id)
            self._update_member_and_rebalance(group, member, protocols, session_timeout, rebalance_timeout, waiter, now_ms)
            return None
        if group.state == S.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # A leader's JoinGroup forces a rebalance (metadata the group cannot see may have changed).
                self._update_member_and_rebalance(group, member, protocols, session_timeout, rebalance_timeout, waiter, now_ms)
                return None
            self.schedule_heartbeat(group, member, now_ms)
            return self._current_join_result(v, group, member_id, include_members=False)
        return join_response(v, error=E.UNKNOWN_MEMBER_ID, member_id=member_id)

    def _add_member_and_rebalance(self, ctx, req, group, member_id, instance_id, protocols,
                                  session_timeout, rebalance_timeout, waiter, now_ms) -> None:
        member = ClassicMember(
            member_id=member_id, group_instance_id=instance_id, client_id=ctx.client_id,
            client_host=ctx.client_host, rebalance_timeout_ms=rebalance_timeout,
            session_timeout_ms=session_timeout, protocol_type=req.protocol_type, protocols=protocols,
            is_new=True, join_waiter=waiter,
        )
        if group.state == S.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add_member(member)
        log.info("%s member %s joins group %s in %s state. Adding to the group now.",
                 "Static" if instance_id is not None else "Dynamic", member_id, group.group_id, group.state.value)
        # New members cannot heartbeat while parked in JoinGroup: bound them by the new-member timeout.
        self.schedule_heartbeat(group, member, now_ms, self.config.new_member_join_timeout_ms)
        self.maybe_prepare_rebalance(group, now_ms,
                                     f"Adding new member {member_id} with group instance id {instance_id}")

    def _update_member_and_rebalance(self, group, member, protocols, session_timeout, rebalance_timeout, waiter, now_ms) -> None:
        member.protocols = protocols
        member.session_timeout_ms = session_timeout
        member.rebalance_timeout_ms = rebalance_timeout
        if member.join_waiter is not None and member.join_waiter is not waiter:
            self._join_error(member.join_waiter, E.REBALANCE_IN_PROGRESS, member.member_id)
        member.join_waiter = waiter
        self.maybe_prepare_rebalance(group, now_ms, (
            f"Leader {member.member_id} re-joining group during {group.state.value}" if group.is_leader(member.member_id)
            else f"Updating metadata for member {member.member_id} during {group.state.value}"))

    def _replace_static_member(self, ctx, req, group, instance_id, old_id, new_id, protocols,
                               session_timeout, rebalance_timeout, waiter, now_ms):
        v = ctx.api_version
        old = group.members[old_id]
        new = ClassicMember(
            member_id=new_id, group_instance_id=instance_id, client_id=ctx.client_id, client_host=ctx.client_host,
            rebalance_timeout_ms=rebalance_timeout, session_timeout_ms=session_timeout,
            protocol_type=req.protocol_type, protocols=protocols,
        )
        old_leader = group.leader_id
        group.replace_static_member(instance_id, old_id, new)
        log.info("Static member with group instance id %s re-joins group %s in %s state: member id %s replaces %s.",
                 instance_id, group.group_id, group.state.value, new_id, old_id)
        # The old member id is fenced: anything it has parked is answered so.
        self.release_waiters(old, E.FENCED_INSTANCE_ID)
        self.timers.cancel(heartbeat_timer_key(group.group_id, old_id))
        self.schedule_heartbeat(group, new, now_ms)
        if group.state == S.STABLE:
            if group.select_protocol() == group.protocol_name:
                # Same protocol: persist the new member id, no rebalance.
                self.store_group(group, {m.member_id: m.assignment for m in group.members.values()})
                is_leader = group.is_leader(new_id)
                if v >= 9:
                    # KIP-814: the leader learns it leads but must not reassign.
                    return join_response(
                        v, error=E.NONE, member_id=new_id, generation_id=group.generation_id,
                        protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                        leader=group.leader_id or "", skip_assignment=is_leader,
                        members=group.current_member_metadata() if is_leader else [],
                    )
                # Older clients: report the old leader id so a rejoined leader does
                # not run an assignment a Stable group would not broadcast.
                return join_response(
                    v, error=E.NONE, member_id=new_id, generation_id=group.generation_id,
                    protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                    leader=(old_leader if old_leader == old_id else group.leader_id) or "", members=[],
                )
            new.join_waiter = waiter
            self.maybe_prepare_rebalance(group, now_ms, (
                f"Group's selected protocol will change because static member {old_id} with instance id "
                f"{instance_id} joined with change of protocol"))
            return None
        if group.state == S.COMPLETING_REBALANCE:
            # The leader may already hold the old member id: rebalance so the new one gets an assignment.
            new.join_waiter = waiter
            self.prepare_rebalance(group, now_ms, f"Updating metadata for static member {new_id} with "
                                                  f"instance id {instance_id}")
            return None
        # PreparingRebalance: simply wait for the join to complete.
        new.join_waiter = waiter
        return None

    # ================================================================ SyncGroup
    def sync(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any | None:
        v = ctx.api_version
        instance_id = req.group_instance_id if v >= 3 else None
        if v >= 5 and (req.protocol_type is None or req.protocol_name is None):
            # From v5 both are mandatory: Kafka refuses a request without them before it
            # looks at the group at all.
            return sync_response(v, error=E.INCONSISTENT_GROUP_PROTOCOL)
        if not req.group_id:  # as Kafka's GroupCoordinatorService: an empty id is no group's
            return sync_response(v, error=E.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if group is None:
            return sync_response(v, error=E.UNKNOWN_MEMBER_ID)
        if group.state == S.DEAD:
            return sync_response(v, error=E.COORDINATOR_NOT_AVAILABLE)
        error = self._validate_current_member(group, req.member_id, instance_id)
        if error is None and req.generation_id != group.generation_id:
            error = E.ILLEGAL_GENERATION
        if error is None and v >= 5 and (
            (req.protocol_type is not None and req.protocol_type != group.protocol_type)
            or (req.protocol_name is not None and req.protocol_name != group.protocol_name)
        ):
            error = E.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            return sync_response(v, error=error)
        if group.state == S.EMPTY:
            return sync_response(v, error=E.UNKNOWN_MEMBER_ID)
        if group.state == S.PREPARING_REBALANCE:
            return sync_response(v, error=E.REBALANCE_IN_PROGRESS)
        member = group.members[req.member_id]
        group.pending_sync_members.discard(member.member_id)
        self.schedule_heartbeat(group, member, now_ms)
        if group.state == S.STABLE:
            return sync_response(v, error=E.NONE, assignment=member.assignment,
                                 protocol_type=group.protocol_type, protocol_name=group.protocol_name)
        # CompletingRebalance: park until the leader's assignment is persisted.
        if member.sync_waiter is not None:
            self._sync_error(member.sync_waiter, E.REBALANCE_IN_PROGRESS)
        member.sync_waiter = PendingRequest(ctx.token, v)
        if group.is_leader(member.member_id):
            assignment = {a.member_id: bytes(a.assignment) for a in req.assignments}
            full = {mid: assignment.get(mid, b"") for mid in group.members}
            # The record goes out (and is replayed: assignments set, group Stable)
            # before any member is answered; the runtime appends it first.
            log.info("Assignment received from leader %s for group %s for generation %d. The group has %d members, "
                     "%d of which are static.", member.member_id, group.group_id, group.generation_id, group.size(),
                     len(group.static_members))
            self.store_group(group, full)
            self._propagate_assignment(group)
        return None

    def _propagate_assignment(self, group: ClassicGroup) -> None:
        for m in group.members.values():
            if m.sync_waiter is not None:
                waiter, m.sync_waiter = m.sync_waiter, None
                self._respond(waiter, sync_response(waiter.api_version, error=E.NONE, assignment=m.assignment,
                                                    protocol_type=group.protocol_type,
                                                    protocol_name=group.protocol_name))

    # ================================================================ Heartbeat
    def heartbeat(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any:
        instance_id = req.group_instance_id if ctx.api_version >= 3 else None
        if not req.group_id:  # as Kafka's GroupCoordinatorService: an empty id is no group's
            return HeartbeatResponse(error_code=E.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if group is None:
            return HeartbeatResponse(error_code=E.UNKNOWN_MEMBER_ID)
        if group.state == S.DEAD:
            return HeartbeatResponse(error_code=E.COORDINATOR_NOT_AVAILABLE)
        error = self._validate_current_member(group, req.member_id, instance_id)
        if error is None and req.generation_id != group.generation_id:
            error = E.ILLEGAL_GENERATION
        if error is not None:
            return HeartbeatResponse(error_code=error)
        if group.state == S.EMPTY:
            return HeartbeatResponse(error_code=E.UNKNOWN_MEMBER_ID)
        self.schedule_heartbeat(group, group.members[req.member_id], now_ms)
        if group.state == S.PREPARING_REBALANCE:
            return HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS)
        return HeartbeatResponse(error_code=E.NONE)

    # ================================================================ LeaveGroup
    def leave(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any:
        v = ctx.api_version
        if v >= 3:
            leaving = [(m.member_id, m.group_instance_id) for m in req.members]
        else:
            leaving = [(req.member_id, None)]
        if not req.group_id:  # as Kafka's GroupCoordinatorService: top-level INVALID_GROUP_ID, no members
            return self._leave_response(v, E.INVALID_GROUP_ID, [])
        group = self.groups.get(req.group_id)
        if group is None:
            # As Kafka 4 (GroupCoordinatorService.leaveGroup): no top-level error, every member
            # UNKNOWN_MEMBER_ID (before v3 that becomes the top-level error).
            return self._leave_response(v, E.NONE, [(mid, iid, E.UNKNOWN_MEMBER_ID) for mid, iid in leaving])
        if group.state == S.DEAD:
            return self._leave_response(v, E.COORDINATOR_NOT_AVAILABLE, [])
        results = []
        for member_id, instance_id in leaving:
            results.append((member_id, instance_id, self._leave_one(group, member_id, instance_id, now_ms)))
        return self._leave_response(v, E.NONE, results)

    def _leave_one(self, group: ClassicGroup, member_id: str, instance_id: str | None, now_ms: int) -> ErrorCode:
        if member_id == "":
            # Administrative removal by group.instance.id.
            current = group.static_member_id(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            log.info("[GroupId %s] Static member %s with instance id %s has been removed by an admin.",
                     group.group_id, current, instance_id)
            self.remove_member_and_update_group(group, group.members[current], now_ms,
                                                f"Removing member {current} on LeaveGroup")
            return E.NONE
        if member_id in group.pending_members:
            log.info("[GroupId %s] Pending member %s has left the group.", group.group_id, member_id)
            group.pending_members.discard(member_id)
            self.timers.cancel(heartbeat_timer_key(group.group_id, member_id))
            self._try_complete_join(group, now_ms)
            return E.NONE
        if group.is_static_member_fenced(member_id, instance_id):
            return E.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        log.info("[GroupId %s] Member %s has left group through explicit `LeaveGroup` request.",
                 group.group_id, member_id)
        self.remove_member_and_update_group(group, member, now_ms, f"Removing member {member_id} on LeaveGroup")
        return E.NONE

    @staticmethod
    def _leave_response(v: int, error: ErrorCode, results: list[tuple[str, str | None, ErrorCode]]) -> Any:
        if v < 3:
            # One member and no per-member list: its error is the top-level error.
            if error == E.NONE and results:
                error = results[0][2]
            return LeaveGroupResponse(error_code=int(error), members=[])
        return LeaveGroupResponse(
            error_code=int(error),
            members=[LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=int(e))
                     for mid, iid, e in results],
        )

    # ================================================================ replay / load / unload
    def replay(self, key: bytes, value: bytes | None, producer_id: int) -> None:
        """A GroupMetadata record (a tombstone deletes the group)."""
        group_id = decode_group_metadata_key(key).group
        if value is None:
            gone = self.groups.pop(group_id, None)
            if gone is not None:
                gone.state = S.DEAD
            return
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = self.new_group(group_id, None)
        group.replay_metadata(*decode_group_metadata_value(value))

    def unload(self) -> None:
        """Parked joins and syncs are answered NOT_COORDINATOR (their clients find the new one); groups Dead."""
        for group in self.groups.values():
            for m in group.members.values():
                self.release_waiters(m, E.NOT_COORDINATOR)
        for group in self.groups.values():
            group.state = S.DEAD

    def on_loaded(self, now_ms: int) -> None:
        """Kafka re-arms every loaded member's session timer on load."""
        for group in self.groups.values():
            for m in group.members.values():
                self.schedule_heartbeat(group, m, now_ms)
