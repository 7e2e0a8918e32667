"""An admin client: creates topics, adds partitions, deletes records, alters a topic config and
deletes topics, and checks that the cluster keeps showing each acknowledged change, across node
crashes and whole-cluster restarts.

- ``admin-durable``: after an acknowledged change, Metadata, DescribeConfigs and Fetch show it:
  a created topic exists with its partition count and keeps its topic id, a deleted one is gone,
  an altered config has its value, and a partition's log start offset is never below what an
  acknowledged DeleteRecords moved it to.
- ``admin-refused``: an admin request failed with an error other than a retriable one.

Any request may still land later than its answer (the network duplicates some requests and
delays others past the client's timeout), so a topic is judged only once no copy of a request
about it can still arrive.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from shoal.clock import now_ms
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.create_partitions_request import CreatePartitionsRequest
from shoal.protocol.generated.create_topics_request import CreateTopicsRequest
from shoal.protocol.generated.delete_records_request import DeleteRecordsRequest
from shoal.protocol.generated.delete_topics_request import DeleteTopicsRequest
from shoal.protocol.generated.describe_configs_request import DescribeConfigsRequest
from shoal.protocol.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from shoal.protocol.record_encode import build_batch
from shoal.sim.invariants import ADMIN_TOPIC_PREFIX
from shoal.sim.network import NetworkError
from shoal.sim.wire import RETRY_ELSEWHERE, SimClient, fetch_request, metadata_request, produce_request

ATTEMPTS = 30
_TOPIC_RESOURCE = 2
_SET = 0
# The latest a copy of a request can still arrive after it was sent: the network's slowest
# delivery (4 s) plus its latest duplicate (3 s), and a margin.
_LATE_S = 8.0


@dataclass
class _Topic:
    """What the admin knows it did to one topic."""

    partitions: int
    topic_id: uuid.UUID | None = None
    deleted: bool = False
    created_sent: float = 0.0  # when the last CreateTopics for it was sent
    # A copy of the create may land after the delete and bring it back (names are never reused).
    may_come_back: bool = False
    retention_ms: str | None = None
    retention_sent: list[tuple[float, str]] = field(default_factory=list)  # every value sent, and when
    retention_acked_sent: float = 0.0  # when the acknowledged value was sent
    log_start: dict[int, int] = field(default_factory=dict)
    end: dict[int, int] = field(default_factory=dict)  # a log end offset seen (records produced)
    # a delete or a partition added went unanswered through every attempt: it may or may not have been
    # done, so what the cluster shows of the topic is not judged, nor is the topic used again (seed 15031)
    unknown: bool = False


class AdminClient(SimClient):
    """Runs ``ops`` admin operations on topics of its own, checking after each."""

    def __init__(self, *args: Any, ops: int, replication: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ops, self.replication = ops, replication
        self.topics: dict[str, _Topic] = {}
        self.last_sent: dict[str, float] = {}  # topic -> when a request about it was last sent
        self.retried: set[str] = set()  # topics with an attempt that went unanswered
        self.first_sent = 0.0  # when the last `_request` first sent its request
        self._created = 0

    # ------------------------------------------------------------------ the run
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(self.ops):
            live = [t for t, s in self.topics.items() if not s.deleted and not s.unknown]
            roll = self.rng.random()
            if len(live) < 2 or roll < 0.2:
                await self._create()
            elif roll < 0.35:
                await self._add_partition(self.rng.choice(live))
            elif roll < 0.55:
                await self._delete_records(self.rng.choice(live))
            elif roll < 0.7:
                await self._alter_retention(self.rng.choice(live))
            elif roll < 0.8:
                await self._delete(self.rng.choice(live))
            else:
                await self.verify(loop.time())
            await asyncio.sleep(self.rng.uniform(0.05, 0.5))
        await asyncio.sleep(_LATE_S)  # every copy of every request has landed: all topics can be judged
        await self.verify(loop.time())

    async def _request(self, topic: str, api_key: ApiKey, request: Any, node: int | None = None) -> Any | None:
        """One admin request, retried on other nodes; None if nothing answered."""
        self.first_sent = asyncio.get_running_loop().time()
        for _ in range(ATTEMPTS):
            target = node if node is not None else self.rng.choice(self.bootstrap)
            self.last_sent[topic] = asyncio.get_running_loop().time()
            try:
                return await self.call(target, api_key, request)
            except NetworkError:
                self.retried.add(topic)
                await self.backoff()
        return None

    def _done(self, topic: str, what: str, code: int, fine: tuple[ErrorCode, ...] = ()) -> bool:
        """Whether the change took (error NONE, or an error that a retry of it answers)."""
        self.trace.emit(f"{self.name} {what} {topic} -> {ErrorCode(code).name}")
        if code == 0 or (code in fine and topic in self.retried):
            return True
        if code not in RETRY_ELSEWHERE and code != ErrorCode.REQUEST_TIMED_OUT:
            self.trace.violation("admin-refused", f"{self.name} {what} {topic}: {ErrorCode(code).name}")
        return False

    # ------------------------------------------------------------------ changes
    async def _create(self) -> None:
        self._created += 1
        topic, partitions = f"{ADMIN_TOPIC_PREFIX}{self._created}", self.rng.randint(1, 2)
        req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=partitions, replication_factor=self.replication)], timeout_ms=1000)
        for _ in range(5):
            resp = await self._request(topic, ApiKey.CREATE_TOPICS, req)
            if resp is None:
                return
            if self._done(topic, "create", resp.topics[0].error_code, (ErrorCode.TOPIC_ALREADY_EXISTS,)):
                self.topics[topic] = _Topic(partitions, created_sent=self.last_sent[topic])
                return
            await self.backoff()

    async def _add_partition(self, topic: str) -> None:
        state = self.topics[topic]
        req = CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name=topic, count=state.partitions + 1, assignments=None)], timeout_ms=1000)
        resp = await self._request(topic, ApiKey.CREATE_PARTITIONS, req)
        if resp is None:
            state.unknown = True
        elif self._done(topic, "add a partition to", resp.results[0].error_code, (ErrorCode.INVALID_PARTITIONS,)):
            state.partitions += 1

    async def _delete_records(self, topic: str) -> None:
        state = self.topics[topic]
        p = self.rng.randrange(state.partitions)
        batch = build_batch([(now_ms(), None, b"admin-%d" % i, []) for i in range(self.rng.randint(1, 5))])
        leader = await self.leader(topic, p)
        try:
            resp = await self.call(leader, ApiKey.PRODUCE, produce_request(topic, p, batch, -1))
        except NetworkError:
            return
        part = resp.responses[0].partition_responses[0]
        if part.error_code != 0:
            self.leaders.pop((topic, p), None)
            return
        end = state.end[p] = max(state.end.get(p, 0), part.base_offset + 1)
        offset = self.rng.randint(state.log_start.get(p, 0), end)
        req = DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(
            name=topic, partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=p, offset=offset)])],
            timeout_ms=1000)
        answer = await self._request(topic, ApiKey.DELETE_RECORDS, req, node=leader)
        if answer is None:
            return
        result = answer.topics[0].partitions[0]
        if self._done(topic, f"delete records below {offset} of partition {p} of", result.error_code):
            if result.low_watermark < offset:
                self.trace.violation("admin-durable", f"{topic}-{p}: DeleteRecords to {offset} answered low "
                                                      f"watermark {result.low_watermark}")
            state.log_start[p] = max(state.log_start.get(p, 0), offset)
        else:
            self.leaders.pop((topic, p), None)

    async def _alter_retention(self, topic: str) -> None:
        value = str(self.rng.randint(1, 1000) * 3_600_000)
        state = self.topics[topic]
        state.retention_sent.append((asyncio.get_running_loop().time(), value))
        req = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=_TOPIC_RESOURCE, resource_name=topic, configs=[
                IncrementalAlterConfigsRequest.AlterableConfig(name="retention.ms", config_operation=_SET,
                                                               value=value)])])
        resp = await self._request(topic, ApiKey.INCREMENTAL_ALTER_CONFIGS, req)
        if resp is not None and self._done(topic, f"retention.ms={value} on", resp.responses[0].error_code):
            state.retention_ms, state.retention_acked_sent = value, self.first_sent

    async def _delete(self, topic: str) -> None:
        req = DeleteTopicsRequest(topic_names=[topic], timeout_ms=1000)
        resp = await self._request(topic, ApiKey.DELETE_TOPICS, req)
        if resp is None:
            self.topics[topic].unknown = True
        elif self._done(topic, "delete", resp.responses[0].error_code, (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,)):
            state = self.topics[topic]
            state.deleted = True
            state.may_come_back = self.first_sent - state.created_sent < _LATE_S
            for p in range(self.topics[topic].partitions):
                self.leaders.pop((topic, p), None)

    # ------------------------------------------------------------------ checks
    async def verify(self, now: float) -> None:
        """Compare what the cluster shows with every acknowledged change (topics with a request that
        may still land are left out)."""
        sure = [t for t, s in self.topics.items() if now - self.last_sent.get(t, 0.0) >= _LATE_S and not s.unknown]
        if not sure:
            return
        try:
            meta = await self.call(self.rng.choice(self.bootstrap), ApiKey.METADATA, metadata_request(sure))
        except NetworkError:
            return
        for t in meta.topics:
            state = self.topics[t.name]
            if state.deleted:
                if t.error_code == 0 and not state.may_come_back:
                    self._wrong(t.name, "deleted, yet Metadata shows it")
                continue
            if t.error_code != 0:
                if t.error_code != ErrorCode.LEADER_NOT_AVAILABLE:
                    self._wrong(t.name, f"created, yet Metadata answers {ErrorCode(t.error_code).name}")
                continue
            if len(t.partitions) != state.partitions:
                self._wrong(t.name, f"has {state.partitions} partitions, Metadata shows {len(t.partitions)}")
            if state.topic_id is None:
                state.topic_id = t.topic_id
            elif t.topic_id != state.topic_id:
                self._wrong(t.name, f"topic id changed from {state.topic_id} to {t.topic_id}")
            for p in t.partitions:
                if p.error_code == 0 and p.leader_id >= 0:
                    self.leaders[(t.name, p.partition_index)] = p.leader_id
        for topic in sure:
            state = self.topics[topic]
            if not state.deleted and not state.may_come_back:
                await self._verify_config(topic, state)
                await self._verify_log_start(topic, state)

    async def _verify_config(self, topic: str, state: _Topic) -> None:
        if state.retention_ms is None:
            return
        req = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=_TOPIC_RESOURCE, resource_name=topic, configuration_keys=["retention.ms"])])
        try:
            resp = await self.call(self.rng.choice(self.bootstrap), ApiKey.DESCRIBE_CONFIGS, req)
        except NetworkError:
            return
        result = resp.results[0]
        got = next((c.value for c in result.configs if c.name == "retention.ms"), None)
        # the acknowledged value, or one of a request sent shortly before it whose copy landed later
        allowed = {state.retention_ms} | {v for sent, v in state.retention_sent
                                          if sent >= state.retention_acked_sent - _LATE_S}
        if result.error_code == 0 and got not in allowed:
            self._wrong(topic, f"retention.ms set to {state.retention_ms}, DescribeConfigs shows {got}")

    async def _verify_log_start(self, topic: str, state: _Topic) -> None:
        for p, start in state.log_start.items():
            leader = self.leaders.get((topic, p))
            if leader is None:
                continue
            try:
                resp = await self.call(leader, ApiKey.FETCH, fetch_request(topic, p, start, max_wait_ms=0))
            except NetworkError:
                continue
            part = resp.responses[0].partitions[0]
            if part.error_code == 0 and part.log_start_offset < start:
                self._wrong(topic, f"partition {p}: records below {start} deleted, log start is {part.log_start_offset}")

    def _wrong(self, topic: str, detail: str) -> None:
        self.trace.violation("admin-durable", f"{topic}: {detail}")
