"""Cluster metadata and the connection pool every client face shares."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from dataclasses import dataclass, field
from typing import Any, Self

# The client times deadlines and back-offs: a clock that never goes back.
from shoal.clock import monotonic_ms as now_ms
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey

from .config import parse_bootstrap
from .conn import BrokerConnection
from .errors import KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailableError, error_for
from .protocol import request_class

log = logging.getLogger(__name__)


@dataclass
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class TopicInfo:
    name: str
    error_code: int = 0
    is_internal: bool = False
    leaders: dict[int, int] = field(default_factory=dict)  # partition -> leader node (-1 unknown)
    topic_id: Any = None
    replicas: dict[int, list[int]] = field(default_factory=dict)


class ClusterMetadata:
    """What the last Metadata responses said: brokers, controller, partitions and leaders."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.last_refresh_ms = 0

    def update(self, resp: Any, requested: list[str] | None) -> None:
        self.brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
        self.cluster_id = resp.cluster_id
        self.controller_id = resp.controller_id
        fresh: dict[str, TopicInfo] = {}
        for t in resp.topics:
            info = TopicInfo(t.name, t.error_code, t.is_internal, {}, getattr(t, "topic_id", None))
            for p in t.partitions:
                info.leaders[p.partition_index] = p.leader_id
                info.replicas[p.partition_index] = list(p.replica_nodes)
            fresh[t.name] = info
        if requested is None:
            self.topics = fresh
        else:
            for name in requested:
                self.topics.pop(name, None)
            self.topics.update(fresh)
        self.last_refresh_ms = now_ms()

    def partitions_for(self, topic: str) -> list[int] | None:
        info = self.topics.get(topic)
        if info is None or info.error_code or not info.leaders:
            return None
        return sorted(info.leaders)

    def leader_for(self, topic: str, partition: int) -> int:
        info = self.topics.get(topic)
        if info is None:
            return -1
        return info.leaders.get(partition, -1)


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel ``task`` (if there is one) and wait until it has finished."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


