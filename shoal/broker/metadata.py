"""Cluster metadata: topics, partitions, replicas and leaders.

All broker nodes of one process share one `ClusterMetadata`. Storage is
shared too, so every replica of a partition is in sync by construction: a
partition's leader is its first live replica, and when a node stops its
partitions' leadership moves to the next live replica (bumping the leader
epoch, as Kafka's controller does).

Topic definitions, their ids and configs, and dynamic broker configs persist
in the cluster metadata log (`metadata_log.py`, in the first log dir): each
change appends its own records, and a start replays them.
"""

from __future__ import annotations

import re
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal import entropy, fileio
from shoal.broker.metadata_log import MetadataLog
from shoal.broker.quotas import AlterResult, QuotaStore
from shoal.broker.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclError,
    AclStore,
    DeleteFilterResult,
)
from shoal.broker.security.authorizer import to_record as acl_record
from shoal.broker.security.credentials import ScramCredentials, Upsertion, UserResult

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"  # the share coordinator's (KIP-932)
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_TOPIC, SHARE_STATE_TOPIC})

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

    def __init__(self, cluster_id: str, node_ids: list[int], directory: Path | None,
                 fsync: bool = True) -> None:
        self.cluster_id = cluster_id
        self.node_ids = list(node_ids)
        self.live: set[int] = set(node_ids)
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}
        self._epochs: dict[tuple[str, int], int] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._log = MetadataLog(directory, fsync) if directory is not None else None
        # dynamic broker configs: "" (the cluster default) or a node id -> {name: value}
        self.broker_configs: dict[str, dict[str, str]] = {}
        # dynamic group configs (KIP-848's GROUP resource): group id -> {name: value}
        self.group_configs: dict[str, dict[str, str]] = {}
        self.scram = ScramCredentials()
        self.acls = AclStore()
        self.quotas = QuotaStore()  # client quotas (AlterClientQuotas)
        # called with (topic, partition, old_leader, new_leader) on every change
        self.leader_listeners: list[Callable[[str, int, int, int], None]] = []
        # A cluster that starts with no metadata at all (not a restart, not a migration)
        self.fresh = self._log is not None and not self._log.path.exists() and not self._log.legacy.exists()
        if self._log is not None:
            self._load()

    # -- persistence -------------------------------------------------------
    def _load(self) -> None:
        assert self._log is not None
        legacy = None if self._log.path.exists() else self._log.read_legacy()
        if legacy is not None:  # written by an older shoal: becomes the log's first snapshot
            for t in legacy.get("topics", []):
                self._add(TopicInfo(t["name"], uuid.UUID(t["id"]), t["replicas"], t.get("configs", {})),
                          elect=False)
            self.broker_configs = {str(k): dict(v) for k, v in legacy.get("broker_configs", {}).items()}
            self._log.rewrite(self._snapshot())
            fileio.unlink(self._log.legacy)
        for record in self._log.replay():
            self._apply(record)
        for name in list(self.topics):
            for p in range(self.topics[name].num_partitions):
                self._elect(name, p)

    def _apply(self, r: dict[str, Any]) -> None:
        """One record of the log, as replay applies it (elections happen once, after)."""
        kind = r.get("t")
        if kind == "topic":
            self._add(TopicInfo(r["name"], uuid.UUID(r["id"]), r["replicas"], r.get("configs", {})), elect=False)
        elif kind == "partitions" and r["name"] in self.topics:
            self.topics[r["name"]].replicas.extend(r["replicas"])
        elif kind == "delete" and r["name"] in self.topics:
            info = self.topics.pop(r["name"])
            self.by_id.pop(info.topic_id, None)
        elif kind == "replicas" and r["name"] in self.topics:
            replicas = self.topics[r["name"]].replicas
            if 0 <= r["partition"] < len(replicas):
                replicas[r["partition"]] = list(r["replicas"])
        elif kind == "topic_configs" and r["name"] in self.topics:
            self.topics[r["name"]].configs = dict(r["configs"])
        elif kind == "broker_configs":
            self.broker_configs[str(r["resource"])] = dict(r["configs"])
        elif kind == "scram":
            self.scram.apply(r)
        elif kind == "group_configs":
            self._set_group(str(r["group"]), dict(r["configs"]))
        elif kind == "acl":
            self.acls.apply(r)
        elif kind == "quota":
            self.quotas.apply(r)

    def _snapshot(self) -> Iterator[dict[str, Any]]:
        for t in self.topics.values():
            yield {"t": "topic", "name": t.name, "id": str(t.topic_id), "replicas": t.replicas,
                   "configs": t.configs}
        for resource, configs in sorted(self.broker_configs.items()):
            if configs:
                yield {"t": "broker_configs", "resource": resource, "configs": configs}
        for group, configs in sorted(self.group_configs.items()):
            yield {"t": "group_configs", "group": group, "configs": configs}
        yield from self.scram.snapshot()
        yield from self.acls.records()
        yield from self.quotas.snapshot()

    def _record(self, *records: dict[str, Any]) -> None:
        """Make a change durable; rewrite the log as a snapshot when it is mostly history."""
        if self._log is None:
            return
        self._log.append(records)
        live = len(self.broker_configs) + len(self.group_configs) + len(self.topics) + len(self.scram) + len(self.acls) + len(self.quotas)
        if self._log.records > max(1000, 4 * live):
            self._log.rewrite(self._snapshot())

    def _record_and_apply(self, store: Any, records: list[dict[str, Any]]) -> None:
        """Make a store's change records durable, then apply them to it."""
        self._record(*records)
        for record in records:
            store.apply(record)

    def close(self) -> None:
        if self._log is not None:
            self._log.close()

    def _add(self, info: TopicInfo, elect: bool = True) -> None:
        self.topics[info.name] = info
        self.by_id[info.topic_id] = info
        if elect:
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
        info = TopicInfo(name, entropy.uuid4(), replicas, dict(configs or {}))
        self._record({"t": "topic", "name": name, "id": str(info.topic_id), "replicas": replicas,
                      "configs": info.configs})
        self._add(info)
        return info

    def add_partitions(self, name: str, new_total: int,
                       assignment: list[list[int]] | None = None) -> None:
        info = self.topics[name]
        extra = new_total - info.num_partitions
        rf = len(info.replicas[0]) if info.replicas else 1
        added = assignment or self.replica_assignment(name, extra, rf, info.num_partitions)
        first_new = info.num_partitions
        self._record({"t": "partitions", "name": name, "replicas": added})
        info.replicas.extend(added)
        for p in range(first_new, new_total):
            self._elect(name, p)

    def set_replicas(self, name: str, partition: int, replicas: list[int]) -> None:
        """A partition's replica list replaced (a reassignment); leadership follows."""
        self._record({"t": "replicas", "name": name, "partition": partition, "replicas": list(replicas)})
        self.topics[name].replicas[partition] = list(replicas)
        self._elect(name, partition)

    @property
    def log_records(self) -> int:
        """Records in the metadata log now (its end offset, as DescribeQuorum reports it)."""
        return self._log.records if self._log is not None else 0

    def delete_topic(self, name: str) -> TopicInfo:
        self._record({"t": "delete", "name": name})
        info = self.topics.pop(name)
        self.by_id.pop(info.topic_id, None)
        for p in range(info.num_partitions):
            self._epochs.pop((name, p), None)
            self._leaders.pop((name, p), None)
        return info

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self._record({"t": "topic_configs", "name": name, "configs": dict(configs)})
        self.topics[name].configs = dict(configs)

    def alter_scram(self, deletions: list[tuple[str, int]],
                    upsertions: list[Upsertion]) -> list[UserResult]:
        """AlterUserScramCredentials: validate, make durable, apply; each user's result."""
        results, records = self.scram.alter(deletions, upsertions)
        self._record_and_apply(self.scram, records)
        return results

    def create_acls(self, bindings: list[AclBinding]) -> list[AclError | None]:
        """CreateAcls: validate, make the new bindings durable, apply; each binding's error or None."""
        errors, new = self.acls.create(bindings, apply=False)
        self._record_and_apply(self.acls, [acl_record(b, "create") for b in new])
        return errors

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[DeleteFilterResult]:
        """DeleteAcls: each filter's error or the bindings it matched, removed durably."""
        results, removed = self.acls.delete(filters, apply=False)
        self._record_and_apply(self.acls, [acl_record(b, "delete") for b in removed])
        return results

    def alter_client_quotas(self, alterations: list[tuple[list[tuple[str, str | None]], list[tuple[str, float | None]]]],
                            validate_only: bool = False) -> list[AlterResult]:
        """AlterClientQuotas: validate, make the changes durable (unless only validating), apply;
        each entity's result."""
        results, records = self.quotas.alter(alterations)
        if not validate_only:
            self._record_and_apply(self.quotas, records)
        return results

    def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        """A group's dynamic configs, replaced (none left: the group follows the broker's)."""
        self._record({"t": "group_configs", "group": group, "configs": dict(configs)})
        self._set_group(group, dict(configs))

    def _set_group(self, group: str, configs: dict[str, str]) -> None:
        if configs:
            self.group_configs[group] = configs
        else:
            self.group_configs.pop(group, None)

    def set_broker_configs(self, resource: str, configs: dict[str, str]) -> None:
        """The dynamic configs of broker ``resource`` ("" for the cluster default), replaced."""
        self._record({"t": "broker_configs", "resource": resource, "configs": dict(configs)})
        self.broker_configs[resource] = dict(configs)

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
