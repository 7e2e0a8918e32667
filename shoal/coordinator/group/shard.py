"""GroupCoordinatorShard: the deterministic group coordinator of one `__consumer_offsets` partition.

Feed it requests (`handle`) and time (`poll`); it returns a CoordinatorResult:
responses to send and records to append. The runtime appends the records
first and only then sends the responses. `replay` is the one code path that
applies a record to state: the shard calls it for every record it emits,
and the runtime calls it for every record of the partition on load.

The work is done by plug-ins (`types.GroupTypeManager`): the classic group
protocol, the offsets shared by every group type, and the admin APIs. The
shard dispatches requests and replays records through tables built from
them; a record of a key version no plug-in replays is logged and kept out of
state. The consumer (KIP-848) and share (KIP-932) group types read topics
through a narrow `TopicsView` the broker supplies.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from shoal import entropy
from shoal.assignors.server import ServerAssignor
from shoal.coordinator.group.admin import GroupAdminManager
from shoal.coordinator.group.classic import ClassicGroupManager
from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.consumer.group import ConsumerGroup
from shoal.coordinator.group.consumer.heartbeat import ConsumerGroupManager
from shoal.coordinator.group.consumer.topics import TopicsView
from shoal.coordinator.group.migration import GroupMigration
from shoal.coordinator.group.offsets import OffsetMetadataManager
from shoal.coordinator.group.records import key_version
from shoal.coordinator.group.responses import error_response, join_response
from shoal.coordinator.group.share.group import ShareGroup
from shoal.coordinator.group.share.heartbeat import ShareGroupManager
from shoal.coordinator.group.types import Group, GroupTypeManager
from shoal.coordinator.result import CoordinatorResult, Record, ShardRequest
from shoal.coordinator.shard import ShardSkeleton
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey

log = logging.getLogger(__name__)
RETENTION_TIMER = ("offsets-retention",)
_LOAD_YIELD_EVERY = 50_000

__all__ = ["CoordinatorResult", "GroupCoordinatorShard", "Record", "ShardRequest"]


class GroupCoordinatorShard(ShardSkeleton):
    """All groups and offsets of one `__consumer_offsets` partition."""

    def __init__(self, partition: int, config: GroupConfig | None = None, *,
                 member_id_suffix: Callable[[], str] | None = None, topics: TopicsView | None = None,
                 assignors: Mapping[str, ServerAssignor] | None = None) -> None:
        super().__init__(partition)
        self.config = config or GroupConfig()
        self.member_id_suffix: Callable[[], str] = member_id_suffix or (lambda: str(entropy.uuid4()))
        self.groups: dict[str, Group] = {}
        self.classic = ClassicGroupManager(self)
        self.offset_manager = OffsetMetadataManager(self)
        self.admin = GroupAdminManager(self)
        self.consumer = ConsumerGroupManager(self, topics, assignors)
        self.share = ShareGroupManager(self, topics)
        self.migration = GroupMigration(self)
        self.managers: list[GroupTypeManager] = [self.classic, self.consumer, self.share, self.offset_manager,
                                                 self.admin]
        self._replayers: dict[int, GroupTypeManager] = {}
        for manager in self.managers:
            self.handlers.update(dict.fromkeys(manager.api_keys, manager.handle))
            self._replayers.update(dict.fromkeys(manager.record_key_versions, manager))
        self.handlers[ApiKey.JOIN_GROUP] = self._join_group
        mixed = {ApiKey.SYNC_GROUP: self.migration.sync, ApiKey.HEARTBEAT: self.migration.heartbeat,
                 ApiKey.LEAVE_GROUP: self.migration.leave}
        for api_key, in_consumer_group in mixed.items():
            self.handlers[api_key] = self._classic_request(self.handlers[api_key], in_consumer_group)

    def _classic_request(self, classic: Callable[[ShardRequest, Any, int], Any],
                         in_consumer_group: Callable[[ShardRequest, Any, ConsumerGroup, int], Any]
                         ) -> Callable[[ShardRequest, Any, int], Any]:
        """A classic request goes to the consumer group of its id when there is one (a mixed group)."""
        def handle(ctx: ShardRequest, request: Any, now_ms: int) -> Any:
            group = self.groups.get(request.group_id) if request.group_id else None
            if isinstance(group, ConsumerGroup):
                return in_consumer_group(ctx, request, group, now_ms)
            if isinstance(group, ShareGroup):  # Kafka 4.4: UnknownMemberIdException("Group X not found.")
                return error_response(ctx.api_key, ctx.api_version, request, ErrorCode.UNKNOWN_MEMBER_ID)
            return classic(ctx, request, now_ms)
        return handle

    def _join_group(self, ctx: ShardRequest, request: Any, now_ms: int) -> Any:
        """A classic JoinGroup: a non-empty consumer group takes the member in (Kafka's
        classicGroupJoinToConsumerGroup); an Empty one makes way."""
        group = self.groups.get(request.group_id)
        if isinstance(group, ConsumerGroup) and not group.is_empty():
            return self.migration.join(ctx, request, group, now_ms)
        if isinstance(group, ShareGroup):  # Kafka 4.4: a group of another type
            return join_response(ctx.api_version, error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id="")
        error = self.consumer.before_classic_join(request.group_id)
        if error is not None:
            return join_response(ctx.api_version, error=error, member_id=request.member_id)
        return self.classic.handle(ctx, request, now_ms)

    def simple_group(self, group_id: str) -> Group:
        """The group of standalone commits, created (an Empty classic group, as Kafka) if there is none."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = self.classic.new_group(group_id, None)
        return group

    def share_group_member(self, group_id: str, member_id: str) -> bool:
        """Whether `member_id` is a member of the share group `group_id` (for the share-fetch data path)."""
        group = self.groups.get(group_id)
        return isinstance(group, ShareGroup) and member_id in group.members

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

    # ================================================================ requests, timers
    def _unsupported(self, ctx: ShardRequest, request: Any) -> Any:
        return error_response(ctx.api_key, ctx.api_version, request, ErrorCode.UNSUPPORTED_VERSION)

    def _ensure_timers(self, now_ms: int) -> None:
        if RETENTION_TIMER not in self.timers:
            self.timers.schedule(RETENTION_TIMER, now_ms + self.config.offsets_retention_check_interval_ms,
                                 self._on_retention_check)

    def _on_retention_check(self, now_ms: int) -> None:
        self.offset_manager.expire(now_ms)
        self.timers.schedule(RETENTION_TIMER, now_ms + self.config.offsets_retention_check_interval_ms,
                             self._on_retention_check)

    def forget_share_topics(self, group_id: str, topic_ids: set[uuid.UUID], now_ms: int) -> CoordinatorResult:
        """DeleteShareGroupOffsets deleted these topics' share state: they leave the share group's
        ShareGroupStatePartitionMetadata."""
        self._begin()
        self.share.forget_topics(group_id, topic_ids)
        return self._end()

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
        version = key_version(key)
        manager = self._replayers.get(version)
        if manager is None:
            self.skip_record(version)
        else:
            manager.replay(key, value, producer_id)

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
            self.simple_group(group_id)
        self._fire_due(now_ms)
        return self._end()

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        """After a load: re-arm member session timers and the retention check."""
        self._begin()
        log.info("Loaded %d groups and the offsets of %d groups from __consumer_offsets-%d.", len(self.groups),
                 len(self.offset_manager.offsets), self.partition)
        for manager in self.managers:
            manager.on_loaded(now_ms)
        self._ensure_timers(now_ms)
        self._fire_due(now_ms)
        return self._end()

    def unload(self) -> CoordinatorResult:
        """The partition moved away: answer parked requests NOT_COORDINATOR; groups Dead."""
        self._begin()
        log.info("Unloading __consumer_offsets-%d: removing %d cached groups and the offsets of %d groups.",
                 self.partition, len(self.groups), len(self.offset_manager.offsets))
        for manager in self.managers:
            manager.unload()
        self.groups.clear()
        self.timers.clear()
        return self._end()
