"""Coordinator runtimes per broker node, following the leadership of their internal topic.

Each node runs one group coordinator runtime (for the `__consumer_offsets`
partitions it leads) and one transaction coordinator runtime (for
`__transaction_state`). When leadership moves (a node stops or starts), the
old leader unloads the partition and the new leader replays its log; loads
run in the background while the partition answers COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shoal.broker.metadata import OFFSETS_TOPIC, TRANSACTION_TOPIC
from shoal.broker.topic_configs import topic_log_config
from shoal.clock import now_ms
from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.consumer.target import resolve_assignors
from shoal.coordinator.group.consumer.topics import TopicMeta
from shoal.coordinator.group.runtime import GroupCoordinatorRuntime
from shoal.coordinator.partitioning import partition_for
from shoal.coordinator.txn.runtime import TransactionCoordinatorRuntime
from shoal.coordinator.txn.shard import TxnConfig
from shoal.protocol.errors import ErrorCode
from shoal.storage.errors import StorageError
from shoal.storage.producer_state import ProducerStateError

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import BrokerNode

log = logging.getLogger(__name__)


class NodeCoordinators:
    """One runtime of a coordinator kind per node; partitions follow their topic's leadership."""

    topic = ""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.runtimes: dict[int, Any] = {}
        self._loads: set[asyncio.Task[None]] = set()
        self.replayed: list[Callable[[int, Any], None]] = []  # every runtime's (`CoordinatorRuntime.replayed`)

    def new_runtime(self, node_id: int) -> Any:
        raise NotImplementedError

    def ensure_topic(self) -> None:
        raise NotImplementedError

    def log_config(self) -> Any:
        info = self.broker.metadata.topics.get(self.topic)
        return topic_log_config(info.configs if info else {"cleanup.policy": "compact"}, self.broker.log_defaults)

    def runtime(self, node_id: int) -> Any:
        rt = self.runtimes.get(node_id)
        if rt is None:
            rt = self.runtimes[node_id] = self.new_runtime(node_id)
            rt.replayed = self.replayed
        return rt

    async def on_leadership_changed(self) -> None:
        """Load the partitions each live node now leads; unload the rest."""
        metadata = self.broker.metadata
        if self.topic not in metadata.topics:
            return
        n = metadata.topics[self.topic].num_partitions
        for node_id, node in self.broker.nodes.items():
            rt = self.runtime(node_id)
            wanted = {p for p in range(n) if node.running and metadata.leader(self.topic, p) == node_id}
            for p in rt.owned_partitions() - wanted:
                rt.unload_partition(p)
            for p in sorted(wanted - rt.owned_partitions()):
                task = asyncio.get_running_loop().create_task(self._load(rt, p))
                self._loads.add(task)
                task.add_done_callback(self._loads.discard)

    async def _load(self, rt: Any, partition: int) -> None:
        try:
            await rt.load_partition(partition)
        except Exception:
            log.exception("loading %s-%d on node %d failed", self.topic, partition, rt.node_id)

    async def wait_loaded(self) -> None:
        while self._loads:
            await asyncio.gather(*self._loads, return_exceptions=True)

    def configured_partitions(self) -> int:
        """The partition count the internal topic is created with (its *.num.partitions setting)."""
        raise NotImplementedError

    def partition_for(self, key: str) -> int:
        """The partition of the internal topic that holds `key`'s state (a group id, a transactional id).

        From the topic as it exists: as Kafka, the setting counts only when the topic is created, so a
        restart with another setting still finds every key where its records are.
        """
        info = self.broker.metadata.topics.get(self.topic)
        return partition_for(key, info.num_partitions if info is not None else self.configured_partitions())

    async def locate(self, key: str) -> tuple[ErrorCode, BrokerNode | None]:
        """The node coordinating `key` (FindCoordinator), creating the topic on first use."""
        if self.topic not in self.broker.metadata.topics:
            self.ensure_topic()
            await self.on_leadership_changed()
        leader = self.broker.metadata.leader(self.topic, self.partition_for(key))
        node = self.broker.nodes.get(leader)
        if node is None or not node.running:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return ErrorCode.NONE, node

    def leader_runtime(self, partition: int) -> Any | None:
        """The runtime of the node leading `partition` of the topic, if that node is up."""
        leader = self.broker.metadata.leader(self.topic, partition)
        node = self.broker.nodes.get(leader)
        return None if node is None or not node.running else self.runtime(leader)

    async def close(self) -> None:
        for task in list(self._loads):
            task.cancel()
        for rt in self.runtimes.values():
            await rt.close()


