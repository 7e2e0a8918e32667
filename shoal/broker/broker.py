"""The broker process: shared metadata and storage, N nodes, housekeeping.

`Broker` owns what the nodes of one process share: the configuration, the
cluster metadata, the log manager and the coordinators' runtimes. Nodes are
started and stopped independently so coordinator fail-over can be tested:
stopping a node moves leadership of its partitions to live replicas, and the
coordinator runtimes of the new leaders load the moved offsets partitions.
"""

from __future__ import annotations

import asyncio
import base64
import logging

from shoal import entropy, fileio
from shoal.broker.apis import ApiRegistry
from shoal.broker.config import PASSIVE_DYNAMIC_BROKER_DEFAULTS, BrokerConfig, ConfigError, parse_properties
from shoal.broker.connection import RequestMemory, ResponseMemory
from shoal.broker.coordinators import GroupCoordinators, TxnCoordinators
from shoal.broker.fetch_waiters import FetchWaiters
from shoal.broker.metadata import (
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    SHARE_STATE_TOPIC,
    TRANSACTION_TOPIC,
    ClusterMetadata,
    TopicInfo,
)
from shoal.broker.metrics import BrokerMetrics, MetricsServer
from shoal.broker.node import BrokerNode, NodeListener
from shoal.broker.producer_ids import ProducerIdManager
from shoal.broker.security.listeners import listener_security, listener_specs
from shoal.broker.share.manager import SharePartitions
from shoal.broker.share_coordinators import ShareCoordinators
from shoal.broker.topic_configs import (
    DYNAMIC_BROKER_CONFIGS,
    THROTTLE_RATE_CONFIGS,
    InvalidBrokerConfig,
    log_config_defaults,
    topic_log_config,
    valid_passive_value,
)
from shoal.clock import now_ms
from shoal.storage import LogManager, PartitionLog
from shoal.storage.file_pool import POOL as FILE_POOL

log = logging.getLogger(__name__)


def _new_cluster_id() -> str:
    # Kafka's cluster ids are url-safe base64 of a UUID, 22 characters.
    return base64.urlsafe_b64encode(entropy.uuid4().bytes).decode().rstrip("=")


