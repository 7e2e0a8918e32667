"""What the Spark data source asks of a Kafka cluster, over shoal's client, synchronously.

One ``KafkaIO`` per (bootstrap servers, client settings) and Python process:
``KafkaIO.shared(...)`` pools them, so the Python workers Spark reuses keep
their connections across tasks and micro-batches (Spark pools its Kafka
consumers and producers the same way). Each runs shoal's asyncio client on a
private event loop thread.

Reads fetch raw record batches from partition leaders (the bytes are decoded
to Arrow by ``arrow_records``, never into per-record objects); offsets come
from ListOffsets at the source's isolation level; group offsets through
OffsetFetch / OffsetCommit.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from shoal.client.admin import AIOAdminClient
from shoal.client.cluster import now_ms
from shoal.client.consumer import list_offsets
from shoal.client.errors import KafkaConnectionError, KafkaTimeoutError, error_for
from shoal.client.protocol import request_class
from shoal.client.structs import OffsetAndMetadata, TopicPartition
from shoal.client.sync import Producer, _LoopThread
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey

EARLIEST = -2
LATEST = -1

_POOL: dict[tuple, KafkaIO] = {}
_POOL_LOCK = threading.Lock()
_RETRY_FETCH = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_LEADER_EPOCH,
                ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT}


TXN_PRODUCERS_KEPT = 16  # transactional producers a Python worker keeps open


class DataLossError(RuntimeError):
    """Offsets a query must read are gone (deleted by retention, topic recreated)."""


@dataclass
class Fetched:
    records: Any  # the partition's record bytes (whole batches, maybe a trailing partial one)
    aborted: list[tuple[int, int]] = field(default_factory=list)  # (first offset, producer id)
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    error: int = 0


class KafkaIO:
    """A connection pool to one cluster and the calls the data source makes."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._lt = _LoopThread("shoal-spark-io")
        self._admin = AIOAdminClient(dict(config))
        self.config = self._admin.config  # with the client's defaults filled in
        self._producers: dict[tuple, Producer] = {}
        self._txn_producers: dict[str, Producer] = {}
        try:
            self._lt.run(self._admin.start())
        except BaseException:
            self._lt.stop()
            raise

    @classmethod
    def shared(cls, config: dict[str, Any]) -> KafkaIO:
        """The pooled instance for these settings (one per Python process)."""
        key = tuple(sorted((k, str(v)) for k, v in config.items()))
        with _POOL_LOCK:
            io = _POOL.get(key)
            if io is None:
                if not _POOL:
                    atexit.register(close_pool)
                io = _POOL[key] = cls(config)
            return io

    def _run(self, coro: Any) -> Any:
        return self._lt.run(coro)

    # ---------------------------------------------------------------- topics
    def partitions(self, topics: list[str]) -> dict[str, int]:
        """Partition counts of the topics that exist (absent topics are left out)."""
        async def go() -> dict[str, int]:
            client = self._admin.client
            await client.refresh_metadata(list(topics))
            out = {}
            for t in topics:
                parts = client.cluster.partitions_for(t)
                if parts is not None:
                    out[t] = len(parts)
            return out
        return self._run(go())

    def matching(self, pattern: str) -> dict[str, int]:
        """Topics the regular expression matches anywhere in their name, as Spark's connector
        (``findFirstIn``); internal topics left out."""
        regex = re.compile(pattern)
        topics = self._run(self._admin.list_topics())
        return {t: len(ps) for t, ps in topics.items() if regex.search(t) and not t.startswith("__")}

    # ---------------------------------------------------------------- offsets
    def list_offsets(self, specs: dict[TopicPartition, int], read_committed: bool) -> dict[TopicPartition, int]:
        """ListOffsets: -2 earliest, -1 latest (the LSO at read_committed), else a timestamp
        (-1 comes back where no record is that late)."""
        if not specs:
            return {}
        res = self._run(list_offsets(self._admin.client, dict(specs), self.config,
                                     isolation=1 if read_committed else 0))
        return {tp: off for tp, (off, _ts) in res.items()}

    def committed(self, group: str, require_stable: bool = True) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._run(self._admin.list_group_offsets(group, None, require_stable=require_stable))

    def commit(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        """OffsetCommit as a standalone member (generation -1): what lag tools read."""
        errors = self._run(self._admin.alter_group_offsets(group, dict(offsets)))
        bad = {tp: e for tp, e in errors.items() if e is not None}
        if bad:
            raise next(iter(bad.values()))

    # ---------------------------------------------------------------- fetch
    def fetch(self, tp: TopicPartition, offset: int, max_bytes: int, read_committed: bool,
              max_wait_ms: int = 500) -> Fetched:
        return self._run(self._fetch(tp, offset, max_bytes, read_committed, max_wait_ms))

    def fetch_ahead(self, tp: TopicPartition, offset: int, max_bytes: int, read_committed: bool,
                    max_wait_ms: int = 500) -> concurrent.futures.Future[Fetched]:
        """``fetch`` started now, its result taken later (a reader decodes one fetch while the
        next is on the wire)."""
        return self._lt.submit(self._fetch(tp, offset, max_bytes, read_committed, max_wait_ms))

    async def _fetch(self, tp: TopicPartition, offset: int, max_bytes: int, read_committed: bool,
                     max_wait_ms: int) -> Fetched:
        client = self._admin.client
        cls = request_class(ApiKey.FETCH)
        deadline = now_ms() + int(self.config.get("request.timeout.ms", 30000))
        client.add_topics([tp.topic])
        while True:
            leader = client.cluster.leader_for(tp.topic, tp.partition)
            if leader < 0:
                await client.refresh_metadata([tp.topic])
                leader = client.cluster.leader_for(tp.topic, tp.partition)
            code = ErrorCode.LEADER_NOT_AVAILABLE
            if leader >= 0:
                req = cls(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                          isolation_level=1 if read_committed else 0, session_id=0, session_epoch=-1,
                          topics=[cls.FetchTopic(topic=tp.topic, partitions=[cls.FetchPartition(
                              partition=tp.partition, fetch_offset=offset, partition_max_bytes=max_bytes)])],
                          rack_id="")
                try:
                    conn = await client.conn(leader, purpose="spark-fetch")
                    resp = await conn.send(req, timeout_ms=int(self.config.get("request.timeout.ms", 30000))
                                           + max_wait_ms)
                    p = resp.responses[0].partitions[0]
                    code = p.error_code
                    if code not in _RETRY_FETCH:
                        return Fetched(p.records if p.records is not None else b"",
                                       [(a.first_offset, a.producer_id) for a in p.aborted_transactions or ()],
                                       p.high_watermark, p.last_stable_offset, p.log_start_offset, code)
                except (KafkaConnectionError, KafkaTimeoutError, OSError):
                    client.close_node_purpose(leader, "spark-fetch")
            if now_ms() > deadline:
                raise error_for(code, f"fetch {tp.topic}-{tp.partition} at offset {offset}")
            client.cluster.topics.pop(tp.topic, None)
            await asyncio.sleep(self.config.get("retry.backoff.ms", 100) / 1000)

    # ---------------------------------------------------------------- producers
    def producer(self, settings: dict[str, Any]) -> Producer:
        """A pooled producer for these settings (without a transactional id: at-least-once writes)."""
        key = tuple(sorted((k, str(v)) for k, v in settings.items()))
        p = self._producers.get(key)
        if p is None:
            p = self._producers[key] = Producer({**self.config, **settings})
        return p

    def transactional_producer(self, transactional_id: str, settings: dict[str, Any]) -> Producer:
        """A pooled producer per transactional id (a Spark task partition keeps its id across batches).

        The pool keeps the most recently used TXN_PRODUCERS_KEPT and closes the rest: a worker that
        served many queries or partitions would otherwise hold a producer (and its connections) for
        each forever. A task's transaction ends before the task does, so none is open when closed.
        """
        p = self._txn_producers.pop(transactional_id, None)
        if p is None:
            p = Producer({**self.config, **settings, "transactional.id": transactional_id})
        self._txn_producers[transactional_id] = p  # now the most recently used
        while len(self._txn_producers) > TXN_PRODUCERS_KEPT:
            oldest = next(iter(self._txn_producers))
            self._txn_producers.pop(oldest).close()
        return p

    def close(self) -> None:
        for p in [*self._producers.values(), *self._txn_producers.values()]:
            p.close()
        self._run(self._admin.close())
        self._lt.stop()


def close_pool() -> None:
    """Close every pooled connection (at interpreter exit)."""
    with _POOL_LOCK:
        ios = list(_POOL.values())
        _POOL.clear()
    for io in ios:
        try:
            io.close()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
