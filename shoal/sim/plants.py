"""Planted bugs: a wrong variant of one real function, swapped in for one simulated run only.

A simulator that cannot fail proves nothing. Each plant replaces one function of shoal (by the
module attribute its callers look up at call time) with a plausible mistake, and states within
how many seeds from 1 the simulator finds it, on the full configuration and on swarm seeds;
`tests/unit/test_sim.py` holds it to that.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Plant:
    name: str
    description: str
    module: str  # where the function is looked up by its callers
    attribute: str  # a function of the module, or "Class.method"
    wrong: Callable[[Callable[..., Any]], Callable[..., Any]]  # real function -> wrong variant
    found_within: int | None  # seeds (from 1) within which the simulator finds it (None: the full
    # configuration does not run what the plant breaks)
    found_within_swarm: int  # swarm seeds (`--swarm`, from 1) within which it finds it


def _ack_before_append(real: Callable[..., Any]) -> Callable[..., Any]:
    """Produce answers with the offset the batch will get, and appends it a moment later (a
    write-behind): the acknowledgement comes before the append."""
    produce = importlib.import_module("shoal.broker.handlers.produce")

    def append(ctx: Any, transactional_id: str | None, topic: str, index: int, records: Any, now: int) -> Any:
        plog = produce._leader_log(ctx, topic, index)
        if isinstance(plog, produce.PartitionResponse):
            return plog
        predicted = plog.log_end_offset
        asyncio.get_running_loop().call_later(0.005, real, ctx, transactional_id, topic, index, records, now)
        return produce.PartitionResponse(index=index, error_code=0, base_offset=predicted, log_append_time_ms=-1,
                                          log_start_offset=plog.log_start_offset)

    return append


def _replay_without_tombstones(real: Callable[..., Any]) -> Callable[..., Any]:
    """Loading `__consumer_offsets` keeps the last non-null value of each key: a deleted offset
    (a tombstone) comes back when the partition is loaded again."""
    loader = importlib.import_module("shoal.coordinator.loader")
    rb = importlib.import_module("shoal.protocol.record_batch")

    def load_offsets_log(log: Any) -> Any:
        loaded = real(log)
        live: dict[bytes, bytes] = {}
        for buf, _ in loader.iter_log_chunks(log, log.log_start_offset, log.log_end_offset):
            for _h, r in rb.iter_all_records(buf):
                if r.key is not None and r.value is not None:
                    live[bytes(r.key)] = bytes(r.value)
        latest = {k: v if v is not None else live.get(k) for k, v in loaded.latest.items()}
        return loader.LoadedOffsets({k: v for k, v in latest.items() if v is not None}, loaded.pending)

    return load_offsets_log


def _skip_generation_fence(real: Callable[..., Any]) -> Callable[..., Any]:
    """A classic group's offset commit checks neither the member nor the generation: a zombie
    of an older generation commits over the partition's new owner."""
    group = importlib.import_module("shoal.coordinator.group.group")
    codes = importlib.import_module("shoal.protocol.errors").ErrorCode

    def validate_offset_commit(self: Any, member_id: str, instance_id: str | None, generation: int, *,
                               transactional: bool, now_ms: int, api_version: int = 9) -> Any:
        if self.state == group.GroupState.DEAD:
            return codes.COORDINATOR_NOT_AVAILABLE
        if not transactional and self.state == group.GroupState.COMPLETING_REBALANCE:
            return codes.REBALANCE_IN_PROGRESS
        return None

    return validate_offset_commit


def _lso_past_open_txn(real: Any) -> Any:
    """The last stable offset stops at the *newest* open transaction instead of the oldest: with
    two producers' transactions open, read_committed reads into the older one."""

    def last_stable_offset(self: Any) -> int:
        ongoing = self.producer_state.ongoing
        first = max(ongoing.values()) if ongoing else None
        hw = self.high_watermark
        lso = hw if first is None or first >= hw else first
        return max(lso, self.log_start_offset)

    return property(last_stable_offset)


def _no_revoke(real: Callable[..., Any]) -> Callable[..., Any]:
    """Consumer-protocol reconciliation moves a member straight to its target assignment: a
    partition is given to its new owner before the old one has revoked it."""
    rec = importlib.import_module("shoal.coordinator.group.consumer.reconciliation")
    state = importlib.import_module("shoal.coordinator.group.consumer.member").MemberState

    def reconcile(member: Any, target_epoch: int, target: Any, partition_epoch: Any, owned: Any) -> Any:
        if member.state == state.UNKNOWN:
            return real(member, target_epoch, target, partition_epoch, owned)
        if member.member_epoch == target_epoch and member.state == state.STABLE:
            return member
        return rec._with_epoch(member, target_epoch, state=state.STABLE, assigned=dict(target),
                               pending_revocation={})

    return reconcile


def _skip_epoch_fence(real: Callable[..., Any]) -> Callable[..., Any]:
    """A partition appends a producer's batch of an older epoch than its current one: a zombie
    transactional producer, fenced by the coordinator's abort, still writes."""
    client = importlib.import_module("shoal.storage.producer_state").AppendOrigin.CLIENT

    def check_batch(self: Any, h: Any, origin: Any) -> Any:
        entry = self.producers.get(h.producer_id)
        if entry is not None and origin is client and h.producer_epoch < entry.epoch:
            return None
        return real(self, h, origin)

    return check_batch


