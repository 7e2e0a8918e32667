"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

Follows Kafka's classic GroupCoordinator (GroupMetadataManager's classic
group code): the same states, error codes, delayed joins (InitialDelayedJoin,
DelayedJoin), heartbeat expiry, pending-sync expiry and static membership
(KIP-345, KIP-814). Time comes in as `now_ms`; timers live in the shard's
`Timers`; records go out through `shard.emit` which also replays them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shoal.coordinator.group.group import ClassicGroup
from shoal.coordinator.group.member import ClassicMember, PendingRequest
from shoal.coordinator.group.records import group_metadata_key, group_metadata_value
from shoal.coordinator.group.responses import join_response, sync_response
from shoal.coordinator.group.state import GroupState
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.group_metadata_value import GroupMetadataValue
from shoal.protocol.generated.heartbeat_response import HeartbeatResponse
from shoal.protocol.generated.leave_group_response import LeaveGroupResponse

if TYPE_CHECKING:
    from shoal.coordinator.group.shard import GroupCoordinatorShard, RequestContext

E = ErrorCode
S = GroupState


def _hb_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


def _join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def _sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


class ClassicGroupManager:
    """Classic-protocol handlers over the shard's groups, timers and output."""

    def __init__(self, shard: GroupCoordinatorShard) -> None:
        self.shard = shard
        self.config = shard.config
        self.timers = shard.timers
        # group_id -> "initial" | "normal": which kind of join timer is pending.
        self._join_kind: dict[str, str] = {}
        self.completed_rebalances = 0  # generations begun with members (a metric; not state)

    # ================================================================ helpers
    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.shard.groups

    def _respond(self, waiter: PendingRequest, response: Any) -> None:
        self.shard.respond(waiter.token, response)

    def _join_error(self, waiter: PendingRequest, error: int, member_id: str = "") -> None:
        self._respond(waiter, join_response(waiter.api_version, error=error, member_id=member_id))

    def _sync_error(self, waiter: PendingRequest, error: int) -> None:
        self._respond(waiter, sync_response(waiter.api_version, error=error))

    def schedule_heartbeat(self, group: ClassicGroup, member: ClassicMember, now_ms: int, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        gid, mid = group.group_id, member.member_id
        self.timers.schedule(_hb_key(gid, mid), now_ms + timeout, lambda t: self._expire_heartbeat(gid, mid, t))

    def _schedule_pending_heartbeat(self, group: ClassicGroup, member_id: str, now_ms: int, timeout_ms: int) -> None:
        gid = group.group_id
        self.timers.schedule(_hb_key(gid, member_id), now_ms + timeout_ms,
                             lambda t: self._expire_heartbeat(gid, member_id, t))

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
    def join(self, ctx: RequestContext, req: Any, now_ms: int) -> Any | None:
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
            group = ClassicGroup(req.group_id, now_ms)
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

    def _current_join_result(self, v: int, group: ClassicGroup, member_id: str, include_members: bool = True) -> Any:
        members = group.current_member_metadata() if include_members and group.is_leader(member_id) else []
        return join_response(v, error=E.NONE, member_id=member_id, generation_id=group.generation_id,
                             protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                             leader=group.leader_id or "", members=members)

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
        # New members cannot heartbeat while parked in JoinGroup: bound them by the new-member timeout.
        self.schedule_heartbeat(group, member, now_ms, self.config.new_member_join_timeout_ms)
        self.maybe_prepare_rebalance(group, now_ms)

    def _update_member_and_rebalance(self, group, member, protocols, session_timeout, rebalance_timeout, waiter, now_ms) -> None:
        member.protocols = protocols
        member.session_timeout_ms = session_timeout
        member.rebalance_timeout_ms = rebalance_timeout
        if member.join_waiter is not None and member.join_waiter is not waiter:
            self._join_error(member.join_waiter, E.REBALANCE_IN_PROGRESS, member.member_id)
        member.join_waiter = waiter
        self.maybe_prepare_rebalance(group, now_ms)

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
        # The old member id is fenced: anything it has parked is answered so.
        if old.join_waiter is not None:
            self._join_error(old.join_waiter, E.FENCED_INSTANCE_ID, old_id)
            old.join_waiter = None
        if old.sync_waiter is not None:
            self._sync_error(old.sync_waiter, E.FENCED_INSTANCE_ID)
            old.sync_waiter = None
        self.timers.cancel(_hb_key(group.group_id, old_id))
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
            self.maybe_prepare_rebalance(group, now_ms)
            return None
        if group.state == S.COMPLETING_REBALANCE:
            # The leader may already hold the old member id: rebalance so the new one gets an assignment.
            new.join_waiter = waiter
            self.prepare_rebalance(group, now_ms)
            return None
        # PreparingRebalance: simply wait for the join to complete.
        new.join_waiter = waiter
        return None

    # ================================================================ rebalance machinery
    def maybe_prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, now_ms)

    def prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
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
                self._remove_member(group, m)
        if group.members and not group.maybe_elect_new_joined_leader():
            # Only static members that did not rejoin are left: nobody could run the
            # assignment. As Kafka, wait another rebalance timeout (their sessions
            # expire meanwhile, or they come back).
            self._schedule_join_timeout(group, now_ms)
            return
        group.init_next_generation(now_ms)
        if group.state == S.EMPTY:
            self.store_group(group, {})
            return
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
            for mid in list(group.pending_sync_members):
                m = group.members.get(mid)
                if m is not None:
                    self._remove_member(group, m)
            group.pending_sync_members.clear()
            self.prepare_rebalance(group, now_ms)

    def _remove_member(self, group: ClassicGroup, member: ClassicMember) -> None:
        """Remove without reacting (callers decide about rebalancing)."""
        if member.join_waiter is not None:
            self._join_error(member.join_waiter, E.UNKNOWN_MEMBER_ID)
            member.join_waiter = None
        if member.sync_waiter is not None:
            self._sync_error(member.sync_waiter, E.UNKNOWN_MEMBER_ID)
            member.sync_waiter = None
        self.timers.cancel(_hb_key(group.group_id, member.member_id))
        group.remove_member(member.member_id)

    def remove_member_and_update_group(self, group: ClassicGroup, member: ClassicMember, now_ms: int) -> None:
        self._remove_member(group, member)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, now_ms)
        elif group.state == S.PREPARING_REBALANCE:
            self._try_complete_join(group, now_ms)

    def _expire_heartbeat(self, gid: str, member_id: str, now_ms: int) -> None:
        group = self.groups.get(gid)
        if group is None or group.state == S.DEAD:
            return
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._try_complete_join(group, now_ms)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self.remove_member_and_update_group(group, member, now_ms)

    def store_group(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        """Emit the GroupMetadata record for the group's members and `assignment`."""
        members = []
        for m in group.members.values():
            members.append(GroupMetadataValue.MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms, subscription=m.metadata(group.protocol_name),  # type: ignore[arg-type]
                assignment=assignment.get(m.member_id, b""),
            ))
        ts = group.current_state_timestamp
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "", generation=group.generation_id,
            protocol=group.protocol_name, leader=group.leader_id,
            current_state_timestamp=-1 if ts is None else ts, members=members,
        )
        self.shard.emit(group_metadata_key(group.group_id), group_metadata_value(value))

    # ================================================================ SyncGroup
    def sync(self, ctx: RequestContext, req: Any, now_ms: int) -> Any | None:
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
    def heartbeat(self, ctx: RequestContext, req: Any, now_ms: int) -> Any:
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
    def leave(self, ctx: RequestContext, req: Any, now_ms: int) -> Any:
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
            self.remove_member_and_update_group(group, group.members[current], now_ms)
            return E.NONE
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.timers.cancel(_hb_key(group.group_id, member_id))
            self._try_complete_join(group, now_ms)
            return E.NONE
        if group.is_static_member_fenced(member_id, instance_id):
            return E.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        self.remove_member_and_update_group(group, member, now_ms)
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

    # ================================================================ unload / load
    def fail_all_pending(self, error: ErrorCode) -> None:
        for group in self.groups.values():
            for m in group.members.values():
                if m.join_waiter is not None:
                    self._join_error(m.join_waiter, error, m.member_id)
                    m.join_waiter = None
                if m.sync_waiter is not None:
                    self._sync_error(m.sync_waiter, error)
                    m.sync_waiter = None

    def on_loaded(self, now_ms: int) -> None:
        """Kafka re-arms every loaded member's session timer on load."""
        for group in self.groups.values():
            for m in group.members.values():
                self.schedule_heartbeat(group, m, now_ms)
