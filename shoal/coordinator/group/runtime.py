"""GroupCoordinatorRuntime: the group coordinator's routing on top of the generic runtime.

Requests go to the shard of the group's `__consumer_offsets` partition;
DescribeGroups, DeleteGroups and batched OffsetFetch are split per partition
and their answers merged; ListGroups asks every owned partition. Transaction
markers for an offsets partition are appended here, under the partition's
lock, so the shard turns the producer's pending offsets into committed ones
(or drops them) in log order.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from shoal.assignors.server import ServerAssignor
from shoal.clock import now_ms
from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.consumer.target import resolve_assignors
from shoal.coordinator.group.consumer.topics import TopicsView
from shoal.coordinator.group.responses import GROUP_API_KEYS, error_response
from shoal.coordinator.group.shard import GroupCoordinatorShard
from shoal.coordinator.loader import load_offsets_log
from shoal.coordinator.runtime import CoordinatorRuntime
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from shoal.protocol.generated.delete_groups_response import DeleteGroupsResponse
from shoal.protocol.generated.describe_groups_response import DescribeGroupsResponse
from shoal.protocol.generated.list_groups_response import ListGroupsResponse
from shoal.protocol.generated.offset_fetch_response import OffsetFetchResponse
from shoal.protocol.generated.share_group_describe_response import ShareGroupDescribeResponse
from shoal.storage.config import LogConfig
from shoal.storage.producer_state import ProducerStateError

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's offsets.topic.segment.bytes default; the topic is compacted.
OFFSETS_LOG_CONFIG = LogConfig(cleanup_policy="compact", segment_bytes=104_857_600)


class GroupCoordinatorRuntime(CoordinatorRuntime[GroupCoordinatorShard]):
    """The group coordinator of one broker node: routing, persistence, timers."""

    topic = OFFSETS_TOPIC
    name = "group coordinator"

    def __init__(self, node_id: int, log_manager: Any, config: GroupConfig | None = None, *,
                 clock_ms: Callable[[], int] = now_ms, log_config: LogConfig = OFFSETS_LOG_CONFIG,
                 member_id_suffix: Callable[[], str] | None = None,
                 partition_for: Callable[[str], int] | None = None, topics: TopicsView | None = None,
                 assignors: Mapping[str, ServerAssignor] | None = None) -> None:
        super().__init__(node_id, log_manager, log_config=log_config, clock_ms=clock_ms, partition_for=partition_for)
        self.config = config or GroupConfig()
        self._member_id_suffix = member_id_suffix
        self._topics = topics
        if assignors is None:
            assignors = resolve_assignors(self.config.group_consumer_assignors)
        self._assignors = dict(assignors)

    @property
    def num_partitions(self) -> int:
        return self.config.offsets_topic_num_partitions

    def new_shard(self, partition: int, plog: Any) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(partition, self.config, member_id_suffix=self._member_id_suffix,
                                     topics=self._topics, assignors=self._assignors)

    def read_log(self, plog: Any) -> Any:
        return load_offsets_log(plog)

    def error_response(self, api_key: ApiKey, api_version: int, request: Any, error: ErrorCode) -> Any:
        return error_response(api_key, api_version, request, error)

    # ================================================================ requests
    async def handle(self, api_key: ApiKey, api_version: int, request: Any, *, client_id: str = "",
                     client_host: str = "") -> Any:
        """Answer one group-coordinator request (may wait for a rebalance)."""
        if api_key not in GROUP_API_KEYS:
            raise ValueError(f"api key {api_key} is not a group coordinator API")
        if api_key == ApiKey.LIST_GROUPS:
            return await self._list_groups(api_version, request, client_id, client_host)
        multi = self._multi_group_ids(api_key, api_version, request)
        if multi is not None:
            return await self._handle_multi(api_key, api_version, request, multi, client_id, client_host)
        partition = self.partition_for(request.group_id)
        return await self.run(partition, api_key, api_version, request, client_id, client_host)

    @staticmethod
    def _multi_group_ids(api_key: ApiKey, api_version: int, request: Any) -> list[str] | None:
        if api_key == ApiKey.DESCRIBE_GROUPS:
            return list(request.groups)
        if api_key == ApiKey.DELETE_GROUPS:
            return list(request.groups_names)
        if api_key == ApiKey.OFFSET_FETCH and api_version >= 8:
            return [g.group_id for g in request.groups]
        if api_key in (ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.SHARE_GROUP_DESCRIBE):
            return list(request.group_ids)
        return None

    async def _handle_multi(self, api_key: ApiKey, api_version: int, request: Any, group_ids: list[str],
                            client_id: str, client_host: str) -> Any:
        async def ask(partition: int, idxs: list[int]) -> list[Any]:
            sub = copy.copy(request)
            if api_key == ApiKey.DESCRIBE_GROUPS:
                sub.groups = [request.groups[i] for i in idxs]
            elif api_key in (ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.SHARE_GROUP_DESCRIBE):
                sub.group_ids = [request.group_ids[i] for i in idxs]
            elif api_key == ApiKey.DELETE_GROUPS:
                sub.groups_names = [request.groups_names[i] for i in idxs]
            else:
                sub.groups = [request.groups[i] for i in idxs]
            resp = await self.run(partition, api_key, api_version, sub, client_id, client_host)
            return resp.results if api_key == ApiKey.DELETE_GROUPS else resp.groups

        ordered = await self.scatter(group_ids, ask)
        if api_key == ApiKey.DESCRIBE_GROUPS:
            return DescribeGroupsResponse(groups=ordered)
        if api_key == ApiKey.DELETE_GROUPS:
            return DeleteGroupsResponse(results=ordered)
        if api_key == ApiKey.CONSUMER_GROUP_DESCRIBE:
            return ConsumerGroupDescribeResponse(groups=ordered)
        if api_key == ApiKey.SHARE_GROUP_DESCRIBE:
            return ShareGroupDescribeResponse(groups=ordered)
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
            resp = await self.run(partition, ApiKey.LIST_GROUPS, api_version, request, client_id, client_host)
            if resp.error_code:
                error = ErrorCode(resp.error_code)
            groups.extend(resp.groups)
        return ListGroupsResponse(error_code=int(error), groups=groups)

    # ================================================================ topics, transactions
    async def on_topics_deleted(self, topics: list[str] | set[str]) -> None:
        """Delete committed offsets of deleted topics in every owned partition."""
        for partition in list(self._partitions):
            await self.run_event(partition, lambda shard, now: shard.delete_offsets_for_topics(set(topics), now))

    async def write_marker(self, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                           commit: bool) -> ErrorCode:
        """Append a transaction marker to an offsets partition this node leads and apply it."""
        part = self._partitions.get(partition)
        if part is None:
            # Not loaded here (yet): the marker goes to the log, and a later load replays it.
            plog = self.log_manager.get_or_create(self.topic, partition, self.log_config)
            try:
                plog.append_marker(producer_id, producer_epoch, coordinator_epoch, commit, self.clock_ms())
            except ProducerStateError as e:
                return ErrorCode(e.error_code)
            return ErrorCode.NONE
        async with part.lock:
            if self._partitions.get(partition) is not part or part.loading:
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # unloaded or reloading meanwhile: retry
            try:
                part.log.append_marker(producer_id, producer_epoch, coordinator_epoch, commit, self.clock_ms())
            except ProducerStateError as e:
                return ErrorCode(e.error_code)
            await self._apply(partition, part, part.shard.complete_transaction(producer_id, commit,
                                                                                self._now(part)))
            part.wake.set()
        return ErrorCode.NONE


__all__ = ["OFFSETS_LOG_CONFIG", "OFFSETS_TOPIC", "GroupCoordinatorRuntime"]
