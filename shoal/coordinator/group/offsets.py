"""Committed offsets: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete and retention (KIP-211).

Kafka's OffsetMetadataManager, for groups of every type. Offsets change only through
records: handlers emit OffsetCommit records/tombstones via `shard.emit`,
which replays them into `self.offsets`.

Transactional offsets (TxnOffsetCommit, KIP-98/447) are records of a
producer's transaction: they stay pending per producer id until its marker.
COMMIT makes them committed, ABORT drops them; a plain commit written after a
pending record for the same partition supersedes it (it is later in the
log). While a partition has pending offsets, OffsetFetch with require_stable
answers UNSTABLE_OFFSET_COMMIT for it and the group's offsets do not expire.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shoal.coordinator.group.records import (
    OffsetAndMetadata,
    decode_offset_commit_key,
    decode_offset_commit_value,
    offset_commit_record,
    offset_commit_tombstone,
)
from shoal.coordinator.group.responses import error_response, offset_commit_response, offset_fetch_group_error
from shoal.coordinator.group.types import Group, TopicPartition
from shoal.coordinator.result import ShardRequest
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.offset_delete_response import OffsetDeleteResponse
from shoal.protocol.generated.offset_fetch_response import OffsetFetchResponse
from shoal.protocol.generated.txn_offset_commit_response import TxnOffsetCommitResponse

if TYPE_CHECKING:
    from shoal.coordinator.group.shard import GroupCoordinatorShard

log = logging.getLogger(__name__)
E = ErrorCode


class OffsetMetadataManager:
    """Holds every group's committed offsets of one `__consumer_offsets` partition (a
    `types.GroupTypeManager`: it knows groups only as `types.Group`)."""

    record_key_versions = frozenset({0, 1})  # OffsetCommitKey (v0 is the legacy one)

    def __init__(self, shard: GroupCoordinatorShard) -> None:
        self.shard = shard
        self._handlers: dict[ApiKey, Callable[[ShardRequest, Any, int], Any]] = {
            ApiKey.OFFSET_COMMIT: self.commit, ApiKey.TXN_OFFSET_COMMIT: self.commit_transactional,
            ApiKey.OFFSET_FETCH: self.fetch, ApiKey.OFFSET_DELETE: self.delete}
        self.api_keys = frozenset(self._handlers)
        self.config = shard.config
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        # producer id -> (group, topic, partition) -> offset awaiting the transaction's marker
        self.pending: dict[int, dict[tuple[str, str, int], OffsetAndMetadata | None]] = {}
        # group -> partition -> producer ids with a pending offset for it
        self._pending_index: dict[str, dict[TopicPartition, set[int]]] = {}

    def handle(self, ctx: ShardRequest, request: Any, now_ms: int) -> Any:
        return self._handlers[ctx.api_key](ctx, request, now_ms)

    def on_loaded(self, now_ms: int) -> None:
        pass

    def unload(self) -> None:
        self.offsets.clear()
        self.pending.clear()
        self._pending_index.clear()

    # ---------------------------------------------------------------- replay
    def replay(self, key: bytes, value: bytes | None, producer_id: int) -> None:
        """An OffsetCommit record; one of a transaction (`producer_id` >= 0) stays pending until its
        marker (`replay_marker`)."""
        k = decode_offset_commit_key(key)
        om = None if value is None else decode_offset_commit_value(value)
        if producer_id >= 0:
            self.replay_pending(producer_id, k.group, k.topic, k.partition, om)
            return
        self.replay_offset(k.group, k.topic, k.partition, om)
        if om is not None:
            self.shard.simple_group(k.group)  # offsets without group metadata: a standalone group

    def replay_offset(self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata | None) -> None:
        pids = self._pending_index.get(group_id, {}).get((topic, partition))
        if pids:  # later in the log than every pending record for it
            for pid in list(pids):
                self._unpend(pid, (group_id, topic, partition))
        self._set(group_id, topic, partition, value)

    def _set(self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata | None) -> None:
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

    def replay_pending(self, producer_id: int, group_id: str, topic: str, partition: int,
                       value: OffsetAndMetadata | None) -> None:
        self.pending.setdefault(producer_id, {})[(group_id, topic, partition)] = value
        self._pending_index.setdefault(group_id, {}).setdefault((topic, partition), set()).add(producer_id)

    def _unpend(self, producer_id: int, key: tuple[str, str, int]) -> None:
        recs = self.pending.get(producer_id)
        if recs is not None:
            recs.pop(key, None)
            if not recs:
                del self.pending[producer_id]
        group_id, topic, partition = key
        by_tp = self._pending_index.get(group_id)
        if by_tp is not None:
            pids = by_tp.get((topic, partition))
            if pids is not None:
                pids.discard(producer_id)
                if not pids:
                    del by_tp[(topic, partition)]
            if not by_tp:
                del self._pending_index[group_id]

    def replay_marker(self, producer_id: int, commit: bool) -> set[str]:
        """Apply a transaction marker; returns the groups whose offsets it committed."""
        recs = self.pending.get(producer_id)
        if not recs:
            return set()
        touched = set()
        for key, value in list(recs.items()):
            self._unpend(producer_id, key)
            if commit:
                self._set(*key, value)
                touched.add(key[0])
        return touched

    def has_pending(self, group_id: str, tp: TopicPartition | None = None) -> bool:
        by_tp = self._pending_index.get(group_id)
        if not by_tp:
            return False
        return tp is None or tp in by_tp

    # ---------------------------------------------------------------- OffsetCommit
    def commit(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any:
        v = ctx.api_version
        generation = req.generation_id_or_member_epoch if v >= 1 else -1
        member_id = req.member_id if v >= 1 else ""
        instance_id = req.group_instance_id if v >= 7 else None
        retention = req.retention_time_ms if 2 <= v <= 4 else -1
        requested = [(t.name, t.partitions) for t in req.topics]
        error = self._refused(req.group_id, member_id, instance_id, generation, transactional=False, now_ms=now_ms,
                              api_version=v)
        if error is not None:
            return offset_commit_response([(n, [(p.partition_index, error) for p in ps]) for n, ps in requested])
        expire = None if retention == -1 else now_ms + retention

        def offset(p: Any, metadata: str) -> OffsetAndMetadata:
            commit_ts = p.commit_timestamp if v == 1 and p.commit_timestamp != -1 else now_ms
            return OffsetAndMetadata(offset=p.committed_offset,
                                     leader_epoch=p.committed_leader_epoch if v >= 6 else -1,
                                     metadata=metadata, commit_timestamp=commit_ts, expire_timestamp=expire)

        return offset_commit_response(self._emit_offsets(req.group_id, requested, offset))

    def _refused(self, group_id: str, member_id: str, instance_id: str | None, generation: int, *,
                 transactional: bool, now_ms: int, api_version: int = 9) -> ErrorCode | None:
        """Why a commit to ``group_id`` is refused (None: it is not)."""
        group = self.shard.groups.get(group_id)
        if group is None:
            # No such group: an old generation, unless a simple (standalone) committer (the replayed
            # records create the Empty group).
            return E.ILLEGAL_GENERATION if generation >= 0 else None
        return group.validate_offset_commit(member_id, instance_id, generation, transactional=transactional,
                                            now_ms=now_ms, api_version=api_version)

    def _emit_offsets(self, group_id: str, requested: list[tuple[str, Any]],
                      offset: Callable[[Any, str], OffsetAndMetadata], producer_id: int = -1,
                      producer_epoch: int = -1) -> list[tuple[str, list[tuple[int, int]]]]:
        """Emit an offset record per requested partition (metadata size checked); their errors."""
        max_bytes = self.config.offset_metadata_max_bytes
        result = []
        for name, parts in requested:
            out: list[tuple[int, int]] = []
            for p in parts:
                metadata = p.committed_metadata if p.committed_metadata is not None else ""
                if len(metadata.encode("utf-8")) > max_bytes:
                    out.append((p.partition_index, E.OFFSET_METADATA_TOO_LARGE))
                    continue
                key, value = offset_commit_record(group_id, name, p.partition_index, offset(p, metadata))
                self.shard.emit(key, value, producer_id, producer_epoch)
                out.append((p.partition_index, E.NONE))
            result.append((name, out))
        return result

    # ---------------------------------------------------------------- TxnOffsetCommit
    def commit_transactional(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any:
        """TxnOffsetCommit: offsets written in the producer's transaction, pending until its marker."""
        v = ctx.api_version
        generation = req.generation_id if v >= 3 else -1
        member_id = req.member_id if v >= 3 else ""
        instance_id = req.group_instance_id if v >= 3 else None
        requested = [(t.name, t.partitions) for t in req.topics]
        error = self._refused(req.group_id, member_id, instance_id, generation, transactional=True, now_ms=now_ms)
        if error is not None:
            return offset_commit_response([(n, [(p.partition_index, error) for p in ps]) for n, ps in requested],
                                          TxnOffsetCommitResponse)

        def offset(p: Any, metadata: str) -> OffsetAndMetadata:
            return OffsetAndMetadata(offset=p.committed_offset, leader_epoch=p.committed_leader_epoch if v >= 2 else -1,
                                     metadata=metadata, commit_timestamp=now_ms)

        return offset_commit_response(
            self._emit_offsets(req.group_id, requested, offset, req.producer_id, req.producer_epoch),
            TxnOffsetCommitResponse)

    # ---------------------------------------------------------------- OffsetFetch
    def fetch_group(self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool,
                    member_id: str | None = None, member_epoch: int = -1
                    ) -> ErrorCode | list[tuple[str, list[tuple[int, OffsetAndMetadata | None | ErrorCode]]]]:
        """Committed offsets of `group_id`: requested partitions (None = all committed ones), or the
        group's error.

        With `require_stable`, a partition with a pending transactional offset
        comes back as UNSTABLE_OFFSET_COMMIT instead of an offset.
        """
        group = self.shard.groups.get(group_id)
        error = None if group is None else group.validate_offset_fetch(member_id, member_epoch)
        if error is not None and error != E.GROUP_ID_NOT_FOUND:
            return error
        committed = self.group_offsets(group_id) if group is not None and error is None else {}
        unstable = self._pending_index.get(group_id, {}) if require_stable else {}

        def value(t: str, p: int) -> OffsetAndMetadata | None | ErrorCode:
            return E.UNSTABLE_OFFSET_COMMIT if (t, p) in unstable else committed.get((t, p))

        if topics is None:
            by_topic: dict[str, list[tuple[int, OffsetAndMetadata | None | ErrorCode]]] = {}
            for topic, partition in set(committed) | set(unstable):
                by_topic.setdefault(topic, []).append((partition, value(topic, partition)))
            return [(t, sorted(ps, key=lambda x: x[0])) for t, ps in by_topic.items()]
        return [(t, [(p, value(t, p)) for p in ps]) for t, ps in topics]

    def fetch(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any:
        v = ctx.api_version
        require_stable = bool(req.require_stable) if v >= 7 else False
        if v >= 8:
            groups = []
            for g in req.groups:
                topics = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
                member = (g.member_id, g.member_epoch) if v >= 9 else (None, -1)
                data = self.fetch_group(g.group_id, topics, require_stable, *member)
                if isinstance(data, ErrorCode):
                    groups.append(offset_fetch_group_error(g.group_id, data))
                    continue
                groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id=g.group_id, error_code=0,
                    topics=[OffsetFetchResponse.OffsetFetchResponseTopics(
                        name=t, partitions=[_fetch_partition(OffsetFetchResponse.OffsetFetchResponsePartitions, p, om)
                                            for p, om in ps]) for t, ps in data],
                ))
            return OffsetFetchResponse(groups=groups)
        topics = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
        data = self.fetch_group(req.group_id, topics, require_stable)
        if isinstance(data, ErrorCode):
            return error_response(ApiKey.OFFSET_FETCH, v, req, data)
        return OffsetFetchResponse(
            error_code=0,
            topics=[OffsetFetchResponse.OffsetFetchResponseTopic(
                name=t, partitions=[_fetch_partition(OffsetFetchResponse.OffsetFetchResponsePartition, p, om)
                                    for p, om in ps]) for t, ps in data],
        )

    # ---------------------------------------------------------------- OffsetDelete
    def delete(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any:
        group = self.shard.groups.get(req.group_id)
        requested = [(t.name, [p.partition_index for p in t.partitions]) for t in req.topics]
        if group is None:
            return OffsetDeleteResponse(error_code=E.GROUP_ID_NOT_FOUND, topics=[])
        errors = group.validate_offset_delete([(t, p) for t, ps in requested for p in ps])
        if isinstance(errors, ErrorCode):
            return OffsetDeleteResponse(error_code=errors, topics=[])
        eligible = [(t, p) for t, ps in requested for p in ps if errors[(t, p)] == E.NONE]
        if eligible:
            # Kafka 4 (OffsetMetadataManager.deleteOffsets) writes the tombstones only: an Empty group
            # left without offsets stays, for DeleteGroups, until the retention pass removes it.
            self.cleanup_groups([group], lambda g: [tp for tp in eligible if tp in self.group_offsets(g.group_id)],
                                keep_group=True)
        return OffsetDeleteResponse(
            error_code=0,
            topics=[OffsetDeleteResponse.OffsetDeleteResponseTopic(
                name=t, partitions=[OffsetDeleteResponse.OffsetDeleteResponsePartition(
                    partition_index=p, error_code=int(errors[(t, p)])) for p in ps]) for t, ps in requested],
        )

    # ---------------------------------------------------------------- retention
    def cleanup_groups(self, groups: list[Group], select: Callable[[Group], list[TopicPartition]],
                       keep_group: bool = False) -> int:
        """Tombstone the offsets `select(group)` names; an Empty group left without offsets dies
        (unless `keep_group`).

        Kafka's cleanupGroupMetadata. Returns the number of offsets removed.
        """
        removed = 0
        for group in groups:
            for topic, partition in select(group):
                self.shard.emit(*offset_commit_tombstone(group.group_id, topic, partition))
                removed += 1
            if not keep_group and group.is_empty() and not self.group_offsets(group.group_id):
                log.info("[GroupId %s] Deleting the group: it is Empty and has no offsets left.", group.group_id)
                for key, value in group.tombstone_records():
                    self.shard.emit(key, value)
        return removed

    def expired_offsets(self, group: Group, now_ms: int) -> list[TopicPartition]:
        """KIP-211: which of the group's offsets have outlived offsets.retention.minutes."""
        retention = self.config.offsets_retention_ms
        committed = self.group_offsets(group.group_id)
        if not committed or self.has_pending(group.group_id):
            return []  # a group with an open transaction keeps its offsets (Kafka's cleanupExpiredOffsets)
        condition = group.offset_expiration()
        if condition is None:
            return []
        out = []
        for tp, om in committed.items():
            if tp[0] in condition.kept_topics:
                continue
            if om.expire_timestamp is not None:
                if now_ms >= om.expire_timestamp:
                    out.append(tp)
            elif now_ms - condition.base(om) >= retention:
                out.append(tp)
        return out

    def expire(self, now_ms: int) -> int:
        """One retention pass over every group of the shard."""
        removed = self.cleanup_groups(list(self.shard.groups.values()), lambda g: self.expired_offsets(g, now_ms))
        if removed:
            log.info("Partition %d: removed %d expired offsets.", self.shard.partition, removed)
        return removed

    def delete_topics(self, topics: set[str]) -> int:
        groups = [g for gid, g in self.shard.groups.items() if any(t in topics for t, _ in self.group_offsets(gid))]
        return self.cleanup_groups(groups, lambda g: [tp for tp in self.group_offsets(g.group_id) if tp[0] in topics])


def _fetch_partition(cls: type, partition: int, om: OffsetAndMetadata | None | ErrorCode) -> Any:
    if isinstance(om, ErrorCode):
        return cls(partition_index=partition, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                   error_code=int(om))
    if om is None:
        return cls(partition_index=partition, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=0)
    return cls(partition_index=partition, committed_offset=om.offset, committed_leader_epoch=om.leader_epoch,
               metadata=om.metadata, error_code=0)