def _skip_flush(real: Callable[..., Any]) -> Callable[..., Any]:
    """A log ignores ``flush.messages``: appends are answered while only in the page cache, so a
    power cut loses acknowledged records."""

    def flush_if_due(self: Any, now_ms: int) -> None:
        return None

    return flush_if_due


def _share_locks_expire_early(real: Callable[..., Any]) -> Callable[..., Any]:
    """A share partition expires acquisition locks a second before their deadline (a deadline
    kept in the wrong unit, or compared against the wrong clock): another member acquires a
    record its holder still has."""

    def expire_locks(self: Any, now_ms: int) -> bool:
        return bool(real(self, now_ms + 1000))

    return expire_locks


def _share_acks_not_persisted(real: Callable[..., Any]) -> Callable[..., Any]:
    """A share partition answers acknowledgements once applied in memory, without writing the new
    state to the share coordinator: after a crash or a leadership move, accepted records come back."""
    errors = importlib.import_module("shoal.protocol.errors")

    async def acknowledge(self: Any, group_id: str, member_id: str, topic: str, index: int, batches: Any,
                          now: int) -> Any:
        sp = self._partitions.get((group_id, topic, index))
        if sp is None:
            return errors.ErrorCode.INVALID_RECORD_STATE
        code = sp.acknowledge(member_id, batches, now)
        if code == errors.ErrorCode.NONE:
            self.broker.fetch_waiters.notify(topic, index)
        return errors.ErrorCode(code)

    return acknowledge


def _compaction_keeps_oldest(real: Callable[..., Any]) -> Callable[..., Any]:
    """The cleaner's key map holds the *first* offset of each key instead of the last: compaction
    keeps the oldest value of a key and drops the newer ones in the segments it cleans."""

    def latest_offsets(log: Any, aborted: Any, limit: int | None) -> dict[bytes, int]:
        rb = importlib.import_module("shoal.protocol.record_batch")
        first: dict[bytes, int] = {}
        for seg in log.segments:
            for h, batch in seg.iter_batches():
                if limit is not None and h.base_offset >= limit:
                    return first
                if h.is_control or (h.is_transactional and aborted.contains(h)):
                    continue
                for r in rb.iter_records(batch, h):
                    if r.key is not None:
                        first.setdefault(r.key, r.offset)
        return first

    return latest_offsets


PLANTS: dict[str, Plant] = {p.name: p for p in [
    Plant("ack-before-append", "produce acknowledges a batch before appending it",
          "shoal.broker.handlers.produce", "append", _ack_before_append,
          found_within=1, found_within_swarm=5),
    Plant("replay-without-tombstones", "loading __consumer_offsets ignores its tombstones",
          "shoal.coordinator.group.runtime", "load_offsets_log", _replay_without_tombstones,
          found_within=10, found_within_swarm=20),
    Plant("skip-generation-fence", "a classic group accepts offset commits from any generation",
          "shoal.coordinator.group.group", "ClassicGroup.validate_offset_commit", _skip_generation_fence,
          found_within=20, found_within_swarm=30),
    Plant("no-revoke", "a consumer-protocol partition is reassigned before its owner revokes it",
          "shoal.coordinator.group.consumer.heartbeat", "reconcile", _no_revoke,
          found_within=3, found_within_swarm=20),
    Plant("lso-past-open-txn", "the last stable offset passes an open transaction",
          "shoal.storage.log", "PartitionLog.last_stable_offset", _lso_past_open_txn,
          found_within=10, found_within_swarm=10),
    Plant("skip-epoch-fence", "a partition appends a batch of a fenced (older) producer epoch",
          "shoal.storage.producer_state", "ProducerStateManager.check_batch", _skip_epoch_fence,
          found_within=120, found_within_swarm=400),
    Plant("skip-flush", "a log acknowledges appends before fsync although flush.messages=1 asks for it",
          "shoal.storage.log", "PartitionLog._flush_if_due", _skip_flush,
          found_within=10, found_within_swarm=30),
    Plant("compaction-keeps-oldest", "compaction keeps the oldest value of each key, not the newest",
          "shoal.storage.cleaner", "_latest_offsets", _compaction_keeps_oldest,
          found_within=3, found_within_swarm=20),
    Plant("share-locks-expire-early", "a share partition expires acquisition locks a second early",
          "shoal.broker.share.partition", "SharePartition.expire_locks", _share_locks_expire_early,
          found_within=None, found_within_swarm=60),
    Plant("share-acks-not-persisted", "share acknowledgements are answered without writing the state",
          "shoal.broker.share.manager", "SharePartitions.acknowledge", _share_acks_not_persisted,
          found_within=None, found_within_swarm=10),
]}


@contextlib.contextmanager
def planted(name: str | None) -> Iterator[Plant | None]:
    """Swap in the named plant's wrong function for the duration (nothing for None)."""
    if name is None:
        yield None
        return
    plant = PLANTS.get(name)
    if plant is None:
        raise KeyError(f"no plant named {name!r} (have: {', '.join(PLANTS)})")
    owner: Any = importlib.import_module(plant.module)
    *path, attribute = plant.attribute.split(".")  # "Class.method" swaps a method
    for name in path:
        owner = getattr(owner, name)
    real = getattr(owner, attribute)  # AttributeError: the seam moved; update the plant
    setattr(owner, attribute, plant.wrong(real))
    try:
        yield plant
    finally:
        setattr(owner, attribute, real)
