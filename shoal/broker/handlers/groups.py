"""FindCoordinator, and the group APIs handed to each node's coordinator runtime.

Each node runs a `GroupCoordinatorRuntime` for the `__consumer_offsets`
partitions it leads. When leadership moves (a node stops or starts), the old
leader unloads the partition (its groups go Dead, parked requests get
NOT_COORDINATOR) and the new leader replays the partition's log.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from shoal.broker.metadata import OFFSETS_TOPIC
from shoal.broker.topic_configs import topic_log_config
from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.partitioning import group_partition
from shoal.coordinator.group.responses import GROUP_API_KEYS, TXN_OFFSET_COMMIT
from shoal.coordinator.runtime import GroupCoordinatorRuntime
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.find_coordinator_response import FindCoordinatorResponse

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext

log = logging.getLogger(__name__)

GROUP_KEY = 0


class Coordinators:
    """Per-node group coordinator runtimes that follow `__consumer_offsets` leadership."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = GroupConfig.from_properties(broker.config.props)
        self.runtimes: dict[int, GroupCoordinatorRuntime] = {}
        self._loads: set[asyncio.Task[None]] = set()

    def runtime(self, node_id: int) -> GroupCoordinatorRuntime:
        rt = self.runtimes.get(node_id)
        if rt is None:
            info = self.broker.metadata.topics.get(OFFSETS_TOPIC)
            log_config = topic_log_config(info.configs if info else {"cleanup.policy": "compact"},
                                          self.broker.log_defaults)
            rt = self.runtimes[node_id] = GroupCoordinatorRuntime(
                node_id, self.broker.logs, self.config, log_config=log_config)
        return rt

    async def on_leadership_changed(self) -> None:
        """Load the offsets partitions each live node now leads; unload the rest."""
        metadata = self.broker.metadata
        if OFFSETS_TOPIC not in metadata.topics:
            return
        n = metadata.topics[OFFSETS_TOPIC].num_partitions
        for node_id, node in self.broker.nodes.items():
            rt = self.runtime(node_id)
            wanted = {p for p in range(n) if node.running and metadata.leader(OFFSETS_TOPIC, p) == node_id}
            for p in rt.owned_partitions() - wanted:
                rt.unload_partition(p)
            for p in sorted(wanted - rt.owned_partitions()):
                # Loads run in the background: meanwhile the partition answers
                # COORDINATOR_LOAD_IN_PROGRESS and clients retry.
                task = asyncio.get_running_loop().create_task(self._load(rt, p))
                self._loads.add(task)
                task.add_done_callback(self._loads.discard)

    @staticmethod
    async def _load(rt: GroupCoordinatorRuntime, partition: int) -> None:
        try:
            await rt.load_partition(partition)
        except Exception:
            log.exception("loading %s-%d on node %d failed", OFFSETS_TOPIC, partition, rt.node_id)

    async def wait_loaded(self) -> None:
        while self._loads:
            await asyncio.gather(*self._loads, return_exceptions=True)

    async def on_topics_deleted(self, topics: list[str]) -> None:
        for rt in self.runtimes.values():
            await rt.on_topics_deleted(topics)

    async def close(self) -> None:
        for task in list(self._loads):
            task.cancel()
        for rt in self.runtimes.values():
            await rt.close()


def register(broker: Broker) -> Coordinators:
    coordinators = Coordinators(broker)
    num_partitions = broker.config.get_int("offsets.topic.num.partitions")

    async def locate(key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
        if key_type != GROUP_KEY:
            # Transactions come with the transaction coordinator.
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The transaction coordinator is not available", -1, "", -1
        if OFFSETS_TOPIC not in broker.metadata.topics:
            broker.ensure_offsets_topic()
            await coordinators.on_leadership_changed()
        leader = broker.metadata.leader(OFFSETS_TOPIC, group_partition(key, num_partitions))
        node = broker.nodes.get(leader)
        if node is None or not node.running:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
        return ErrorCode.NONE, None, node.node_id, node.advertised_host, node.port

    async def find_coordinator(ctx: RequestContext, req) -> FindCoordinatorResponse:
        if ctx.api_version >= 4:
            found = []
            for key in req.coordinator_keys:
                code, msg, node_id, host, port = await locate(key, req.key_type)
                found.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node_id, host=host, port=port, error_code=code, error_message=msg))
            return FindCoordinatorResponse(throttle_time_ms=0, coordinators=found)
        code, msg, node_id, host, port = await locate(req.key, req.key_type if ctx.api_version >= 1 else GROUP_KEY)
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=code,
                                       error_message=msg if ctx.api_version >= 1 else None,
                                       node_id=node_id, host=host, port=port)

    def group_handler(api_key: int):
        async def handle(ctx: RequestContext, req):
            return await coordinators.runtime(ctx.node.node_id).handle(
                api_key, ctx.api_version, req, client_id=ctx.client_id or "", client_host=ctx.client_host)
        return handle

    broker.apis.register(10, find_coordinator)
    for api_key in sorted(GROUP_API_KEYS - {TXN_OFFSET_COMMIT}):
        broker.apis.register(api_key, group_handler(api_key))
    return coordinators
