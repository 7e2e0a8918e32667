"""The share coordinator (KIP-932) of every node, following the leadership of `__share_group_state`.

The broker's share data path persists share-partition state through `ShareCoordinators`: each call
goes to the runtime of the node leading the share-partition's `__share_group_state` partition (the
topic is created on first use). A partition still loading is waited for a short while; no leader is
COORDINATOR_NOT_AVAILABLE, a leader that does not (yet) own the partition NOT_COORDINATOR.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from shoal.broker.coordinators import NodeCoordinators
from shoal.broker.metadata import SHARE_STATE_TOPIC
from shoal.clock import monotonic_ms
from shoal.coordinator.share.runtime import (
    ShareCoordinatorConfig,
    ShareCoordinatorRuntime,
    coordinator_key,
)
from shoal.coordinator.share.state import ShareState
from shoal.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from shoal.broker.broker import Broker

T = TypeVar("T")

# How long a call waits for its partition to finish loading (or for the topic's first load).
LOAD_WAIT_S = 5.0
_POLL_S = 0.01


class ShareCoordinators(NodeCoordinators):
    topic = SHARE_STATE_TOPIC

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker)
        self.config = ShareCoordinatorConfig.from_properties(broker.config.props)
        self.load_wait_s = LOAD_WAIT_S

    def new_runtime(self, node_id: int) -> ShareCoordinatorRuntime:
        return ShareCoordinatorRuntime(node_id, self.broker.logs, self.config, log_config=self.log_config(),
                                       partition_for=self.partition_for)

    def ensure_topic(self) -> None:
        self.broker.ensure_share_state_topic()

    def configured_partitions(self) -> int:
        return self.config.share_coordinator_state_topic_num_partitions

    # ---------------------------------------------------------------- routing
    async def _runtime_for(self, key: str) -> tuple[ErrorCode, ShareCoordinatorRuntime | None]:
        """The runtime that owns `key`'s partition, loaded (waiting up to `load_wait_s` for a load)."""
        if self.topic not in self.broker.metadata.topics:
            self.ensure_topic()
            await self.on_leadership_changed()
        partition = self.partition_for(key)
        deadline = monotonic_ms() + self.load_wait_s * 1000
        while True:
            rt = self.leader_runtime(partition)
            if rt is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
            status = rt.status(partition)
            if status == ErrorCode.NONE:
                return status, rt
            if monotonic_ms() >= deadline:
                return status, None
            await asyncio.sleep(_POLL_S)

    async def _route(self, key: str, call: Callable[[ShareCoordinatorRuntime], Awaitable[T]],
                     error: Callable[[ErrorCode], T]) -> T:
        code, rt = await self._runtime_for(key)
        return error(code) if rt is None else await call(rt)

    # ---------------------------------------------------------------- the share data path's API
    async def read_state(self, group_id: str, topic_id: uuid.UUID,
                         partition: int) -> tuple[ErrorCode, ShareState | None]:
        """(NONE, the persisted state or None if there is none), or (the error, None)."""
        return await self._route(coordinator_key(group_id, topic_id, partition),
                                 lambda rt: rt.read_state(group_id, topic_id, partition), lambda c: (c, None))

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state: ShareState) -> ErrorCode:
        """Replace the share-partition's state; durable in `__share_group_state` when NONE returns."""
        return await self._route(coordinator_key(group_id, topic_id, partition),
                                 lambda rt: rt.write_state(group_id, topic_id, partition, state), lambda c: c)

    async def write_update(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                           leader_epoch: int, start_offset: int, batches: Iterable[Any],
                           delivery_complete_count: int = -1) -> ErrorCode:
        """Merge `batches` into the state as Kafka's WriteShareGroupState does."""
        batches = list(batches)
        return await self._route(
            coordinator_key(group_id, topic_id, partition),
            lambda rt: rt.write_update(group_id, topic_id, partition, state_epoch=state_epoch,
                                       leader_epoch=leader_epoch, start_offset=start_offset, batches=batches,
                                       delivery_complete_count=delivery_complete_count), lambda c: c)

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                               start_offset: int) -> ErrorCode:
        return await self._route(
            coordinator_key(group_id, topic_id, partition),
            lambda rt: rt.initialize_state(group_id, topic_id, partition, state_epoch=state_epoch,
                                           start_offset=start_offset), lambda c: c)

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partitions: Iterable[int]) -> ErrorCode:
        """Delete the states of `partitions` (tombstones); the first error, if any."""
        error = ErrorCode.NONE
        for p in partitions:
            code = await self._route(coordinator_key(group_id, topic_id, p),
                                     functools.partial(_delete_one, group_id, topic_id, p), lambda c: c)
            if error == ErrorCode.NONE:
                error = code
        return error


async def _delete_one(group_id: str, topic_id: uuid.UUID, partition: int, rt: ShareCoordinatorRuntime) -> ErrorCode:
    return await rt.delete_state(group_id, topic_id, [partition])