class AsyncCore:
    """An asyncio client core as an async context manager: started on entry, closed on exit."""

    async def start(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class KafkaClient:
    """Connections by node id, bootstrap, metadata refresh and reconnect backoff."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.bootstrap = parse_bootstrap(config["bootstrap.servers"])
        self.cluster = ClusterMetadata()
        self._conns: dict[Any, BrokerConnection] = {}
        self._connecting: dict[Any, asyncio.Future] = {}
        self._backoff: dict[Any, tuple[int, int]] = {}  # key -> (failures, not_before_ms)
        self._metadata_lock = asyncio.Lock()
        self._metadata_topics: set[str] = set()  # topics a refresh must include
        self.all_topics_metadata = False
        self.closed = False

    # -- connections ---------------------------------------------------------------

    async def conn(self, node_id: int, *, purpose: str = "") -> BrokerConnection:
        """A ready connection to ``node_id`` (``purpose`` gives it a separate socket)."""
        key = (node_id, purpose)
        c = self._conns.get(key)
        if c is not None and not c.closed:
            return c
        pending = self._connecting.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut = asyncio.get_running_loop().create_future()
        self._connecting[key] = fut
        try:
            c = await self._open(key, node_id)
            fut.set_result(c)
            return c
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()
            raise
        finally:
            self._connecting.pop(key, None)

    async def _open(self, key: Any, node_id: int) -> BrokerConnection:
        failures, not_before = self._backoff.get(key, (0, 0))
        wait = not_before - now_ms()
        if wait > 0:
            await asyncio.sleep(wait / 1000)
        if node_id < 0:
            host, port = self.bootstrap[(-node_id - 1) % len(self.bootstrap)]
        else:
            b = self.cluster.brokers.get(node_id)
            if b is None:
                raise KafkaConnectionError(f"unknown broker node {node_id}")
            host, port = b.host, b.port
        c = BrokerConnection(host, port, node_id, self.config)
        try:
            await c.connect()
        except BaseException:
            c.close()
            base = self.config["reconnect.backoff.ms"]
            top = self.config["reconnect.backoff.max.ms"]
            delay = min(top, base * (2**failures)) * random.uniform(0.8, 1.2)
            self._backoff[key] = (failures + 1, now_ms() + int(delay))
            raise
        self._backoff.pop(key, None)
        self._conns[key] = c
        return c

    async def any_conn(self) -> BrokerConnection:
        """The least loaded live connection, or a new one to a known or bootstrap broker."""
        live = [c for k, c in self._conns.items() if not c.closed and k[1] == ""]
        if live:
            return min(live, key=lambda c: c.in_flight)
        candidates = list(self.cluster.brokers) + [-(i + 1) for i in range(len(self.bootstrap))]
        random.shuffle(candidates)
        last: BaseException | None = None
        for node in candidates:
            try:
                return await self.conn(node)
            except (KafkaConnectionError, OSError) as e:
                last = e
        raise NoBrokersAvailableError(f"no broker reachable (bootstrap {self.bootstrap}): {last!r}")

    async def send(self, node_id: int, request: Any, **kw: Any) -> Any:
        c = await self.conn(node_id)
        return await c.send(request, **kw)

    async def send_any(self, request: Any, **kw: Any) -> Any:
        c = await self.any_conn()
        return await c.send(request, **kw)

    def close_node_purpose(self, node_id: int, purpose: str) -> None:
        c = self._conns.pop((node_id, purpose), None)
        if c is not None:
            c.close()

    # -- coordinators ----------------------------------------------------------------

    async def find_coordinator(self, key: str, key_type: int, deadline_ms: int) -> int:
        """The node coordinating a group (key type 0) or transactional id (1), asking until ``deadline_ms``."""
        cls = request_class(ApiKey.FIND_COORDINATOR)
        retry = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                 ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT)
        while True:
            try:
                c = await self.any_conn()
                v = c.version_for(ApiKey.FIND_COORDINATOR)
                if v >= 4:
                    resp = await c.send(cls(key_type=key_type, coordinator_keys=[key]), version=v)
                    found = resp.coordinators[0]
                    code, node, host, port = found.error_code, found.node_id, found.host, found.port
                else:
                    resp = await c.send(cls(key=key, key_type=key_type), version=v)
                    code, node, host, port = resp.error_code, resp.node_id, resp.host, resp.port
                if code == 0:
                    if node not in self.cluster.brokers:
                        self.cluster.brokers[node] = BrokerInfo(node, host, port)
                    return node
                if code not in retry:
                    raise error_for(code, f"FindCoordinator for {key!r}")
            except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
                log.debug("FindCoordinator failed: %r", e)
            if now_ms() >= deadline_ms:
                raise KafkaTimeoutError(f"coordinator of {key!r} not found in time")
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    # -- metadata ------------------------------------------------------------------

    def add_topics(self, topics: set[str] | list[str]) -> None:
        self._metadata_topics.update(topics)

    async def refresh_metadata(self, topics: list[str] | None = None, *, auto_create: bool = False) -> None:
        """Fetch metadata for ``topics`` (all the client tracks when None)."""
        async with self._metadata_lock:
            if topics is None:
                wanted: list[str] | None = None if self.all_topics_metadata else sorted(self._metadata_topics)
            else:
                wanted = sorted(set(topics) | self._metadata_topics)
            cls = request_class(ApiKey.METADATA)
            deadline = now_ms() + self.config["request.timeout.ms"]
            while True:
                try:
                    c = await self.any_conn()
                    version = c.version_for(ApiKey.METADATA)
                    if wanted is None:
                        req_topics = None if version >= 1 else []
                    else:
                        req_topics = [cls.MetadataRequestTopic(name=t) for t in wanted]
                    req = cls(topics=req_topics, allow_auto_topic_creation=auto_create)
                    resp = await c.send(req, version=version)
                    break
                except (KafkaConnectionError, OSError, TimeoutError) as e:
                    if now_ms() > deadline or self.closed:
                        raise
                    log.debug("metadata refresh failed: %r; retrying", e)
                    await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
            self.cluster.update(resp, wanted)

    async def wait_for_topic(self, topic: str, timeout_ms: int, *, auto_create: bool = True) -> list[int]:
        """The partitions of ``topic``, refreshing metadata until known or the deadline."""
        parts = self.cluster.partitions_for(topic)
        if parts is not None:
            return parts
        self.add_topics([topic])
        deadline = now_ms() + timeout_ms
        while True:
            try:
                await self.refresh_metadata([topic], auto_create=auto_create)
            except (KafkaConnectionError, OSError, TimeoutError) as e:  # keep trying until our own deadline
                log.debug("metadata for %s: %r", topic, e)
            parts = self.cluster.partitions_for(topic)
            if parts is not None:
                return parts
            if now_ms() >= deadline:
                raise KafkaTimeoutError(f"topic {topic} not present in metadata after {timeout_ms} ms")
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    async def close(self) -> None:
        self.closed = True
        for c in list(self._conns.values()):
            c.close()
        self._conns.clear()
        await asyncio.sleep(0)
