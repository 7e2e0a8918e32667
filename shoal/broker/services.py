"""What a handler may use of the broker: a narrow, typed view (`BrokerServices`).

Handlers type against this Protocol, never against `broker.broker.Broker`, so
they import nothing of the class that imports them (no import cycle) and can
be tested with any object that has these attributes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from shoal.broker.apis import ApiRegistry
    from shoal.broker.config import BrokerConfig
    from shoal.broker.connection import ResponseMemory
    from shoal.broker.coordinators import GroupCoordinators, TxnCoordinators
    from shoal.broker.fetch_waiters import FetchWaiters
    from shoal.broker.metadata import ClusterMetadata, TopicInfo
    from shoal.broker.metrics import BrokerMetrics
    from shoal.broker.producer_ids import ProducerIdManager
    from shoal.broker.share.manager import SharePartitions
    from shoal.broker.share_coordinators import ShareCoordinators
    from shoal.storage import LogConfig, LogManager, PartitionLog


class BrokerServices(Protocol):
    """The broker state and operations that request handlers use."""

    config: BrokerConfig
    cluster_id: str
    metadata: ClusterMetadata
    apis: ApiRegistry
    nodes: dict[int, Any]
    # the data path: produce, fetch, offsets, groups and transactions
    metrics: BrokerMetrics
    response_memory: ResponseMemory
    fetch_waiters: FetchWaiters
    coordinators: GroupCoordinators
    txn_coordinators: TxnCoordinators
    share_coordinators: ShareCoordinators  # KIP-932's share coordinator (share-partition state)
    producer_ids: ProducerIdManager
    share: SharePartitions  # share groups' in-flight records and share sessions

    def partition_log(self, topic: str, partition: int) -> PartitionLog: ...

    def auto_create_topic(self, name: str) -> TopicInfo: ...

    # the admin APIs: topics, configs, log dirs, reassignment
    logs: LogManager
    log_defaults: LogConfig

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None,
                     assignment: list[list[int]] | None = None) -> TopicInfo: ...

    def add_partitions(self, name: str, new_total: int, assignment: list[list[int]] | None = None) -> None: ...

    async def delete_topic(self, name: str) -> None: ...

    def alter_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool = False) -> None: ...

    def alter_broker_configs(self, resource: str, configs: dict[str, str], validate_only: bool = False) -> None: ...

    async def reassign(self, topic: str, partition: int, replicas: list[int]) -> None: ...
