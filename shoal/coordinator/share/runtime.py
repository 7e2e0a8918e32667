"""ShareCoordinatorRuntime: the share coordinator of one broker node, on the generic runtime.

The broker's share data path calls it in process (there is no Read/Write/DeleteShareGroupState
request here): each call runs under its `__share_group_state` partition's lock and returns once its
records are appended. The partition of a share-partition is Kafka's: abs(hashCode of
"groupId:topicId:partition") % partitions, the topic id in Kafka's base64 form.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from shoal.clock import now_ms
from shoal.coordinator.result import CoordinatorResult, int_settings_from_properties
from shoal.coordinator.runtime import CoordinatorRuntime
from shoal.coordinator.share.records import ShareKey
from shoal.coordinator.share.shard import ShareCoordinatorShard
from shoal.coordinator.share.state import ShareState
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.storage.config import LogConfig

SHARE_STATE_TOPIC = "__share_group_state"
# Kafka's share.coordinator.state.topic.segment.bytes default; compacted in shoal (Kafka: delete with
# retention.ms=-1 and its own pruning; see Broker.ensure_share_state_topic).
SHARE_LOG_CONFIG = LogConfig(cleanup_policy="compact", segment_bytes=104_857_600)


@dataclass(slots=True)
class ShareCoordinatorConfig:
    """Kafka's ShareCoordinatorConfig settings shoal uses (property names with dots as underscores)."""

    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_state_topic_replication_factor: int = 3
    share_coordinator_state_topic_min_isr: int = 2
    share_coordinator_state_topic_segment_bytes: int = 104_857_600

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> ShareCoordinatorConfig:
        return int_settings_from_properties(cls(), props)


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: url-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: "groupId:topicId:partition"."""
    return f"{group_id}:{kafka_uuid(topic_id)}:{partition}"


def parse_coordinator_key(key: str) -> ShareKey:
    """Kafka's SharePartitionKey.getInstance(key): the group id may hold colons (split from the right);
    ValueError when the key is malformed (no group id, a bad topic id or partition)."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise ValueError(f"Share coordinator key {key!r} is not of the form groupId:topicId:partition")
    group_id, topic, partition = parts
    try:
        raw = base64.urlsafe_b64decode(topic + "=" * (-len(topic) % 4))
        if len(raw) != 16 or len(topic) != 22:
            raise ValueError("not 16 bytes")
        topic_id = uuid.UUID(bytes=raw)
        p = int(partition)
    except ValueError as e:
        raise ValueError(f"Share coordinator key {key!r} is invalid: {e}") from None
    if not partition.lstrip("-").isdigit() or not -2**31 <= p < 2**31:
        raise ValueError(f"Share coordinator key {key!r} has an invalid partition")
    return ShareKey(group_id, topic_id, p)


class ShareCoordinatorRuntime(CoordinatorRuntime[ShareCoordinatorShard]):
    """The share coordinator of one broker node."""

    topic = SHARE_STATE_TOPIC
    name = "share coordinator"

    def __init__(self, node_id: int, log_manager: Any, config: ShareCoordinatorConfig | None = None, *,
                 log_config: LogConfig = SHARE_LOG_CONFIG, clock_ms: Callable[[], int] = now_ms,
                 partition_for: Callable[[str], int] | None = None) -> None:
        super().__init__(node_id, log_manager, log_config=log_config, clock_ms=clock_ms, partition_for=partition_for)
        self.config = config or ShareCoordinatorConfig()

    @property
    def num_partitions(self) -> int:
        return self.config.share_coordinator_state_topic_num_partitions

    # ================================================================ the generic runtime's hooks
    def new_shard(self, partition: int, plog: Any) -> ShareCoordinatorShard:
        return ShareCoordinatorShard(partition)

    def error_response(self, api_key: ApiKey, api_version: int, request: Any, error: ErrorCode) -> Any:
        return error  # only in-process calls come here: their answer is the error code

    # ================================================================ operations
    def key_partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_for(coordinator_key(group_id, topic_id, partition))

    async def read_state(self, group_id: str, topic_id: uuid.UUID,
                         partition: int) -> tuple[ErrorCode, ShareState | None]:
        """(NONE, the state or None when there is none) or (the error, None)."""
        key = ShareKey(group_id, topic_id, partition)
        return await self.call(self.key_partition(group_id, topic_id, partition), ApiKey.READ_SHARE_GROUP_STATE,
                               lambda shard, now: ((ErrorCode.NONE, shard.read(key)), CoordinatorResult()),
                               lambda code: (code, None))

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state: ShareState) -> ErrorCode:
        """Replace the share-partition's whole state."""
        key = ShareKey(group_id, topic_id, partition)
        return await self.call(self.key_partition(group_id, topic_id, partition), ApiKey.WRITE_SHARE_GROUP_STATE,
                               lambda shard, now: shard.write(key, state, now), lambda code: code)

    async def write_update(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                           leader_epoch: int, start_offset: int, batches: Iterable[Any],
                           delivery_complete_count: int = -1) -> ErrorCode:
        """Merge `batches` into the state as Kafka's WriteShareGroupState does (see `state.combine_batches`)."""
        key = ShareKey(group_id, topic_id, partition)
        batches = list(batches)
        return await self.call(
            self.key_partition(group_id, topic_id, partition), ApiKey.WRITE_SHARE_GROUP_STATE,
            lambda shard, now: shard.write_update(key, state_epoch, leader_epoch, start_offset, batches, now,
                                                  delivery_complete_count), lambda code: code)

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                               start_offset: int) -> ErrorCode:
        key = ShareKey(group_id, topic_id, partition)
        return await self.call(self.key_partition(group_id, topic_id, partition),
                               ApiKey.INITIALIZE_SHARE_GROUP_STATE,
                               lambda shard, now: shard.initialize(key, state_epoch, start_offset, now),
                               lambda code: code)

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partitions: Iterable[int]) -> ErrorCode:
        """Delete the states of `partitions` of the topic (tombstones); the first error, if any."""
        by_partition: dict[int, list[ShareKey]] = {}
        for p in partitions:
            by_partition.setdefault(self.key_partition(group_id, topic_id, p), []).append(
                ShareKey(group_id, topic_id, p))
        error = ErrorCode.NONE
        for coordinator_partition, keys in sorted(by_partition.items()):
            code = await self.call(coordinator_partition, ApiKey.DELETE_SHARE_GROUP_STATE,
                                   _deleter(keys), lambda code: code)
            if error == ErrorCode.NONE:
                error = code
        return error


def _deleter(keys: list[ShareKey]) -> Callable[[ShareCoordinatorShard, int], tuple[ErrorCode, CoordinatorResult]]:
    return lambda shard, now: shard.delete(keys)
