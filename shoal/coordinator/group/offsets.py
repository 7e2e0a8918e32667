"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and retention (KIP-211).

Kafka's OffsetMetadataManager for classic groups. Offsets change only through
records: handlers emit OffsetCommit records/tombstones via `shard.emit`,
which replays them into `self.offsets`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shoal.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from shoal.coordinator.group.group import ClassicGroup
from shoal.coordinator.group.records import (
    OffsetAndMetadata,
    group_metadata_tombstone,
    offset_commit_record,
    offset_commit_tombstone,
)
from shoal.coordinator.group.responses import offset_commit_response
from shoal.coordinator.group.state import GroupState
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.offset_delete_response import OffsetDeleteResponse
from shoal.protocol.generated.offset_fetch_response import OffsetFetchResponse

if TYPE_CHECKING:
    from shoal.coordinator.group.shard import GroupCoordinatorShard, RequestContext

E = ErrorCode
S = GroupState
TopicPartition = tuple[str, int]


class OffsetMetadataManager:
    """Holds every group's committed offsets of one `__consumer_offsets` partition."""

    def __init__(self, shard: GroupCoordinatorShard) -> None:
        self.shard = shard
        self.config = shard.config
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}

    # ---------------------------------------------------------------- replay
    def replay(self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata | None) -> None:
        if value is None:
            group_offsets = self.offsets.get(group_id)
            if group_offsets is not None:
                group_offsets.pop((topic, partition), None)
                if not group_offsets:
                    del self.offsets[group_id]
        else:
            self.offsets.setdefault(group_id, {})[(topic, partition)] = value

    def group_offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.offsets.get(group_id, {})

    # ---------------------------------------------------------------- OffsetCommit
    def _validate_commit(self, group: ClassicGroup, generation: int, member_id: str, instance_id: str | None) -> ErrorCode | None:
        if group.state == S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation >= 0 or member_id != "" or instance_id is not None:
            if group.is_static_member_fenced(member_id, instance_id):
                return E.FENCED_INSTANCE_ID
            if not group.has_member(member_id):
                return E.UNKNOWN_MEMBER_ID
            if generation != group.generation_id:
                return E.ILLEGAL_GENERATION
            return None
        if group.state != S.EMPTY:
            # Only members may commit to a group that has members.
            return E.UNKNOWN_MEMBER_ID
        return None

    def commit(self, ctx: RequestContext, req: Any, now_ms: int) -> Any:
        v = ctx.api_version
        generation = req.generation_id_or_member_epoch if v >= 1 else -1
        member_id = req.member_id if v >= 1 else ""
        instance_id = req.group_instance_id if v >= 7 else None
        retention = req.retention_time_ms if 2 <= v <= 4 else -1
        requested = [(t.name, t.partitions) for t in req.topics]

        def all_failed(error: ErrorCode) -> Any:
            return offset_commit_response([(n, [(p.partition_index, error) for p in ps]) for n, ps in requested])

        group = self.shard.groups.get(req.group_id)
        if group is None:
            if generation >= 0:
                # Not a simple commit, and no such group: an old generation.
                return all_failed(E.ILLEGAL_GENERATION)
            # A simple (standalone) consumer: the replayed records create the Empty group.
        else:
            error = self._validate_commit(group, generation, member_id, instance_id)
            if error is not None:
                return all_failed(error)
            if group.state == S.COMPLETING_REBALANCE:
                return all_failed(E.REBALANCE_IN_PROGRESS)
            member = group.members.get(member_id)
            if member is not None and group.state in (S.STABLE, S.PREPARING_REBALANCE):
                # A commit from a member counts as a heartbeat.
                self.shard.classic.schedule_heartbeat(group, member, now_ms)
        expire = None if retention == -1 else now_ms + retention
        max_bytes = self.config.offset_metadata_max_bytes
        result = []
        for name, parts in requested:
            out = []
            for p in parts:
                metadata = p.committed_metadata if p.committed_metadata is not None else ""
                if len(metadata.encode("utf-8")) > max_bytes:
                    out.append((p.partition_index, E.OFFSET_METADATA_TOO_LARGE))
                    continue
                commit_ts = now_ms
                if v == 1 and p.commit_timestamp != -1:
                    commit_ts = p.commit_timestamp
                om = OffsetAndMetadata(
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch if v >= 6 else -1,
                    metadata=metadata, commit_timestamp=commit_ts, expire_timestamp=expire,
                )
                self.shard.emit(*offset_commit_record(req.group_id, name, p.partition_index, om))
                out.append((p.partition_index, E.NONE))
            result.append((name, out))
        return offset_commit_response(result)

    # ---------------------------------------------------------------- OffsetFetch
    def fetch_group(self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool
                    ) -> list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]:
        """Committed offsets of `group_id`: requested partitions (None = all committed ones)."""
        group = self.shard.groups.get(group_id)
        committed = self.group_offsets(group_id) if group is not None and group.state != S.DEAD else {}
        if topics is None:
            by_topic: dict[str, list[tuple[int, OffsetAndMetadata | None]]] = {}
            for (topic, partition), om in committed.items():
                by_topic.setdefault(topic, []).append((partition, om))
            return [(t, sorted(ps, key=lambda x: x[0])) for t, ps in by_topic.items()]
        return [(t, [(p, committed.get((t, p))) for p in ps]) for t, ps in topics]

    def fetch(self, ctx: RequestContext, req: Any, now_ms: int) -> Any:
        v = ctx.api_version
        require_stable = bool(req.require_stable) if v >= 7 else False
        if v >= 8:
            groups = []
            for g in req.groups:
                topics = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
                data = self.fetch_group(g.group_id, topics, require_stable)
                groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id=g.group_id, error_code=0,
                    topics=[OffsetFetchResponse.OffsetFetchResponseTopics(
                        name=t, partitions=[_fetch_partition(OffsetFetchResponse.OffsetFetchResponsePartitions, p, om)
                                            for p, om in ps]) for t, ps in data],
                ))
            return OffsetFetchResponse(groups=groups)
        topics = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
        data = self.fetch_group(req.group_id, topics, require_stable)
        return OffsetFetchResponse(
            error_code=0,
            topics=[OffsetFetchResponse.OffsetFetchResponseTopic(
                name=t, partitions=[_fetch_partition(OffsetFetchResponse.OffsetFetchResponsePartition, p, om)
                                    for p, om in ps]) for t, ps in data],
        )

    # ---------------------------------------------------------------- OffsetDelete
    def delete(self, ctx: RequestContext, req: Any, now_ms: int) -> Any:
        group = self.shard.groups.get(req.group_id)
        requested = [(t.name, [p.partition_index for p in t.partitions]) for t in req.topics]
        if group is None or group.state == S.DEAD:
            return OffsetDeleteResponse(error_code=E.GROUP_ID_NOT_FOUND, topics=[])
        errors: dict[TopicPartition, ErrorCode] = {}
        eligible: list[TopicPartition] = []
        if group.state == S.EMPTY:
            eligible = [(t, p) for t, ps in requested for p in ps]
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            for t, ps in requested:
                for p in ps:
                    if group.is_subscribed_to_topic(t):
                        errors[(t, p)] = E.GROUP_SUBSCRIBED_TO_TOPIC
                    else:
                        eligible.append((t, p))
        else:
            return OffsetDeleteResponse(error_code=E.NON_EMPTY_GROUP, topics=[])
        if eligible:
            self.cleanup_groups([group], lambda g: [tp for tp in eligible if tp in self.group_offsets(g.group_id)])
            for tp in eligible:
                errors[tp] = E.NONE
        return OffsetDeleteResponse(
            error_code=0,
            topics=[OffsetDeleteResponse.OffsetDeleteResponseTopic(
                name=t, partitions=[OffsetDeleteResponse.OffsetDeleteResponsePartition(
                    partition_index=p, error_code=int(errors[(t, p)])) for p in ps]) for t, ps in requested],
        )

    # ---------------------------------------------------------------- retention
    def cleanup_groups(self, groups: list[ClassicGroup], select) -> int:
        """Tombstone the offsets `select(group)` names; an Empty group left without offsets dies.

        Kafka's cleanupGroupMetadata. Returns the number of offsets removed.
        """
        removed = 0
        for group in groups:
            for topic, partition in select(group):
                self.shard.emit(*offset_commit_tombstone(group.group_id, topic, partition))
                removed += 1
            if group.state == S.EMPTY and not self.group_offsets(group.group_id):
                group.transition_to(S.DEAD, None)
                self.shard.emit(*group_metadata_tombstone(group.group_id))
        return removed

    def expired_offsets(self, group: ClassicGroup, now_ms: int) -> list[TopicPartition]:
        """KIP-211: which of the group's offsets have outlived offsets.retention.minutes."""
        retention = self.config.offsets_retention_ms
        committed = self.group_offsets(group.group_id)
        if not committed:
            return []
        exclude: set[str] = set()
        if group.protocol_type and group.state == S.EMPTY:
            # Counted from when the group became Empty (else from the commit).
            def base(om: OffsetAndMetadata) -> int:
                ts = group.current_state_timestamp
                return om.commit_timestamp if ts is None else ts
        elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.state == S.STABLE
              and group.subscribed_topics is not None):
            exclude = group.subscribed_topics

            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp
        elif not group.protocol_type:
            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp
        else:
            return []
        out = []
        for tp, om in committed.items():
            if tp[0] in exclude:
                continue
            if om.expire_timestamp is not None:
                if now_ms >= om.expire_timestamp:
                    out.append(tp)
            elif now_ms - base(om) >= retention:
                out.append(tp)
        return out

    def expire(self, now_ms: int) -> int:
        """One retention pass over every group of the shard."""
        groups = list(self.shard.groups.values())
        return self.cleanup_groups(groups, lambda g: self.expired_offsets(g, now_ms))

    def delete_topics(self, topics: set[str]) -> int:
        groups = [g for gid, g in self.shard.groups.items() if any(t in topics for t, _ in self.group_offsets(gid))]
        return self.cleanup_groups(groups, lambda g: [tp for tp in self.group_offsets(g.group_id) if tp[0] in topics])


def _fetch_partition(cls: type, partition: int, om: OffsetAndMetadata | None) -> Any:
    if om is None:
        return cls(partition_index=partition, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=0)
    return cls(partition_index=partition, committed_offset=om.offset, committed_leader_epoch=om.leader_epoch,
               metadata=om.metadata, error_code=0)