class Broker:
    """Everything the nodes of one process share."""

    def __init__(self, config: BrokerConfig, num_nodes: int = 1) -> None:
        self.config = config
        self.log_dirs = config.log_dirs
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._cluster_id()
        base_id = config.node_id
        self.node_ids = [base_id + i for i in range(num_nodes)]
        self.metadata = ClusterMetadata(self.cluster_id, self.node_ids, self.log_dirs[0])
        if self.metadata.fresh:
            # As Kafka 4.1+'s controller does when it activates (eligible leader replicas, KIP-966):
            # a cluster-level min.insync.replicas record, so topics report it as a dynamic default.
            self.metadata.set_broker_configs("", {"min.insync.replicas": config.get("min.insync.replicas")})
        self._set_dynamic_layers()
        self.log_defaults = log_config_defaults(config)
        self.logs = LogManager(self.log_dirs, self.log_defaults)
        self.producer_ids = ProducerIdManager(self.log_dirs[0] / "producer_ids")
        self.request_memory = RequestMemory(config.get_int("queued.max.request.bytes"))
        self.response_memory = ResponseMemory(max(1, config.get_int("fetch.memory.max.bytes")))
        max_open = config.get_optional_int("log.max.open.segments")
        if max_open is not None:
            FILE_POOL.limit = max(1, max_open)
        self.nodes = self._make_nodes()
        self.fetch_waiters = FetchWaiters()
        self.share = SharePartitions(self)
        self.apis = ApiRegistry.default()
        self.metrics = BrokerMetrics()
        self.metrics_server: MetricsServer | None = None
        self.coordinators = GroupCoordinators(self)
        self.txn_coordinators = TxnCoordinators(self)
        self.share_coordinators = ShareCoordinators(self)
        self._housekeeping: asyncio.Task[None] | None = None

    def _make_nodes(self) -> dict[int, BrokerNode]:
        """Each node gets every listener; node i binds each listener's port + i × the number of
        listeners (so adjacent ports never collide), or an ephemeral port for port 0."""
        specs = listener_specs(self.config)
        security = [listener_security(self.config, spec, self.metadata.scram.get) for spec in specs]
        nodes = {}
        for i, node_id in enumerate(self.node_ids):
            step = i * len(specs)
            nodes[node_id] = BrokerNode(self, node_id, [
                NodeListener(sec, spec.host, spec.port + step if spec.port else 0, spec.advertised_host,
                             None if spec.advertised_port is None else spec.advertised_port + step)
                for spec, sec in zip(specs, security, strict=True)])
        return nodes

    def _cluster_id(self) -> str:
        meta = self.log_dirs[0] / "meta.properties"
        configured = self.config.get("cluster.id").strip()
        if meta.exists():
            stored = parse_properties(meta.read_text()).get("cluster.id", "")
            if stored:
                return stored
        cid = configured or _new_cluster_id()
        fileio.replace_file(meta, f"# written by shoal\nversion=1\ncluster.id={cid}\n"
                                  f"node.id={self.config.node_id}\n".encode(), fsync=True)
        return cid

    # -- lifecycle ---------------------------------------------------------
    async def start(self) -> None:
        topics = self.metadata.topics
        self.logs.load_existing(
            lambda t: topic_log_config(topics[t].configs, self.log_defaults) if t in topics else None)
        for node in self.nodes.values():
            await node.start()
        self.metadata.set_live(self.node_ids)
        await self._coordinators_follow()
        self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep())
        port = self.config.get_optional_int("metrics.port")
        if port is not None:
            self.metrics_server = MetricsServer(self, self.config.listeners[0].host, port)
            await self.metrics_server.start()

    async def stop_node(self, node_id: int) -> None:
        """Stop one node: its connections close and its partitions get new leaders."""
        await self.nodes[node_id].stop()
        await self._live_nodes_changed()

    async def start_node(self, node_id: int) -> None:
        await self.nodes[node_id].start()
        await self._live_nodes_changed()

    async def _live_nodes_changed(self) -> None:
        self.metadata.set_live(n for n, nd in self.nodes.items() if nd.running)
        await self._coordinators_follow()
        self.share.leadership_changed()  # share partitions follow their partitions' leaders

    async def _coordinators_follow(self) -> None:
        """Each coordinator kind loads the partitions of its topic a node now leads, unloads the rest."""
        for coordinators in (self.coordinators, self.txn_coordinators, self.share_coordinators):
            await coordinators.on_leadership_changed()

    async def reassign(self, topic: str, partition: int, replicas: list[int]) -> None:
        """A partition's new replica list (AlterPartitionReassignments): complete at once, as every
        node shares the storage; its leader becomes the first live replica of the new list."""
        self.metadata.set_replicas(topic, partition, replicas)
        if topic in INTERNAL_TOPICS:  # coordinators follow the leadership of their topics
            await self._coordinators_follow()
        self.share.leadership_changed()

    async def close(self) -> None:
        if self._housekeeping is not None:
            self._housekeeping.cancel()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        for node in self.nodes.values():
            await node.stop()
        await self.share.close()
        await self.share_coordinators.close()
        await self.txn_coordinators.close()
        await self.coordinators.close()
        self.logs.close()
        self.metadata.close()

    async def _housekeep(self) -> None:
        """Retention, compaction and time-based flush (log.flush.interval.ms) on a timer: Kafka's
        cleaner looks for work every log.cleaner.backoff.ms when it has none, so compaction is
        never later than that here either."""
        interval_ms = min(self.config.get_int("log.retention.check.interval.ms"),
                          self.config.get_int("log.cleaner.backoff.ms"), 30_000)
        flush_ms = self.config.get_optional_int("log.flush.interval.ms")
        if flush_ms is not None:
            interval_ms = min(interval_ms, max(flush_ms, 100))
        interval = interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.logs.run_periodic(now_ms())
            except Exception:
                log.exception("log housekeeping failed")

    # -- topics ------------------------------------------------------------
    def partition_log(self, topic: str, partition: int) -> PartitionLog:
        info = self.metadata.topics[topic]
        existing = self.logs.get(topic, partition)
        if existing is not None:
            return existing
        return self.logs.get_or_create(topic, partition, topic_log_config(info.configs, self.log_defaults))

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None,
                     assignment: list[list[int]] | None = None) -> TopicInfo:
        topic_log_config(configs or {}, self.log_defaults)  # validates
        # A partition's files are made when it is first used (partition_log), so creating many
        # partitions costs metadata only: one record, no directory or open file per partition.
        info = self.metadata.create_topic(name, num_partitions, replication_factor, configs, assignment)
        log.info("created topic %s with %d partitions", name, num_partitions)
        return info

    def add_partitions(self, name: str, new_total: int, assignment: list[list[int]] | None = None) -> None:
        self.metadata.add_partitions(name, new_total, assignment)  # files on first use, as create_topic

    async def delete_topic(self, name: str) -> None:
        self.metadata.delete_topic(name)
        self.logs.delete_topic(name)
        self.fetch_waiters.cancel_topic(name)
        self.share.forget_topic(name)
        await self.coordinators.on_topics_deleted([name])
        log.info("deleted topic %s", name)

    def alter_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool = False) -> None:
        """Replace a topic's configs (validated first: InvalidTopicConfig); applied to its open
        partitions at once and kept in the cluster metadata."""
        log_config = topic_log_config(configs, self.log_defaults)
        if validate_only:
            return
        self.metadata.set_topic_configs(name, configs)
        self.logs.update_topic_config(name, log_config)

    # -- dynamic broker configs ---------------------------------------------
    def _dynamic_layers(self, stored: dict[str, dict[str, str]]) -> tuple[dict[str, str], dict[str, str]]:
        # Nodes of one process share storage and log settings, so a node's dynamic configs apply
        # to all of them (the highest node id wins where two nodes set the same name).
        node: dict[str, str] = {}
        for n in self.node_ids:
            node.update(stored.get(str(n), {}))
        return dict(stored.get("", {})), node

    def _set_dynamic_layers(self) -> None:
        self.config.set_dynamic(*self._dynamic_layers(self.metadata.broker_configs))

    def alter_broker_configs(self, resource: str, configs: dict[str, str], validate_only: bool = False) -> None:
        """Replace the dynamic configs of ``resource`` ("" for the cluster default, or a node id):
        validated (InvalidBrokerConfig), kept in the cluster metadata, and applied to every
        topic that does not set its own value."""
        bad = sorted(set(configs) - DYNAMIC_BROKER_CONFIGS)
        if bad:
            raise InvalidBrokerConfig(f"Cannot update these configs dynamically: Set({', '.join(bad)})")
        for name, value in configs.items():
            if name in PASSIVE_DYNAMIC_BROKER_DEFAULTS and not valid_passive_value(name, value):
                raise InvalidBrokerConfig(f"Invalid value {value} for configuration {name}")
            if name in THROTTLE_RATE_CONFIGS and not (valid_passive_value(name, value) and int(value) >= 0):
                raise InvalidBrokerConfig(f"Invalid value {value} for configuration {name}: "
                                          f"Value must be at least 0")
        stored = {**self.metadata.broker_configs, resource: dict(configs)}
        try:
            defaults = log_config_defaults(self.config.with_dynamic(*self._dynamic_layers(stored)))
            for info in self.metadata.topics.values():
                topic_log_config(info.configs, defaults)
        except (ConfigError, ValueError) as e:
            raise InvalidBrokerConfig(str(e)) from None
        if validate_only:
            return
        self.metadata.set_broker_configs(resource, configs)
        self._set_dynamic_layers()
        self.log_defaults = defaults
        self.logs.defaults = defaults
        for name, info in self.metadata.topics.items():
            self.logs.update_topic_config(name, topic_log_config(info.configs, defaults))

    def auto_create_topic(self, name: str) -> TopicInfo:
        return self.create_topic(name, self.config.get_int("num.partitions"),
                                 min(self.config.get_int("default.replication.factor"), len(self.node_ids)))

    def _ensure_internal_topic(self, name: str, prefix: str, configs: dict[str, str]) -> TopicInfo:
        """Create internal topic ``name`` on first use from the ``<prefix>.num.partitions``,
        ``.replication.factor`` and ``.segment.bytes`` broker configs."""
        info = self.metadata.topics.get(name)
        if info is None:
            # Replication capped at the node count: RF 3 on one node would leave the topic unusable.
            rf = min(self.config.get_int(f"{prefix}.replication.factor"), len(self.node_ids))
            if name == SHARE_STATE_TOPIC:  # min ISR capped likewise
                configs["min.insync.replicas"] = str(min(self.config.get_int(f"{prefix}.min.isr"), rf))
            info = self.create_topic(name, self.config.get_int(f"{prefix}.num.partitions"), rf,
                                     {**configs, "segment.bytes": self.config.get(f"{prefix}.segment.bytes")})
        return info

    def ensure_offsets_topic(self) -> TopicInfo:
        return self._ensure_internal_topic(OFFSETS_TOPIC, "offsets.topic",
                                           {"cleanup.policy": "compact", "compression.type": "producer"})

    def ensure_transaction_topic(self) -> TopicInfo:
        return self._ensure_internal_topic(TRANSACTION_TOPIC, "transaction.state.log",
                                           {"cleanup.policy": "compact", "compression.type": "uncompressed"})

    def ensure_share_state_topic(self) -> TopicInfo:
        """`__share_group_state` (KIP-932's share coordinator), created on first use as Kafka does."""
        # Kafka 4.4 creates it cleanup.policy=delete, retention.ms=-1 and trims it with DeleteRecords
        # below the oldest offset a state still needs; shoal has no such pruner and writes every
        # change as a whole ShareSnapshot, so a compacted topic keeps exactly the live states.
        return self._ensure_internal_topic(SHARE_STATE_TOPIC, "share.coordinator.state.topic",
                                           {"cleanup.policy": "compact", "compression.type": "producer"})
