"""CoordinatorRuntime: drives sans-IO coordinator shards over asyncio (the IO edge).

One shard per owned partition of the coordinator's internal topic
(`__consumer_offsets` for groups, `__transaction_state` for transactions).
Events of a partition are serialised by its lock; a shard's records are
appended to the partition log (as one batch per producer run) before any
response of that step is released; a timer task per partition calls
`shard.poll` at `shard.next_deadline()`. Loading a partition is replaying
its log into a fresh shard.

Shards follow `shard.CoordinatorShard`. Subclasses route requests to
partitions and act on a result's side effects (`after_apply`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from shoal.clock import monotonic_ms, now_ms
from shoal.coordinator.loader import latest_records
from shoal.coordinator.partitioning import partition_for
from shoal.coordinator.result import CoordinatorResult, ShardRequest
from shoal.coordinator.shard import CoordinatorShard
from shoal.protocol.errors import ErrorCode, error_code_of
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.record_encode import build_batch
from shoal.storage.config import LogConfig
from shoal.storage.producer_state import AppendOrigin
from shoal.waits import wait_event

log = logging.getLogger(__name__)

ShardT = TypeVar("ShardT", bound=CoordinatorShard)


@dataclass
class _Pending:
    future: asyncio.Future
    api_key: ApiKey
    api_version: int
    request: Any
    # an in-process call's answer when its records could not be appended (see `call`)
    on_error: Callable[[ErrorCode], Any] | None = None


@dataclass
class Partition(Generic[ShardT]):
    """One owned partition: its shard, its log and the lock that serialises its events."""

    shard: ShardT
    log: Any
    loading: bool = True
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    timer_task: asyncio.Task | None = None


# What a client is told when a coordinator's write to its log fails, as Kafka's coordinators
# translate it: errors a client would not retry (a storage error is fatal to Java's commitSync)
# become "find the coordinator again".
_WRITE_ERRORS = {
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


class CoordinatorRuntime(Generic[ShardT]):
    """The coordinator of one kind on one broker node: partitions, persistence, timers."""

    topic = ""
    name = "coordinator"

    def __init__(self, node_id: int, log_manager: Any, *, log_config: LogConfig,
                 clock_ms: Callable[[], int] = now_ms, partition_for: Callable[[str], int] | None = None,
                 monotonic_clock_ms: Callable[[], int] = monotonic_ms) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.log_config = log_config
        self.clock_ms = clock_ms  # record timestamps and the times shards store
        self.monotonic_clock_ms = monotonic_clock_ms  # when the shards' timers fire
        self._partition_for = partition_for
        self._partitions: dict[int, Partition[ShardT]] = {}
        self._pending: dict[int, _Pending] = {}
        # Rebuilds after a failed append, not yet started: cancelled when the partition is unloaded
        # (it moved) or the runtime closes, or a zombie shard would write beside the new owner.
        self._reloads: dict[int, asyncio.Task[None]] = {}
        self._tokens = itertools.count(1)
        # Told (partition, shard) once a partition's log is replayed, before the shard acts on being
        # loaded: the simulator compares that state with the one before a crash.
        self.replayed: list[Callable[[int, ShardT], None]] = []

    # ---------------------------------------------------------------- for subclasses
    def new_shard(self, partition: int, plog: Any) -> ShardT:
        raise NotImplementedError

    def read_log(self, plog: Any) -> Any:
        """Runs in a worker thread: what `shard.replay_loaded` takes (by default the latest value of
        each key of the compacted topic)."""
        return latest_records(plog)

    def error_response(self, api_key: ApiKey, api_version: int, request: Any, error: ErrorCode) -> Any:
        raise NotImplementedError

    def after_apply(self, partition: int, part: Partition[ShardT], result: CoordinatorResult) -> None:
        """Side effects of a result, once its records are durable (transaction markers)."""

    @property
    def num_partitions(self) -> int:
        """The configured partition count of the internal topic."""
        raise NotImplementedError

    def partition_for(self, key: str) -> int:
        """The partition of the internal topic that owns ``key`` (a group or transactional id): the
        broker's answer (from the topic as it exists) when given, else the configured partition count
        (a runtime on its own, in tests)."""
        if self._partition_for is not None:
            return self._partition_for(key)
        return partition_for(key, self.num_partitions)

    async def scatter(self, keys: list[str], ask: Callable[[int, list[int]], Awaitable[list[Any]]]) -> list[Any]:
        """Split ``keys`` (their indexes) by partition, ``ask(partition, indexes)`` every partition for
        its share at once, and return the answers in the order of ``keys``."""
        by_partition: dict[int, list[int]] = {}
        for i, key in enumerate(keys):
            by_partition.setdefault(self.partition_for(key), []).append(i)
        entries: dict[int, Any] = {}

        async def one(partition: int, idxs: list[int]) -> None:
            for i, item in zip(idxs, await ask(partition, idxs), strict=True):
                entries[i] = item

        await asyncio.gather(*(one(p, idxs) for p, idxs in by_partition.items()))
        return [entries[i] for i in range(len(keys))]

    # ---------------------------------------------------------------- partitions
    def owned_partitions(self) -> set[int]:
        """Partitions this node coordinates: loaded, loading, or to be rebuilt after a failed write (so
        that when the partition moves or the node stops, unloading it cancels the rebuild)."""
        return set(self._partitions) | set(self._reloads)

    def shard(self, partition: int) -> ShardT | None:
        part = self._partitions.get(partition)
        return None if part is None else part.shard

    def settled_shards(self) -> dict[int, ShardT]:
        """Loaded partitions with no event under way: each shard holds just what its log says."""
        return {p: part.shard for p, part in self._partitions.items() if not part.loading and not part.lock.locked()}

    def status(self, partition: int) -> ErrorCode:
        part = self._partitions.get(partition)
        if part is None:
            return ErrorCode.NOT_COORDINATOR
        if part.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    async def load_partition(self, partition: int) -> None:
        """Become coordinator of `partition`: replay its log into a fresh shard."""
        if partition in self._partitions:
            return
        plog = self.log_manager.get_or_create(self.topic, partition, self.log_config)
        part = Partition(shard=self.new_shard(partition, plog), log=plog)
        self._partitions[partition] = part
        async with part.lock:
            started = time.monotonic()
            # Off the event loop: other partitions keep being served while this one loads.
            try:
                loaded = await asyncio.to_thread(self.read_log, plog)
            except Exception:
                if self._partitions.get(partition) is part:  # not "loading" forever: not coordinator
                    del self._partitions[partition]
                raise
            for _ in part.shard.replay_loaded(loaded):
                await asyncio.sleep(0)
            if self._partitions.get(partition) is not part:
                return  # unloaded while loading
            for observer in self.replayed:
                observer(partition, part.shard)
            part.loading = False
            log.info("%s: finished loading %s-%d in %d milliseconds", self.name, self.topic, partition,
                     (time.monotonic() - started) * 1000)
            await self._apply(partition, part, part.shard.on_loaded(self._now(part)))
        part.timer_task = asyncio.get_running_loop().create_task(self._timer_loop(partition, part))

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating `partition`: parked requests are answered (NOT_COORDINATOR)."""
        reload = self._reloads.pop(partition, None)
        if reload is not None:
            reload.cancel()
        part = self._partitions.pop(partition, None)
        if part is None:
            return
        if part.timer_task is not None:
            part.timer_task.cancel()
        self._resolve(part.shard.unload())

    def _drop_after_failed_append(self, partition: int, part: Partition[ShardT]) -> None:
        """The shard applied what it emitted but its log did not take it: stop serving the shard at
        once (no request may read what was never written) and rebuild it from the log a moment later."""
        if self._partitions.get(partition) is part:
            self.unload_partition(partition)
            self._reloads[partition] = asyncio.get_running_loop().create_task(self._load_again(partition))

    async def _load_again(self, partition: int) -> None:
        await asyncio.sleep(0.1)  # a disk that just failed: not in a tight loop
        self._reloads.pop(partition, None)  # from here on an unload finds the partition loading
        try:
            await self.load_partition(partition)
        except Exception:  # an offline log: the partition stays unserved (NOT_COORDINATOR) until a restart
            log.exception("%s: reloading %s-%d failed", self.name, self.topic, partition)

    # ---------------------------------------------------------------- requests and events
    def _now(self, part: Partition[ShardT]) -> int:
        """The wall-clock time a step of `part`'s shard runs at, its timers anchored to the monotonic
        clock at the same instant (they fire on that, as Kafka's do)."""
        now = self.clock_ms()
        part.shard.timers.anchor(now, self.monotonic_clock_ms())
        return now

    async def run(self, partition: int, api_key: ApiKey, api_version: int, request: Any,
                  client_id: str = "", client_host: str = "") -> Any:
        """Hand one request to the shard of `partition`; await its (possibly delayed) response."""
        status = self.status(partition)
        if status != ErrorCode.NONE:
            return self.error_response(api_key, api_version, request, status)
        part = self._partitions[partition]
        token = next(self._tokens)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[token] = _Pending(fut, api_key, api_version, request)
        async with part.lock:
            if self._partitions.get(partition) is not part:
                self._pending.pop(token, None)
                return self.error_response(api_key, api_version, request, ErrorCode.NOT_COORDINATOR)
            ctx = ShardRequest(token, ApiKey(api_key), api_version, client_id, client_host)
            result = part.shard.handle(ctx, request, self._now(part))
            await self._apply(partition, part, result)
            part.wake.set()
        try:
            return await fut
        finally:
            self._pending.pop(token, None)

    async def run_event(self, partition: int, event: Callable[[ShardT, int], CoordinatorResult],
                        part: Partition[ShardT] | None = None) -> bool:
        """Apply `event(shard, now_ms)` under the partition's lock; False if the partition is not
        (or, when `part` is given, no longer that instance) loaded here."""
        current = self._partitions.get(partition)
        if current is None or current.loading or (part is not None and current is not part):
            return False
        async with current.lock:
            if self._partitions.get(partition) is not current:
                return False
            await self._apply(partition, current, event(current.shard, self._now(current)))
            current.wake.set()
        return True

    async def call(self, partition: int, api_key: ApiKey,
                   operation: Callable[[ShardT, int], tuple[Any, CoordinatorResult]],
                   on_error: Callable[[ErrorCode], Any]) -> Any:
        """An in-process call: `operation(shard, now_ms)` under the partition's lock returns (answer,
        result); the answer is released once the result's records are appended. `on_error(code)` is
        the answer when the partition is not loaded here or the append fails; `api_key` names the
        Kafka API the call stands for."""
        status = self.status(partition)
        if status != ErrorCode.NONE:
            return on_error(status)
        part = self._partitions[partition]
        token = next(self._tokens)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[token] = _Pending(fut, api_key, 0, None, on_error)
        try:
            async with part.lock:
                if self._partitions.get(partition) is not part:
                    return on_error(ErrorCode.NOT_COORDINATOR)
                answer, result = operation(part.shard, self._now(part))
                result.responses.append((token, answer))
                await self._apply(partition, part, result)
                part.wake.set()
            return await fut
        finally:
            self._pending.pop(token, None)

    async def _apply(self, partition: int, part: Partition[ShardT], result: CoordinatorResult) -> None:
        """Append the records, then release the responses, then act on side effects."""
        if result.batches:
            now = self.clock_ms()
            try:
                for b in result.batches:
                    batch = bytearray(build_batch(
                        [(now, k, v, []) for k, v in b.records], producer_id=b.producer_id,
                        producer_epoch=b.producer_epoch, base_sequence=-1,
                        is_transactional=b.producer_id >= 0))
                    part.log.append(batch, now, origin=AppendOrigin.COORDINATOR)
            except Exception as e:
                code = error_code_of(e, ErrorCode.NONE)
                if code == ErrorCode.NONE:  # not a Kafka error: unexpected
                    log.exception("%s: failed to append records to %s", self.name, part.log)
                    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                code = _WRITE_ERRORS.get(code, code)
                for token, _ in result.responses:
                    p = self._pending.get(token)
                    if p is not None and not p.future.done():
                        p.future.set_result(p.on_error(ErrorCode(code)) if p.on_error is not None else
                                            self.error_response(p.api_key, p.api_version, p.request,
                                                                ErrorCode(code)))
                # The shard applied what it emitted; the log says otherwise: the log wins.
                self._drop_after_failed_append(partition, part)
                return
        self._resolve(result)
        if result.markers:
            self.after_apply(partition, part, result)

    def _resolve(self, result: CoordinatorResult) -> None:
        for token, response in result.responses:
            p = self._pending.get(token)
            if p is not None and not p.future.done():
                p.future.set_result(response)

    # ---------------------------------------------------------------- timers, close
    async def _timer_loop(self, partition: int, part: Partition[ShardT]) -> None:
        try:
            while self._partitions.get(partition) is part:
                deadline = part.shard.next_deadline()
                if deadline is None:
                    timeout = None
                else:
                    timeout = max(0.0, (deadline - self.monotonic_clock_ms()) / 1000.0)
                await wait_event(part.wake, timeout)
                part.wake.clear()
                async with part.lock:
                    if self._partitions.get(partition) is not part:
                        return
                    try:
                        await self._apply(partition, part, part.shard.poll(self._now(part)))
                    except Exception:
                        # Keep the loop alive: without it no timer of this partition would fire
                        # until a request happens to come in. The failing timer was already
                        # popped, so this cannot spin.
                        log.exception("%s: timer of partition %d failed", self.name, partition)
        except asyncio.CancelledError:
            pass

    async def close(self) -> None:
        """Unload everything (parked requests get NOT_COORDINATOR)."""
        tasks = [p.timer_task for p in self._partitions.values() if p.timer_task is not None]
        tasks += self._reloads.values()
        for partition in list(self._partitions) + list(self._reloads):
            self.unload_partition(partition)
        for t in tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass
