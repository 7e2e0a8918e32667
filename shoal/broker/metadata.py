"""Cluster metadata: topics, partitions, replicas and leaders.

All broker nodes of one process share one `ClusterMetadata`. Storage is
shared too, so every replica of a partition is in sync by construction: a
partition's leader is its first live replica, and when a node stops its
partitions' leadership moves to the next live replica (bumping the leader
epoch, as Kafka's controller does).

Topic definitions persist in `<first log dir>/__cluster_metadata.json`
(written atomically), so topics, their ids and configs survive restarts, as do
dynamic broker configs.
"""

from __future__ import annotations

import json
import os
import re
import uuid
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_TOPIC})

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249


def topic_name_error(name: str) -> str | None:
    """Kafka's topic-name rules; returns why a name is illegal, or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC.match(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    return None


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    # replicas[p] = node ids holding partition p, preferred leader first
    replicas: list[list[int]]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def num_partitions(self) -> int:
        return len(self.replicas)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


@dataclass(frozen=True)
class PartitionState:
    leader: int  # -1 when no replica is live
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


class ClusterMetadata:
    """Topics and leadership for every node of this process."""

    def __init__(self, cluster_id: str, node_ids: list[int], state_file: Path | None) -> None:
        self.cluster_id = cluster_id
        self.node_ids = list(node_ids)
        self.live: set[int] = set(node_ids)
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}
        self._epochs: dict[tuple[str, int], int] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._state_file = state_file
        # dynamic broker configs: "" (the cluster default) or a node id -> {name: value}
        self.broker_configs: dict[str, dict[str, str]] = {}
        # called with (topic, partition, old_leader, new_leader) on every change
        self.leader_listeners: list[Callable[[str, int, int, int], None]] = []
        if state_file is not None and state_file.exists():
            self._load()

    # -- persistence -------------------------------------------------------
    def _load(self) -> None:
        assert self._state_file is not None
        data = json.loads(self._state_file.read_text())
        for t in data.get("topics", []):
            info = TopicInfo(t["name"], uuid.UUID(t["id"]), t["replicas"], t.get("configs", {}))
            self._add(info)
        self.broker_configs = {str(k): dict(v) for k, v in data.get("broker_configs", {}).items()}

    def _save(self) -> None:
        if self._state_file is None:
            return
        data = {
            "cluster_id": self.cluster_id,
            "topics": [
                {"name": t.name, "id": str(t.topic_id), "replicas": t.replicas, "configs": t.configs}
                for t in sorted(self.topics.values(), key=lambda t: t.name)
            ],
            "broker_configs": {k: v for k, v in sorted(self.broker_configs.items()) if v},
        }
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self._state_file)

    def _add(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self.by_id[info.topic_id] = info
        for p in range(info.num_partitions):
            self._elect(info.name, p)

    # -- topics ------------------------------------------------------------
    def replica_assignment(self, topic: str, num_partitions: int, replication_factor: int,
                           first_partition: int = 0) -> list[list[int]]:
        """Spread leaders round-robin from a start derived from the name (stable across runs)."""
        n = len(self.node_ids)
        start = zlib.crc32(topic.encode()) % n
        out = []
        for p in range(first_partition, first_partition + num_partitions):
            first = (start + p) % n
            out.append([self.node_ids[(first + r) % n] for r in range(replication_factor)])
        return out

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None,
                     assignment: list[list[int]] | None = None) -> TopicInfo:
        replicas = assignment or self.replica_assignment(name, num_partitions, replication_factor)
        info = TopicInfo(name, uuid.uuid4(), replicas, dict(configs or {}))
        self._add(info)
        self._save()
        return info

    def add_partitions(self, name: str, new_total: int,
                       assignment: list[list[int]] | None = None) -> None:
        info = self.topics[name]
        extra = new_total - info.num_partitions
        rf = len(info.replicas[0]) if info.replicas else 1
        added = assignment or self.replica_assignment(name, extra, rf, info.num_partitions)
        first_new = info.num_partitions
        info.replicas.extend(added)
        for p in range(first_new, new_total):
            self._elect(name, p)
        self._save()

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.topics.pop(name)
        self.by_id.pop(info.topic_id, None)
        for p in range(info.num_partitions):
            self._epochs.pop((name, p), None)
            self._leaders.pop((name, p), None)
        self._save()
        return info

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self._save()

    def set_broker_configs(self, resource: str, configs: dict[str, str]) -> None:
        """The dynamic configs of broker ``resource`` ("" for the cluster default), replaced."""
        self.broker_configs[resource] = dict(configs)
        self._save()

    # -- leadership --------------------------------------------------------
    def _elect(self, topic: str, p: int) -> None:
        replicas = self.topics[topic].replicas[p]
        new = next((r for r in replicas if r in self.live), -1)
        key = (topic, p)
        old = self._leaders.get(key)
        if old == new:
            return
        self._leaders[key] = new
        self._epochs[key] = self._epochs.get(key, -1) + 1
        for listener in self.leader_listeners:
            listener(topic, p, -1 if old is None else old, new)

    def set_live(self, live: Iterable[int]) -> None:
        """Mark which nodes are up and re-elect leaders (the controller's job)."""
        self.live = set(live)
        for info in list(self.topics.values()):
            for p in range(info.num_partitions):
                self._elect(info.name, p)

    def partition(self, topic: str, p: int) -> PartitionState:
        replicas = self.topics[topic].replicas[p]
        return PartitionState(
            leader=self._leaders.get((topic, p), -1),
            leader_epoch=self._epochs.get((topic, p), 0),
            replicas=list(replicas),
            isr=[r for r in replicas if r in self.live],
        )

    def leader(self, topic: str, p: int) -> int:
        return self._leaders.get((topic, p), -1)

    def leader_epoch(self, topic: str, p: int) -> int:
        return self._epochs.get((topic, p), 0)

    @property
    def controller_id(self) -> int:
        return min(self.live) if self.live else -1
