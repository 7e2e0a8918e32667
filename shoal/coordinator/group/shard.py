"""GroupCoordinatorShard: the deterministic group coordinator of one `__consumer_offsets` partition.

Feed it requests (`handle`) and time (`poll`); it returns a CoordinatorResult:
responses to send and records to append. The runtime appends the records
first and only then sends the responses. `replay` is the one code path that
applies a record to state: the shard calls it for every record it emits,
and the runtime calls it for every record of the partition on load.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

from shoal.coordinator.group.classic import ClassicGroupManager
from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.group import ClassicGroup
from shoal.coordinator.group.member import ClassicMember
from shoal.coordinator.group.offsets import OffsetMetadataManager
from shoal.coordinator.group.records import (
    decode_group_metadata_key,
    decode_group_metadata_value,
    decode_offset_commit_key,
    decode_offset_commit_value,
    key_version,
)
from shoal.coordinator.group.responses import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
    error_response,
)
from shoal.coordinator.group.state import GroupState, parse_state
from shoal.coordinator.result import CoordinatorResult, Record, RequestContext, ResultCollector
from shoal.protocol.acl_operations import GROUP_OPERATIONS
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.delete_groups_response import DeleteGroupsResponse
from shoal.protocol.generated.describe_groups_response import DescribeGroupsResponse
from shoal.protocol.generated.list_groups_response import ListGroupsResponse

E = ErrorCode
S = GroupState
RETENTION_TIMER = ("offsets-retention",)
_LOAD_YIELD_EVERY = 50_000

__all__ = ["CoordinatorResult", "GroupCoordinatorShard", "Record", "RequestContext"]


class GroupCoordinatorShard(ResultCollector):
    """All classic groups and offsets of one `__consumer_offsets` partition."""

    def __init__(self, partition: int, config: GroupConfig | None = None, *,
                 member_id_suffix: Callable[[], str] | None = None) -> None:
        from shoal.coordinator.timers import Timers

        self.partition = partition
        self.config = config or GroupConfig()
        self.member_id_suffix: Callable[[], str] = member_id_suffix or (lambda: str(uuid.uuid4()))
        self.groups: dict[str, ClassicGroup] = {}
        self.timers = Timers()
        self.classic = ClassicGroupManager(self)
        self.offset_manager = OffsetMetadataManager(self)

    # ================================================================ output
    def emit(self, key: bytes, value: bytes | None, producer_id: int = -1, producer_epoch: int = -1) -> None:
        """Record a change: queue the record for the log and apply it now.

        With a producer id the record is part of that producer's transaction
        (TxnOffsetCommit): it is written in a transactional batch and stays
        pending until the transaction's marker.
        """
        assert self._out is not None, "emit outside of handle/poll"
        self._out.add_record(key, value, producer_id, producer_epoch)
        self.replay(key, value, producer_id)

    def respond(self, token: Any, response: Any) -> None:
        assert self._out is not None, "respond outside of handle/poll"
        self._out.responses.append((token, response))

    # ================================================================ requests
    def handle(self, ctx: RequestContext, request: Any, now_ms: int) -> CoordinatorResult:
        """Apply one request; its response may come now or from a later handle/poll."""
        self._begin()
        self._ensure_retention_timer(now_ms)
        response = self._dispatch(ctx, request, now_ms)
        if response is not None:
            self.respond(ctx.token, response)
        self._fire_due(now_ms)
        return self._end()

    def _dispatch(self, ctx: RequestContext, req: Any, now_ms: int) -> Any | None:
        k = ctx.api_key
        if k == JOIN_GROUP:
            return self.classic.join(ctx, req, now_ms)
        if k == SYNC_GROUP:
            return self.classic.sync(ctx, req, now_ms)
        if k == HEARTBEAT:
            return self.classic.heartbeat(ctx, req, now_ms)
        if k == LEAVE_GROUP:
            return self.classic.leave(ctx, req, now_ms)
        if k == OFFSET_COMMIT:
            return self.offset_manager.commit(ctx, req, now_ms)
        if k == TXN_OFFSET_COMMIT:
            return self.offset_manager.commit_transactional(ctx, req, now_ms)
        if k == OFFSET_FETCH:
            return self.offset_manager.fetch(ctx, req, now_ms)
        if k == OFFSET_DELETE:
            return self.offset_manager.delete(ctx, req, now_ms)
        if k == DESCRIBE_GROUPS:
            groups = [self.describe_group(g) for g in req.groups]
            if ctx.api_version >= 3 and req.include_authorized_operations:
                for g in groups:  # KIP-430: every operation (no authorizer, as Kafka without one)
                    g.authorized_operations = GROUP_OPERATIONS
            return DescribeGroupsResponse(groups=groups)
        if k == LIST_GROUPS:
            states = list(req.states_filter) if ctx.api_version >= 4 else []
            types = list(req.types_filter) if ctx.api_version >= 5 else []
            return ListGroupsResponse(error_code=0, groups=self.list_groups(states, types))
        if k == DELETE_GROUPS:
            return DeleteGroupsResponse(results=[
                DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=int(self.delete_group(g)))
                for g in req.groups_names
            ])
        return error_response(k, ctx.api_version, req, E.UNSUPPORTED_VERSION)

    # ================================================================ timers
    def poll(self, now_ms: int) -> CoordinatorResult:
        """Fire every timer due at `now_ms`."""
        self._begin()
        self._ensure_retention_timer(now_ms)
        self._fire_due(now_ms)
        return self._end()

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def _fire_due(self, now_ms: int) -> None:
        while True:
            due = self.timers.pop_due(now_ms)
            if due is None:
                return
            _, callback = due
            callback(now_ms)

    def _ensure_retention_timer(self, now_ms: int) -> None:
        if RETENTION_TIMER not in self.timers:
            self.timers.schedule(RETENTION_TIMER, now_ms + self.config.offsets_retention_check_interval_ms,
                                 self._on_retention_check)

    def _on_retention_check(self, now_ms: int) -> None:
        self.offset_manager.expire(now_ms)
        self.timers.schedule(RETENTION_TIMER, now_ms + self.config.offsets_retention_check_interval_ms,
                             self._on_retention_check)

    # ================================================================ admin APIs
    def describe_group(self, group_id: str) -> Any:
        """DescribeGroups entry; an unknown group is reported Dead with no error (as Kafka)."""
        group = self.groups.get(group_id)
        if group is None or group.state == S.DEAD:
            return DescribeGroupsResponse.DescribedGroup(
                error_code=0, group_id=group_id, group_state=S.DEAD.value, protocol_type="", protocol_data="",
                members=[])
        stable = group.state == S.STABLE
        members = [
            DescribeGroupsResponse.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return DescribeGroupsResponse.DescribedGroup(
            error_code=0, group_id=group_id, group_state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol_name or "") if stable else "",
            members=members,
        )

    def list_groups(self, states_filter: list[str], types_filter: list[str]) -> list[Any]:
        wanted = {parse_state(s) for s in states_filter}
        types = {t.lower() for t in types_filter}
        out = []
        for group in self.groups.values():
            if group.state == S.DEAD:
                continue
            if wanted and group.state not in wanted:
                continue
            if types and "classic" not in types:
                continue
            out.append(ListGroupsResponse.ListedGroup(group_id=group.group_id, protocol_type=group.protocol_type or "",
                                                      group_state=group.state.value, group_type="classic"))
        return out

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups for one group: tombstones its offsets and its metadata."""
        if not group_id:
            return E.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None or group.state == S.DEAD:
            return E.GROUP_ID_NOT_FOUND
        if group.state != S.EMPTY:
            return E.NON_EMPTY_GROUP
        self.offset_manager.cleanup_groups([group], lambda g: list(self.offset_manager.group_offsets(g.group_id)))
        return E.NONE

    def delete_offsets_for_topics(self, topics: set[str] | list[str], now_ms: int) -> CoordinatorResult:
        """Topics were deleted: drop their offsets (and groups left Empty without offsets)."""
        self._begin()
        self.offset_manager.delete_topics(set(topics))
        return self._end()

    # ================================================================ replay / load / unload
    def replay(self, key: bytes, value: bytes | None, producer_id: int = -1) -> None:
        """Apply one `__consumer_offsets` record to state (live and on load).

        A record of a transaction (`producer_id` >= 0) is an offset commit
        left pending until `complete_transaction`.
        """
        kv = key_version(key)
        if kv in (0, 1):
            k = decode_offset_commit_key(key)
            om = None if value is None else decode_offset_commit_value(value)
            if producer_id >= 0:
                self.offset_manager.replay_pending(producer_id, k.group, k.topic, k.partition, om)
                return
            self.offset_manager.replay(k.group, k.topic, k.partition, om)
            if om is not None and k.group not in self.groups:
                # Offsets without group metadata: a simple (standalone) group.
                self.groups[k.group] = ClassicGroup(k.group, None)
        elif kv == 2:
            group_id = decode_group_metadata_key(key).group
            if value is None:
                self.groups.pop(group_id, None)
            else:
                self._replay_group_metadata(group_id, value)
        # Other key versions are KIP-848/share-group records: not ours to apply.

    def _replay_group_metadata(self, group_id: str, raw: bytes) -> None:
        version, v = decode_group_metadata_value(raw)
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id, None)
            self.groups[group_id] = group
        group.protocol_type = v.protocol_type or None
        group.generation_id = v.generation
        group.protocol_name = v.protocol
        group.leader_id = v.leader
        ts = v.current_state_timestamp if version >= 2 else -1
        old_members = group.members
        members: dict[str, ClassicMember] = {}
        for mm in v.members:
            m = old_members.get(mm.member_id)
            if m is None:
                m = ClassicMember(
                    member_id=mm.member_id,
                    group_instance_id=mm.group_instance_id if version >= 3 else None,
                    client_id=mm.client_id, client_host=mm.client_host,
                    rebalance_timeout_ms=mm.rebalance_timeout if version >= 1 and mm.rebalance_timeout >= 0
                    else mm.session_timeout,
                    session_timeout_ms=mm.session_timeout, protocol_type=v.protocol_type,
                    protocols=[(v.protocol or "", bytes(mm.subscription))],
                )
            m.assignment = bytes(mm.assignment)
            members[mm.member_id] = m
        group.members = members
        group.static_members = {m.group_instance_id: m.member_id for m in members.values()
                                if m.group_instance_id is not None}
        group.pending_sync_members &= set(members)
        target = S.STABLE if members else S.EMPTY
        if group.state != target:
            group.previous_state, group.state = group.state, target
        group.current_state_timestamp = None if ts == -1 else ts
        group.subscribed_topics = group.compute_subscribed_topics()

    def replay_loaded(self, loaded: Any) -> Iterator[None]:
        """Replay a loaded partition (`loader.LoadedOffsets`), yielding now and then."""
        replay = self.replay
        for i, (key, value) in enumerate(loaded.latest.items()):
            replay(key, value)
            if i % _LOAD_YIELD_EVERY == _LOAD_YIELD_EVERY - 1:
                yield
        for producer_id, records in loaded.pending.items():
            for key, value in records.items():
                replay(key, value, producer_id)

    def complete_transaction(self, producer_id: int, commit: bool, now_ms: int) -> CoordinatorResult:
        """A marker for `producer_id` was appended: its pending offsets become committed, or vanish."""
        self._begin()
        for group_id in self.offset_manager.replay_marker(producer_id, commit):
            if group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id, None)
        self._fire_due(now_ms)
        return self._end()

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        """After a load: re-arm member session timers and the retention check."""
        self._begin()
        self.classic.on_loaded(now_ms)
        self._ensure_retention_timer(now_ms)
        self._fire_due(now_ms)
        return self._end()

    def unload(self) -> CoordinatorResult:
        """The partition moved away: answer parked requests NOT_COORDINATOR; groups Dead."""
        self._begin()
        self.classic.fail_all_pending(E.NOT_COORDINATOR)
        for group in self.groups.values():
            group.previous_state, group.state = group.state, S.DEAD
        self.groups.clear()
        self.offset_manager.clear()
        self.timers.clear()
        return self._end()

    # ================================================================ inspection
    def snapshot(self) -> dict[str, Any]:
        """Persisted-state view (for tests comparing live and replayed shards)."""
        groups = {}
        for gid, g in sorted(self.groups.items()):
            groups[gid] = {
                "state": g.state.value, "generation": g.generation_id, "protocol_type": g.protocol_type,
                "protocol": g.protocol_name, "leader": g.leader_id,
                "members": {mid: (m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                                  m.rebalance_timeout_ms, m.metadata(g.protocol_name) if g.protocol_name else b"",
                                  m.assignment)
                            for mid, m in g.members.items()},
                "offsets": dict(sorted(self.offset_manager.group_offsets(gid).items())),
            }
        return groups
