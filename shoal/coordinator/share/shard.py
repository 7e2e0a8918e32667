"""ShareCoordinatorShard: the share-partition states of one `__share_group_state` partition.

Sans-IO, as the other shards: each operation returns its answer and a CoordinatorResult whose records
the runtime appends before the answer is released; `replay` is the one path that applies a record,
used live (every operation replays what it emits) and on load.

Records: shoal writes every change as a ShareSnapshot (snapshot epoch + 1), never a ShareUpdate.
Kafka writes ShareUpdate records (only the changed batches) and a snapshot every
share.coordinator.snapshot.update.records.per.snapshot; in a compacted topic only the last update of a
share-partition survives, so a state built from snapshots alone is the one that a compacted log
(and `latest_records`) always gives back whole. ShareUpdate records written by Kafka are still
replayed: merged into the state when they carry its snapshot epoch, ignored otherwise (an update from
before the latest snapshot). A delete writes tombstones for both keys of the share-partition.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from shoal.coordinator.result import CoordinatorResult, ShardRequest
from shoal.coordinator.shard import ShardSkeleton
from shoal.coordinator.share.records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareKey,
    decode_key,
    decode_snapshot,
    decode_update,
    snapshot_key,
    snapshot_value,
    update_key,
)
from shoal.coordinator.share.state import ShareState, as_batches, combine_batches
from shoal.protocol.errors import ErrorCode

log = logging.getLogger(__name__)
_LOAD_YIELD_EVERY = 10_000


def copy_state(state: ShareState) -> ShareState:
    return replace(state, state_batches=list(state.state_batches))


class ShareCoordinatorShard(ShardSkeleton):
    """Share-partition key -> ShareState, for one partition of `__share_group_state`."""

    def __init__(self, partition: int) -> None:
        super().__init__(partition)
        self.states: dict[ShareKey, ShareState] = {}

    # ---------------------------------------------------------------- the runtime's hooks
    def _unsupported(self, ctx: ShardRequest, request: Any) -> Any:
        raise NotImplementedError(f"the share coordinator takes no {ctx.api_key.name} requests")

    def replay_loaded(self, loaded: Any) -> Iterator[None]:
        """Replay `{key: value}` (the partition's latest records, in first-seen key order)."""
        for i, (key, value) in enumerate(loaded.items()):
            self.replay(key, value)
            if i % _LOAD_YIELD_EVERY == _LOAD_YIELD_EVERY - 1:
                yield

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult()

    def unload(self) -> CoordinatorResult:
        self.states.clear()
        return CoordinatorResult()

    # ---------------------------------------------------------------- replay
    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None) -> None:
        """Apply one record: a snapshot replaces the state, an update of its snapshot epoch merges into it,
        a snapshot tombstone removes it."""
        try:
            record_type, skey = decode_key(key)
        except ValueError:
            self.skip_record(int.from_bytes(bytes(key[:2]), "big", signed=True))
            return
        if record_type == SHARE_SNAPSHOT:
            if value is None:
                self.states.pop(skey, None)
            else:
                self.states[skey] = decode_snapshot(value)
            return
        if record_type == SHARE_UPDATE and value is not None:
            current = self.states.get(skey)
            update = decode_update(value)
            if current is None or update.snapshot_epoch != current.snapshot_epoch:
                return
            start = current.start_offset if update.start_offset == -1 else update.start_offset
            self.states[skey] = replace(
                current, start_offset=start,
                leader_epoch=current.leader_epoch if update.leader_epoch == -1 else update.leader_epoch,
                delivery_complete_count=update.delivery_complete_count,
                state_batches=combine_batches(current.state_batches, update.state_batches, start))

    def _emit(self, out: CoordinatorResult, key: bytes, value: bytes | None) -> None:
        out.add_record(key, value)
        self.replay(key, value)

    # ---------------------------------------------------------------- operations
    def read(self, key: ShareKey) -> ShareState | None:
        state = self.states.get(key)
        return None if state is None else copy_state(state)

    def _fenced(self, key: ShareKey, state_epoch: int, leader_epoch: int) -> ErrorCode:
        current = self.states.get(key)
        if current is None:
            return ErrorCode.NONE
        if state_epoch < current.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        if leader_epoch != -1 and leader_epoch < current.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.NONE

    def _snapshot(self, key: ShareKey, state: ShareState, now_ms: int) -> CoordinatorResult:
        current = self.states.get(key)
        state = replace(
            state, snapshot_epoch=0 if current is None else current.snapshot_epoch + 1,
            create_timestamp=now_ms if current is None else current.create_timestamp, write_timestamp=now_ms)
        out = CoordinatorResult()
        self._emit(out, snapshot_key(key), snapshot_value(state))
        return out

    def write(self, key: ShareKey, state: ShareState, now_ms: int) -> tuple[ErrorCode, CoordinatorResult]:
        """Replace the share-partition's state (created if absent). Its batches are normalised (sorted,
        below the start offset dropped, overlaps resolved, neighbours coalesced)."""
        error = self._fenced(key, state.state_epoch, state.leader_epoch)
        if error != ErrorCode.NONE:
            return error, CoordinatorResult()
        current = self.states.get(key)
        leader_epoch = state.leader_epoch
        if leader_epoch == -1 and current is not None:
            leader_epoch = current.leader_epoch
        new = ShareState(state_epoch=state.state_epoch, leader_epoch=leader_epoch, start_offset=state.start_offset,
                         state_batches=combine_batches([], as_batches(state.state_batches), state.start_offset),
                         delivery_complete_count=state.delivery_complete_count)
        return ErrorCode.NONE, self._snapshot(key, new, now_ms)

    def write_update(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
                     batches: Iterable[Any], now_ms: int,
                     delivery_complete_count: int = -1) -> tuple[ErrorCode, CoordinatorResult]:
        """Kafka's WriteShareGroupState: merge `batches` into the state (start offset -1: unchanged; the
        start offset never moves back). An absent state is created (Kafka requires an initialize first)."""
        error = self._fenced(key, state_epoch, leader_epoch)
        if error != ErrorCode.NONE:
            return error, CoordinatorResult()
        current = self.states.get(key) or ShareState(state_epoch=state_epoch)
        start = current.start_offset if start_offset == -1 else max(start_offset, current.start_offset)
        new = ShareState(
            state_epoch=current.state_epoch,
            leader_epoch=current.leader_epoch if leader_epoch == -1 else leader_epoch, start_offset=start,
            state_batches=combine_batches(current.state_batches, as_batches(batches), start),
            delivery_complete_count=delivery_complete_count)
        return ErrorCode.NONE, self._snapshot(key, new, now_ms)

    def initialize(self, key: ShareKey, state_epoch: int, start_offset: int,
                   now_ms: int) -> tuple[ErrorCode, CoordinatorResult]:
        """Kafka's InitializeShareGroupState: a fresh state (no batches) at `start_offset`, unless a state
        of a newer state epoch exists (FENCED_STATE_EPOCH)."""
        current = self.states.get(key)
        if current is not None and state_epoch < current.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH, CoordinatorResult()
        new = ShareState(state_epoch=state_epoch, leader_epoch=-1, start_offset=start_offset)
        return ErrorCode.NONE, self._snapshot(key, new, now_ms)

    def delete(self, keys: Iterable[ShareKey]) -> tuple[ErrorCode, CoordinatorResult]:
        """Tombstones for the share-partitions that have a state (both record keys of each)."""
        out = CoordinatorResult()
        for key in keys:
            if key in self.states:
                self._emit(out, snapshot_key(key), None)
                self._emit(out, update_key(key), None)
        return ErrorCode.NONE, out
