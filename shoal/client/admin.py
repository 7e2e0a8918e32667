"""Admin client: topics, partitions, groups and their offsets, cluster description."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey

from . import assignment as ap
from .cluster import AsyncCore, KafkaClient, now_ms
from .config import ADMIN_DEFAULTS, make_config
from .consumer import list_offsets
from .errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from .member_offsets import offset_commit_topics
from .protocol import request_class
from .structs import OffsetAndMetadata, TopicPartition, by_topic
from .sync import _SyncFace

RETRY_CODES = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: dict[str, str] = field(default_factory=dict)
    replica_assignment: dict[int, list[int]] | None = None


@dataclass
class NewPartitions:
    total_count: int
    assignments: list[list[int]] | None = None


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: list[TopicPartition]


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    error: KafkaError | None = None


@dataclass
class GroupListing:
    group_id: str
    protocol_type: str
    state: str = ""


@dataclass
class BrokerDescription:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerDescription]


def _err(code: int, msg: str | None = None) -> KafkaError | None:
    return None if code == 0 else error_for(code, msg)


class AIOAdminClient(AsyncCore):
    """Asyncio admin client.  Per-item results map names to ``None`` (ok) or a ``KafkaError``."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = make_config(ADMIN_DEFAULTS, config, **kwargs)
        self.client = KafkaClient(self.config)
        self._started = False

    async def start(self) -> None:
        if not self._started:
            await self.client.refresh_metadata([])
            self._started = True

    async def close(self) -> None:
        await self.client.close()

    async def _controller(self) -> int:
        await self.start()
        await self.client.refresh_metadata([])
        cid = self.client.cluster.controller_id
        if cid < 0:
            cid = next(iter(self.client.cluster.brokers))
        return cid

    async def _group_call(self, group_id: str, request: Any) -> Any:
        """Send to the group's coordinator, rediscovering it on coordinator errors."""
        deadline = now_ms() + self.config["default.api.timeout.ms"]
        while True:
            await self.start()
            timeout_ms = self.config["default.api.timeout.ms"]
            node = await self.client.find_coordinator(group_id, 0, now_ms() + timeout_ms)
            try:
                resp = await self.client.send(node, request)
            except (KafkaConnectionError, KafkaTimeoutError):
                if now_ms() > deadline:
                    raise
                continue
            code = getattr(resp, "error_code", 0)
            if code in RETRY_CODES and now_ms() < deadline:
                await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
                continue
            return resp

    # -- topics --------------------------------------------------------------------

    async def create_topics(self, topics: list[NewTopic], timeout_ms: int = 30000,
                            validate_only: bool = False) -> dict[str, KafkaError | None]:
        cls = request_class(ApiKey.CREATE_TOPICS)
        reqs = []
        for t in topics:
            assigns = [cls.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                       for p, b in (t.replica_assignment or {}).items()]
            reqs.append(cls.CreatableTopic(
                name=t.name, num_partitions=t.num_partitions if not assigns else -1,
                replication_factor=t.replication_factor if not assigns else -1, assignments=assigns,
                configs=[cls.CreatableTopicConfig(name=k, value=v) for k, v in t.config.items()]))
        resp = await self.client.send(await self._controller(),
                                      cls(topics=reqs, timeout_ms=timeout_ms, validate_only=validate_only))
        return {t.name: _err(t.error_code, t.error_message) for t in resp.topics}

    async def delete_topics(self, topics: list[str], timeout_ms: int = 30000) -> dict[str, KafkaError | None]:
        cls = request_class(ApiKey.DELETE_TOPICS)
        resp = await self.client.send(await self._controller(), cls(topic_names=list(topics), timeout_ms=timeout_ms))
        return {r.name: _err(r.error_code, getattr(r, "error_message", None)) for r in resp.responses}

    async def create_partitions(self, new: dict[str, NewPartitions | int], timeout_ms: int = 30000,
                                validate_only: bool = False) -> dict[str, KafkaError | None]:
        cls = request_class(ApiKey.CREATE_PARTITIONS)
        topics = []
        for name, np in new.items():
            if isinstance(np, int):
                np = NewPartitions(np)
            assigns = None
            if np.assignments is not None:
                assigns = [cls.CreatePartitionsAssignment(broker_ids=b) for b in np.assignments]
            topics.append(cls.CreatePartitionsTopic(name=name, count=np.total_count, assignments=assigns))
        resp = await self.client.send(await self._controller(),
                                      cls(topics=topics, timeout_ms=timeout_ms, validate_only=validate_only))
        return {r.name: _err(r.error_code, r.error_message) for r in resp.results}

    async def list_topics(self) -> dict[str, list[int]]:
        await self.start()
        self.client.all_topics_metadata = True
        await self.client.refresh_metadata()
        return {t: sorted(i.leaders) for t, i in self.client.cluster.topics.items() if not i.error_code}

    async def describe_cluster(self) -> ClusterDescription:
        await self.start()
        conn = await self.client.any_conn()
        if ApiKey.DESCRIBE_CLUSTER in conn.versions:
            resp = await conn.send(request_class(ApiKey.DESCRIBE_CLUSTER)())
            if resp.error_code:
                raise error_for(resp.error_code, resp.error_message)
            return ClusterDescription(resp.cluster_id, resp.controller_id,
                                      [BrokerDescription(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers])
        await self.client.refresh_metadata([])
        c = self.client.cluster
        return ClusterDescription(c.cluster_id, c.controller_id,
                                  [BrokerDescription(b.node_id, b.host, b.port, b.rack) for b in c.brokers.values()])

    async def list_offsets(self, specs: dict[TopicPartition, str | int]) -> dict[TopicPartition, tuple[int, int]]:
        """``{tp: "earliest" | "latest" | timestamp_ms}`` -> ``{tp: (offset, timestamp)}``."""
        await self.start()
        wanted = {TopicPartition(tp[0], tp[1]): (-2 if s == "earliest" else -1 if s == "latest" else int(s))
                  for tp, s in specs.items()}
        return await list_offsets(self.client, wanted, self.config)

    # -- groups --------------------------------------------------------------------

    async def list_groups(self) -> list[GroupListing]:
        await self.start()
        await self.client.refresh_metadata([])
        cls = request_class(ApiKey.LIST_GROUPS)
        out: dict[str, GroupListing] = {}
        for node in list(self.client.cluster.brokers):
            resp = await self.client.send(node, cls(states_filter=[]))
            if resp.error_code:
                raise error_for(resp.error_code, "ListGroups")
            for g in resp.groups:
                out[g.group_id] = GroupListing(g.group_id, g.protocol_type, getattr(g, "group_state", ""))
        return sorted(out.values(), key=lambda g: g.group_id)

    async def describe_groups(self, group_ids: list[str]) -> dict[str, GroupDescription]:
        cls = request_class(ApiKey.DESCRIBE_GROUPS)
        out = {}
        for gid in group_ids:
            resp = await self._group_call(gid, cls(groups=[gid]))
            g = resp.groups[0]
            members = []
            for m in g.members:
                parts: list[TopicPartition] = []
                if g.protocol_type == "consumer" and m.member_assignment:
                    try:
                        parts = [TopicPartition(tp.topic, tp.partition)
                                 for tp in ap.decode_assignment(bytes(m.member_assignment)).partitions]
                    except Exception:  # noqa: BLE001 - not a consumer-protocol blob
                        parts = []
                members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, parts))
            out[gid] = GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, members,
                                        _err(g.error_code))
        return out

    async def delete_groups(self, group_ids: list[str]) -> dict[str, KafkaError | None]:
        cls = request_class(ApiKey.DELETE_GROUPS)
        out = {}
        for gid in group_ids:
            resp = await self._group_call(gid, cls(groups_names=[gid]))
            for r in resp.results:
                out[r.group_id] = _err(r.error_code)
        return out

    async def list_group_offsets(self, group_id: str, partitions: list[TopicPartition] | None = None, *,
                                 require_stable: bool = False) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of a group. With ``require_stable`` (KIP-447), offsets still pending in a
        transaction are waited for (UNSTABLE_OFFSET_COMMIT is retried) instead of read as they were."""
        cls = request_class(ApiKey.OFFSET_FETCH)
        topics = None
        if partitions is not None:
            topics = [cls.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                      for t, ps in by_topic((tp, tp[1]) for tp in partitions).items()]
        deadline = now_ms() + self.config["default.api.timeout.ms"]
        while True:
            resp = await self._group_call(group_id, cls(group_id=group_id, topics=topics,
                                                        require_stable=require_stable))
            if getattr(resp, "error_code", 0):
                raise error_for(resp.error_code, f"OffsetFetch {group_id}")
            out = {}
            unstable = False
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
                        unstable = True
                    elif p.error_code:
                        raise error_for(p.error_code, f"OffsetFetch {t.name}-{p.partition_index}")
                    elif p.committed_offset >= 0:
                        out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                            p.committed_offset, p.metadata or "", getattr(p, "committed_leader_epoch", -1))
            if not unstable:
                return out
            if now_ms() > deadline:
                raise error_for(ErrorCode.UNSTABLE_OFFSET_COMMIT, f"OffsetFetch {group_id}")
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    async def alter_group_offsets(self, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata | int]
                                  ) -> dict[TopicPartition, KafkaError | None]:
        """OffsetCommit with generation -1 (the group must have no active members)."""
        cls = request_class(ApiKey.OFFSET_COMMIT)
        req = cls(group_id=group_id, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                  topics=offset_commit_topics(offsets))
        deadline = now_ms() + self.config["default.api.timeout.ms"]
        while True:
            resp = await self._group_call(group_id, req)
            codes = {p.error_code for t in resp.topics for p in t.partitions}
            # OffsetCommit reports coordinator errors per partition: retry them as _group_call does.
            if not codes & RETRY_CODES or now_ms() > deadline:
                return {TopicPartition(t.name, p.partition_index): _err(p.error_code)
                        for t in resp.topics for p in t.partitions}
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    async def delete_group_offsets(self, group_id: str, partitions: list[TopicPartition]
                                   ) -> dict[TopicPartition, KafkaError | None]:
        cls = request_class(ApiKey.OFFSET_DELETE)
        by = by_topic((tp, cls.OffsetDeleteRequestPartition(partition_index=tp[1])) for tp in partitions)
        resp = await self._group_call(group_id, cls(group_id=group_id, topics=[
            cls.OffsetDeleteRequestTopic(name=t, partitions=ps) for t, ps in by.items()]))
        if resp.error_code:
            err = error_for(resp.error_code, f"OffsetDelete {group_id}")
            return {TopicPartition(tp[0], tp[1]): err for tp in partitions}
        return {TopicPartition(t.name, p.partition_index): _err(p.error_code)
                for t in resp.topics for p in t.partitions}


class AdminClient(_SyncFace):
    """Synchronous face of :class:`AIOAdminClient` (same methods, blocking)."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(AIOAdminClient(config, **kwargs), "shoal-admin")
        self._start()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._core, name)
        if not callable(attr) or name.startswith("_") or name in ("start",):
            return attr

        def call(*args: Any, **kw: Any) -> Any:
            return self._lt.run(attr(*args, **kw))

        call.__name__ = name
        call.__doc__ = attr.__doc__
        return call

    def close(self) -> None:
        self._shutdown(self._core.close)
