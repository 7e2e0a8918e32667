"""Seeded simulated clients: idempotent producers, readers, offset committers, and the crasher.

Every client draws its choices from its own seeded random stream and its timing from the
virtual clock, so a seed fixes the whole schedule. Clients behave as Kafka's do where it
matters to the invariants: a producer retries a batch with the same sequence number until it
is answered (so only the broker's deduplication keeps the log free of duplicates), and a
client that gets no answer closes that connection and tries again on a new one.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shoal.clock import now_ms
from shoal.protocol import record_batch as rb
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.record_encode import build_batch
from shoal.sim.network import NetworkError
from shoal.sim.wire import (
    RETRY_ELSEWHERE,
    SimClient,
    error_of,
    fetch_request,
    init_producer_id_request,
    offset_commit_request,
    offset_delete_request,
    offset_fetch_request,
    produce_request,
)

if TYPE_CHECKING:
    from shoal.sim.invariants import Checker


@dataclass
class WorkloadConfig:
    """How many clients do how much, and how often nodes crash."""

    topic: str = "sim"
    partitions: int = 2
    producers: int = 3
    records_per_producer: int = 15
    committers: int = 4
    ops_per_committer: int = 25
    txn_topic: str = "txn"
    txn_producers: int = 2
    transactions_per_producer: int = 8
    groups: int = 1  # classic consumer groups
    members_per_group: int = 3
    member_lifetime_s: float = 12.0
    consumer_groups: int = 1  # KIP-848 consumer-protocol groups
    consumer_members_per_group: int = 3
    share_groups: int = 0  # KIP-932 share groups, reading the data topic (swarm seeds draw them)
    share_members_per_group: int = 3
    kv_topic: str = "kv"  # compacted
    kv_producers: int = 2
    kv_records_per_producer: int = 25
    kv_keys: int = 6
    admins: int = 1  # admin clients (topics of their own: create, add partitions, delete records, ...)
    admin_ops: int = 12
    reader_wait_ms: int = 300  # a reader's fetch max_wait_ms (its fetches end early when records arrive)
    duration_s: float = 60.0  # virtual seconds before the clients are stopped, done or not
    crash_every_s: float = 2.5  # mean virtual time between node crashes (0: none)
    down_s: tuple[float, float] = (0.3, 3.0)
    restart_share: float = 0.15  # of crash events, the share that take the whole cluster down
    power_loss_share: float = 0.5  # of those, the share that cut the power (unsynced writes lost)
    clock_jump_share: float = 0.1  # of crash events, the share that step the wall clock instead
    partition_share: float = 0.15  # of crash events, the share that cut a node off the network instead
    move_share: float = 0.15  # of crash events, the share that move a partition's leadership instead


# what a partition answers a producer whose acknowledged batches it no longer has
_SEQUENCE_LOST = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID})


class IdempotentProducer(SimClient):
    """Sends one record at a time with its producer id and per-partition sequence, retrying a
    batch (same sequence) until the broker answers it."""

    def __init__(self, *args: object, checker: Checker, topic: str, partitions: int, acks: int,
                 records: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.checker, self.topic, self.partitions, self.acks, self.records = checker, topic, partitions, acks, records

    async def _init(self) -> tuple[int, int]:
        while True:
            resp = await self.any_node_call(ApiKey.INIT_PRODUCER_ID, init_producer_id_request())
            if resp.error_code == 0:
                return resp.producer_id, resp.producer_epoch
            await self.backoff()

    async def run(self) -> None:
        pid, epoch = await self._init()
        self.trace.emit(f"{self.name} producer id {pid} epoch {epoch} acks={self.acks}")
        seqs: dict[int, int] = defaultdict(int)
        for i in range(self.records):
            p = self.rng.randrange(self.partitions)
            value = f"{self.name}:{i}".encode()
            batch = build_batch([(now_ms(), self.name.encode(), value, [])], producer_id=pid,
                                producer_epoch=epoch, base_sequence=seqs[p])
            outcome = await self._send(p, batch, value)
            if outcome == "refused":
                return
            if outcome == "expired":
                # as Java's idempotent producer after a batch expires unanswered (KIP-360): a new epoch,
                # bumped locally, sequences from 0; the expired batch's copies still in flight are fenced
                epoch, seqs = epoch + 1, defaultdict(int)
                self.trace.emit(f"{self.name} gives up on {value.decode()}: epoch {epoch}")
            else:
                seqs[p] += 1
            await asyncio.sleep(self.rng.uniform(0.0, 0.3))

    async def _send(self, p: int, batch: bytes, value: bytes) -> str:
        """"acked", "refused" (a violation, already reported) or "expired" (given up unanswered)."""
        attempts = 0
        while True:
            attempts += 1
            leader = await self.leader(self.topic, p)
            try:
                resp = await self.call(leader, ApiKey.PRODUCE, produce_request(self.topic, p, batch, self.acks))
            except NetworkError as e:
                if self.rng.random() < 0.2:
                    return "expired"
                self.trace.emit(f"{self.name} retries {value.decode()} ({type(e).__name__})")
                await self.backoff()
                continue
            part = resp.responses[0].partition_responses[0]
            if part.error_code == 0:
                self.trace.emit(f"{self.name} acked {value.decode()} at {self.topic}-{p}@{part.base_offset}"
                                f" after {attempts}")
                return "acked"
            if part.error_code in RETRY_ELSEWHERE:
                self.leaders.pop((self.topic, p), None)
                await self.backoff()
                continue
            if part.error_code in _SEQUENCE_LOST and (self.topic, p) in self.checker.truncated:
                # the broker lost this producer's acknowledged batches to a lying disk: as Java's
                # idempotent producer does for these errors (KIP-360), a new epoch, sequences from 0
                return "expired"
            self.checker.fail("produce-refused", f"{self.name}: {value.decode()} to {self.topic}-{p} refused with "
                                                 f"{ErrorCode(part.error_code).name}")
            return "refused"


class Reader(SimClient):
    """Fetches one partition from offset 0 on, checking what it reads as it goes."""

    def __init__(self, *args: object, checker: Checker, topic: str, partition: int, wait_ms: int = 300,
                 **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.checker, self.tp, self.wait_ms = checker, (topic, partition), wait_ms
        self.offset = 0

    async def run(self) -> None:
        topic, p = self.tp
        while True:
            leader = await self.leader(topic, p)
            try:
                resp = await self.call(leader, ApiKey.FETCH, self.request())
            except NetworkError:
                await self.backoff()
                continue
            part = resp.responses[0].partitions[0]
            if part.error_code in RETRY_ELSEWHERE:
                self.leaders.pop(self.tp, None)
                await self.backoff()
                continue
            end = self.checker.truncated.get(self.tp)
            if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and end is not None and self.offset > end:
                self.offset = end  # the log was cut back by a lying disk: read on from its new end
                continue
            if part.error_code != 0:
                self.checker.fail("fetch-refused", f"{self.name}: {topic}-{p}@{self.offset}: "
                                                   f"{ErrorCode(part.error_code).name}")
                await self.backoff()
                continue
            self.checker.high_watermark(self.tp, part.high_watermark, self.name)
            self.deliver(part)

    def request(self) -> Any:
        topic, p = self.tp
        return fetch_request(topic, p, self.offset, max_wait_ms=self.wait_ms)

    def deliver(self, part: Any) -> None:
        """Check and take what one fetch returned for the partition."""
        buf = part.records or b""
        for h in rb.iter_batches(buf):
            if h.last_offset < self.offset:
                continue
            if h.base_offset > self.offset:
                self.checker.fail("offsets-dense", f"{self.name}: {self.tp} next batch at {h.base_offset}, "
                                                   f"expected {self.offset}")
            for r in rb.iter_records(buf, h):
                if r.offset >= self.offset:
                    self.checker.record_read(self.tp, r.offset, bytes(r.value or b""), self.name)
            self.offset = h.last_offset + 1


class Committer(SimClient):
    """Commits growing offsets of its own group (a standalone group, as `assign()` consumers
    commit), deletes them now and then, and reads them back; the checker compares."""

    def __init__(self, *args: object, topic: str, partitions: int, ops: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.topic, self.partitions, self.ops = topic, partitions, ops
        self.group = f"{self.name}-group"
        self.value = 0

    async def run(self) -> None:
        for _ in range(self.ops):
            p = self.rng.randrange(self.partitions)
            r = self.rng.random()
            if r < 0.45:
                self.value += self.rng.randint(1, 10)
                await self._coordinator_call(ApiKey.OFFSET_COMMIT,
                                             offset_commit_request(self.group, self.topic, p, self.value))
            elif r < 0.65:
                await self._coordinator_call(ApiKey.OFFSET_DELETE, offset_delete_request(self.group, self.topic, p))
            else:
                await self._coordinator_call(ApiKey.OFFSET_FETCH, offset_fetch_request(self.group, self.topic, p))
            await asyncio.sleep(self.rng.uniform(0.05, 0.5))

    async def _coordinator_call(self, api_key: ApiKey, request: object) -> None:
        resp = await self.coordinator_call(self.group, api_key, request, 30)
        if resp is None:
            self.trace.emit(f"{self.name} {api_key.name} gave up")
            return
        code = ErrorCode(error_of(resp)).name
        self.trace.emit(f"{self.name} {api_key.name} {_describe(api_key, request, resp)} -> {code}")


def _describe(api_key: ApiKey, request: object, resp: object) -> str:
    t = request.topics[0]  # type: ignore[attr-defined]
    if api_key == ApiKey.OFFSET_COMMIT:
        return f"{t.name}-{t.partitions[0].partition_index}={t.partitions[0].committed_offset}"
    if api_key == ApiKey.OFFSET_FETCH:
        got = [p.committed_offset for rt in resp.topics for p in rt.partitions]  # type: ignore[attr-defined]
        return f"{t.name}-{t.partition_indexes[0]} is {got[0] if got else '?'}"
    return f"{t.name}-{t.partitions[0].partition_index}"
