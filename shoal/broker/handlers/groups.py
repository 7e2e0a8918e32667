"""FindCoordinator, and the group APIs handed to each node's coordinator runtime."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shoal.broker.metadata import OFFSETS_TOPIC
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.find_coordinator_response import FindCoordinatorResponse

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext

log = logging.getLogger(__name__)

GROUP_KEY = 0


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def group_partition(group_id: str, num_partitions: int) -> int:
    """Kafka's Utils.abs(hashCode) % n; Utils.abs maps MIN_VALUE to 0 (h & 0x7fffffff)."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % num_partitions


class Coordinators:
    """Per-node coordinator runtimes; follows leadership of `__consumer_offsets`."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def on_leadership_changed(self) -> None:
        pass

    async def on_topics_deleted(self, topics: list[str]) -> None:
        pass

    async def close(self) -> None:
        pass


def register(broker: Broker) -> Coordinators:
    coordinators = Coordinators(broker)
    num_partitions = broker.config.get_int("offsets.topic.num.partitions")

    def locate(key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
        if key_type != GROUP_KEY:
            return ErrorCode.INVALID_REQUEST, f"Unsupported key type {key_type}", -1, "", -1
        broker.ensure_offsets_topic()
        leader = broker.metadata.leader(OFFSETS_TOPIC, group_partition(key, num_partitions))
        node = broker.nodes.get(leader)
        if node is None or not node.running:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
        return ErrorCode.NONE, None, node.node_id, node.advertised_host, node.port

    async def find_coordinator(ctx: RequestContext, req) -> FindCoordinatorResponse:
        if ctx.api_version >= 4:
            coordinators = []
            for key in req.coordinator_keys:
                code, msg, node_id, host, port = locate(key, req.key_type)
                coordinators.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node_id, host=host, port=port, error_code=code, error_message=msg))
            return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
        code, msg, node_id, host, port = locate(req.key, req.key_type if ctx.api_version >= 1 else GROUP_KEY)
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=msg,
                                       node_id=node_id, host=host, port=port)

    broker.apis.register(10, find_coordinator)
    return coordinators
