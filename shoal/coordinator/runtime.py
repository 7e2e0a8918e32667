"""GroupCoordinatorRuntime: drives GroupCoordinatorShards over asyncio (the IO edge).

One shard per owned `__consumer_offsets` partition. Events of a partition
are serialised by its lock; a shard's records are appended to the partition
log as one batch before any response of that step is released; a timer task
per partition calls `shard.poll` at `shard.next_deadline()`.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.partitioning import group_partition
from shoal.coordinator.group.responses import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    GROUP_API_KEYS,
    LIST_GROUPS,
    OFFSET_FETCH,
    error_response,
    offset_fetch_group_error,
)
from shoal.coordinator.group.shard import CoordinatorResult, GroupCoordinatorShard, RequestContext
from shoal.coordinator.loader import latest_records
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.delete_groups_response import DeleteGroupsResponse
from shoal.protocol.generated.describe_groups_response import DescribeGroupsResponse
from shoal.protocol.generated.list_groups_response import ListGroupsResponse
from shoal.protocol.generated.offset_fetch_response import OffsetFetchResponse
from shoal.protocol.record_batch import build_batch
from shoal.storage.config import LogConfig

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's offsets.topic.segment.bytes default; the topic is compacted.
OFFSETS_LOG_CONFIG = LogConfig(cleanup_policy="compact", segment_bytes=104_857_600)


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Pending:
    future: asyncio.Future
    api_key: int
    api_version: int
    request: Any


@dataclass
class _Partition:
    shard: GroupCoordinatorShard
    log: Any
    loading: bool = True
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    timer_task: asyncio.Task | None = None


class GroupCoordinatorRuntime:
    """The group coordinator of one broker node: routing, persistence, timers."""

    def __init__(self, node_id: int, log_manager: Any, config: GroupConfig | None = None, *,
                 clock_ms: Callable[[], int] = _wall_clock_ms, log_config: LogConfig = OFFSETS_LOG_CONFIG,
                 member_id_suffix: Callable[[], str] | None = None) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.config = config or GroupConfig()
        self.clock_ms = clock_ms
        self.log_config = log_config
        self._member_id_suffix = member_id_suffix
        self._partitions: dict[int, _Partition] = {}
        self._pending: dict[int, _Pending] = {}
        self._tokens = itertools.count(1)
        self._closed = False

    @property
    def num_partitions(self) -> int:
        return self.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return group_partition(group_id, self.num_partitions)

    def owned_partitions(self) -> set[int]:
        """Partitions this node coordinates (loaded or loading)."""
        return set(self._partitions)

    def shard(self, partition: int) -> GroupCoordinatorShard | None:
        part = self._partitions.get(partition)
        return None if part is None else part.shard

    def _status(self, partition: int) -> ErrorCode:
        part = self._partitions.get(partition)
        if part is None:
            return ErrorCode.NOT_COORDINATOR
        if part.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    # ================================================================ load / unload
    async def load_partition(self, partition: int) -> None:
        """Become coordinator of `partition`: replay its log into a fresh shard."""
        if partition in self._partitions:
            return
        plog = self.log_manager.get_or_create(OFFSETS_TOPIC, partition, self.log_config)
        shard = GroupCoordinatorShard(partition, self.config, member_id_suffix=self._member_id_suffix)
        part = _Partition(shard=shard, log=plog)
        self._partitions[partition] = part
        async with part.lock:
            # Off the event loop: other partitions keep being served while this one loads.
            latest = await asyncio.to_thread(latest_records, plog)
            replay = shard.replay
            for i, (key, value) in enumerate(latest.items()):
                replay(key, value)
                if i % 50_000 == 49_999:
                    await asyncio.sleep(0)
            if self._partitions.get(partition) is not part:
                return  # unloaded while loading
            part.loading = False
            await self._apply(part, shard.on_loaded(self.clock_ms()))
        part.timer_task = asyncio.get_running_loop().create_task(self._timer_loop(partition, part))

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating `partition`: groups Dead, parked requests get NOT_COORDINATOR."""
        part = self._partitions.pop(partition, None)
        if part is None:
            return
        if part.timer_task is not None:
            part.timer_task.cancel()
        self._resolve(part.shard.unload())

    # ================================================================ requests
    async def handle(self, api_key: int, api_version: int, request: Any, *, client_id: str = "",
                     client_host: str = "") -> Any:
        """Answer one group-coordinator request (may wait for a rebalance)."""
        if api_key not in GROUP_API_KEYS:
            raise ValueError(f"api key {api_key} is not a group coordinator API")
        if api_key == LIST_GROUPS:
            return await self._list_groups(api_version, request, client_id, client_host)
        multi = self._multi_group_ids(api_key, api_version, request)
        if multi is not None:
            return await self._handle_multi(api_key, api_version, request, multi, client_id, client_host)
        partition = self.partition_for(request.group_id)
        return await self._run(partition, api_key, api_version, request, client_id, client_host)

    async def _run(self, partition: int, api_key: int, api_version: int, request: Any,
                   client_id: str, client_host: str) -> Any:
        status = self._status(partition)
        if status != ErrorCode.NONE:
            return error_response(api_key, api_version, request, status)
        part = self._partitions[partition]
        token = next(self._tokens)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[token] = _Pending(fut, api_key, api_version, request)
        async with part.lock:
            if self._partitions.get(partition) is not part:
                self._pending.pop(token, None)
                return error_response(api_key, api_version, request, ErrorCode.NOT_COORDINATOR)
            ctx = RequestContext(token, api_key, api_version, client_id, client_host)
            result = part.shard.handle(ctx, request, self.clock_ms())
            await self._apply(part, result)
            part.wake.set()
        try:
            return await fut
        finally:
            self._pending.pop(token, None)

    async def _apply(self, part: _Partition, result: CoordinatorResult) -> None:
        """Append the records, then release the responses."""
        if result.records:
            now = self.clock_ms()
            try:
                batch = bytearray(build_batch([(now, k, v, []) for k, v in result.records]))
                part.log.append(batch, now)
            except Exception:
                log.exception("failed to append group coordinator records to %s", part.log)
                for token, _ in result.responses:
                    p = self._pending.get(token)
                    if p is not None and not p.future.done():
                        p.future.set_result(error_response(p.api_key, p.api_version, p.request,
                                                           ErrorCode.COORDINATOR_NOT_AVAILABLE))
                return
        self._resolve(result)

    def _resolve(self, result: CoordinatorResult) -> None:
        for token, response in result.responses:
            p = self._pending.get(token)
            if p is not None and not p.future.done():
                p.future.set_result(response)

    # ================================================================ multi-group APIs
    @staticmethod
    def _multi_group_ids(api_key: int, api_version: int, request: Any) -> list[str] | None:
        if api_key == DESCRIBE_GROUPS:
            return list(request.groups)
        if api_key == DELETE_GROUPS:
            return list(request.groups_names)
        if api_key == OFFSET_FETCH and api_version >= 8:
            return [g.group_id for g in request.groups]
        return None

    async def _handle_multi(self, api_key: int, api_version: int, request: Any, group_ids: list[str],
                            client_id: str, client_host: str) -> Any:
        by_partition: dict[int, list[int]] = {}
        for i, gid in enumerate(group_ids):
            by_partition.setdefault(self.partition_for(gid), []).append(i)
        entries: dict[int, Any] = {}

        async def one(partition: int, idxs: list[int]) -> None:
            sub = copy.copy(request)
            if api_key == DESCRIBE_GROUPS:
                sub.groups = [request.groups[i] for i in idxs]
            elif api_key == DELETE_GROUPS:
                sub.groups_names = [request.groups_names[i] for i in idxs]
            else:
                sub.groups = [request.groups[i] for i in idxs]
            resp = await self._run(partition, api_key, api_version, sub, client_id, client_host)
            items = resp.groups if api_key in (DESCRIBE_GROUPS, OFFSET_FETCH) else resp.results
            for i, item in zip(idxs, items, strict=True):
                entries[i] = item

        await asyncio.gather(*(one(p, idxs) for p, idxs in by_partition.items()))
        ordered = [entries[i] for i in range(len(group_ids))]
        if api_key == DESCRIBE_GROUPS:
            return DescribeGroupsResponse(groups=ordered)
        if api_key == DELETE_GROUPS:
            return DeleteGroupsResponse(results=ordered)
        return OffsetFetchResponse(groups=ordered)

    async def _list_groups(self, api_version: int, request: Any, client_id: str, client_host: str) -> Any:
        groups: list[Any] = []
        error = ErrorCode.NONE
        for partition in sorted(self._partitions):
            part = self._partitions.get(partition)
            if part is None:
                continue
            if part.loading:
                error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                continue
            resp = await self._run(partition, LIST_GROUPS, api_version, request, client_id, client_host)
            if resp.error_code:
                error = ErrorCode(resp.error_code)
            groups.extend(resp.groups)
        return ListGroupsResponse(error_code=int(error), groups=groups)

    # ================================================================ topics, timers, close
    async def on_topics_deleted(self, topics: list[str] | set[str]) -> None:
        """Delete committed offsets of deleted topics in every owned partition."""
        for partition, part in list(self._partitions.items()):
            if part.loading:
                continue
            async with part.lock:
                if self._partitions.get(partition) is not part:
                    continue
                await self._apply(part, part.shard.delete_offsets_for_topics(set(topics), self.clock_ms()))

    async def _timer_loop(self, partition: int, part: _Partition) -> None:
        try:
            while self._partitions.get(partition) is part:
                deadline = part.shard.next_deadline()
                timeout = None if deadline is None else max(0.0, (deadline - self.clock_ms()) / 1000.0)
                try:
                    await asyncio.wait_for(part.wake.wait(), timeout)
                except TimeoutError:
                    pass
                part.wake.clear()
                async with part.lock:
                    if self._partitions.get(partition) is not part:
                        return
                    try:
                        await self._apply(part, part.shard.poll(self.clock_ms()))
                    except Exception:
                        # Keep the loop alive: without it no join/sync/session timer of this
                        # partition would fire until a request happens to come in, and parked
                        # JoinGroup/SyncGroup requests would wait for it. The failing timer
                        # was already popped, so this cannot spin.
                        log.exception("group coordinator timer of partition %d failed", partition)
        except asyncio.CancelledError:
            pass

    async def close(self) -> None:
        """Unload everything (parked requests get NOT_COORDINATOR)."""
        self._closed = True
        tasks = [p.timer_task for p in self._partitions.values() if p.timer_task is not None]
        for partition in list(self._partitions):
            self.unload_partition(partition)
        for t in tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass


__all__ = ["GroupCoordinatorRuntime", "OFFSETS_TOPIC", "offset_fetch_group_error"]