class ClusterTopics:
    """The group coordinator's read-only view of the cluster's topics (a consumer group `TopicsView`):
    looked up in the broker's metadata at each call, so created, deleted and grown topics show."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    @staticmethod
    def _meta(info: Any) -> TopicMeta | None:
        # Brokers have no rack here: partitions carry no rack information.
        return None if info is None else TopicMeta(topic_id=info.topic_id, name=info.name,
                                                   num_partitions=info.num_partitions)

    def by_name(self, name: str) -> TopicMeta | None:
        return self._meta(self._broker.metadata.topics.get(name))

    def by_id(self, topic_id: uuid.UUID) -> TopicMeta | None:
        return self._meta(self._broker.metadata.by_id.get(topic_id))

    def names(self) -> list[str]:
        """Every topic, internal ones included (Kafka resolves regexes over its whole metadata image)."""
        return list(self._broker.metadata.topics)


class GroupCoordinators(NodeCoordinators):
    topic = OFFSETS_TOPIC

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker)
        self.config = GroupConfig.from_properties(broker.config.props)
        self.config.group_overrides = broker.metadata.group_configs  # the live map: changes apply at once
        self.topics = ClusterTopics(broker)
        self.assignors = resolve_assignors(self.config.group_consumer_assignors)

    def new_runtime(self, node_id: int) -> GroupCoordinatorRuntime:
        return GroupCoordinatorRuntime(node_id, self.broker.logs, self.config, log_config=self.log_config(),
                                       partition_for=self.partition_for, topics=self.topics,
                                       assignors=self.assignors)

    def ensure_topic(self) -> None:
        self.broker.ensure_offsets_topic()

    def configured_partitions(self) -> int:
        return self.config.offsets_topic_num_partitions

    async def on_topics_deleted(self, topics: list[str]) -> None:
        for rt in self.runtimes.values():
            await rt.on_topics_deleted(topics)


class TxnCoordinators(NodeCoordinators):
    topic = TRANSACTION_TOPIC

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker)
        self.config = TxnConfig.from_properties(broker.config.props)

    def new_runtime(self, node_id: int) -> TransactionCoordinatorRuntime:
        broker = self.broker

        def partition_exists(topic: str, partition: int) -> bool:
            info = broker.metadata.topics.get(topic)
            return info is not None and 0 <= partition < info.num_partitions

        return TransactionCoordinatorRuntime(
            node_id, broker.logs, self.config, next_producer_id=broker.producer_ids.next_id,
            offsets_partition=broker.coordinators.partition_for, write_marker=self.write_marker,
            partition_exists=partition_exists, log_config=self.log_config(), partition_for=self.partition_for)

    def ensure_topic(self) -> None:
        self.broker.ensure_transaction_topic()

    def configured_partitions(self) -> int:
        return self.config.transaction_state_log_num_partitions

    async def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                           coordinator_epoch: int, commit: bool) -> ErrorCode:
        """Append one transaction marker at the partition's leader (WriteTxnMarkers, in process)."""
        broker = self.broker
        info = broker.metadata.topics.get(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if topic == OFFSETS_TOPIC:
            rt = broker.coordinators.leader_runtime(partition)
            if rt is None:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            return await rt.write_marker(partition, producer_id, producer_epoch, coordinator_epoch, commit)
        leader = broker.nodes.get(broker.metadata.leader(topic, partition))
        if leader is None or not leader.running:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        plog = broker.partition_log(topic, partition)
        try:
            plog.append_marker(producer_id, producer_epoch, coordinator_epoch, commit, now_ms())
        except (ProducerStateError, StorageError) as e:  # StorageError: the disk failed, retried later
            return ErrorCode(e.error_code)
        broker.fetch_waiters.notify(topic, partition)
        return ErrorCode.NONE

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
               partition: int) -> ErrorCode:
        """KIP-890 part 1: ask the transactional id's coordinator whether this write belongs to its
        open transaction (in process, so a direct look at the coordinator's state)."""
        rt = self.leader_runtime(self.partition_for(transactional_id))
        if rt is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return rt.verify(transactional_id, producer_id, producer_epoch, topic, partition)
