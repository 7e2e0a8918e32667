"""Simulated transactional producers and read_committed readers.

A producer finds its transaction coordinator, InitProducerId's with its transactional id, and
runs transactions: AddPartitionsToTxn, transactional batches (retried with the same sequence),
EndTxn commit or abort. Now and then it pauses past its transaction timeout, so the coordinator
aborts for it and fences its epoch; any fatal answer makes it InitProducerId again (a new epoch,
which aborts whatever it left open). A read_committed reader filters aborted transactions as
Kafka's consumer does, from the fetch's aborted list and the markers.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from shoal.clock import now_ms
from shoal.protocol import record_batch as rb
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.end_txn_request import EndTxnRequest
from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from shoal.protocol.generated.init_producer_id_request import InitProducerIdRequest
from shoal.protocol.record_encode import build_batch
from shoal.sim.network import NetworkError
from shoal.sim.wire import RETRY_ELSEWHERE, SimClient, fetch_request, produce_request
from shoal.sim.workload import Reader

if TYPE_CHECKING:
    from shoal.sim.txn_checks import TxnChecker

TXN_TIMEOUT_MS = 4000
_RETRY_SAME = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


class _Fatal(Exception):
    """The producer must InitProducerId again (fenced, aborted for it, or its state is lost)."""


class TransactionalProducer(SimClient):
    def __init__(self, *args: Any, txn_checker: TxnChecker, topic: str, partitions: int, transactions: int,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.checker, self.topic, self.partitions, self.transactions = txn_checker, topic, partitions, transactions
        self.transactional_id = f"{self.name}-txn"
        self.pid, self.epoch = -1, -1
        self.seqs: dict[int, int] = defaultdict(int)

    async def _txn_coordinator(self) -> int:
        while self.transactional_id not in self.coordinators:
            resp = await self.any_node_call(ApiKey.FIND_COORDINATOR,
                                            FindCoordinatorRequest(key=self.transactional_id, key_type=1))
            if resp.error_code == 0:
                self.coordinators[self.transactional_id] = resp.node_id
            else:
                await self.backoff()
        return self.coordinators[self.transactional_id]

    async def _coordinator_call(self, api_key: ApiKey, request: Any, error: Any) -> int:
        """Call the transaction coordinator until it answers something other than "try again"."""
        for _ in range(40):
            node = await self._txn_coordinator()
            try:
                resp = await self.call(node, api_key, request)
            except NetworkError:
                await self.backoff()
                continue
            code = error(resp)
            if code in RETRY_ELSEWHERE:
                self.coordinators.pop(self.transactional_id, None)
            elif code not in _RETRY_SAME:
                if api_key == ApiKey.INIT_PRODUCER_ID and code == 0:
                    self.pid, self.epoch = resp.producer_id, resp.producer_epoch
                return code
            await self.backoff()
        raise _Fatal(f"{api_key.name} never answered")

    async def _init(self) -> None:
        req = InitProducerIdRequest(transactional_id=self.transactional_id, transaction_timeout_ms=TXN_TIMEOUT_MS,
                                    producer_id=-1, producer_epoch=-1)
        while True:
            try:
                if await self._coordinator_call(ApiKey.INIT_PRODUCER_ID, req, lambda r: r.error_code) == 0:
                    break
            except _Fatal as e:  # as an application retries init_transactions after its timeout (seed 19517)
                self.trace.emit(f"{self.name} {e}; initializing again")
            await self.backoff()
        self.seqs.clear()
        self.trace.emit(f"{self.name} transactional producer id {self.pid} epoch {self.epoch}")

    async def run(self) -> None:
        await self._init()
        for t in range(self.transactions):
            try:
                await self._transaction(t, commit=self.rng.random() < 0.7)
            except _Fatal as e:
                self.trace.emit(f"{self.name} transaction {t} failed: {e}; initializing again")
                await self._init()
            await asyncio.sleep(self.rng.uniform(0.0, 0.3))

    async def _transaction(self, t: int, commit: bool) -> None:
        parts = sorted(self.rng.sample(range(self.partitions), self.rng.randint(1, self.partitions)))
        self.checker.began((self.name, self.epoch, t))
        add = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=self.pid,
            v3_and_below_producer_epoch=self.epoch, v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=self.topic, partitions=parts)])
        code = await self._coordinator_call(ApiKey.ADD_PARTITIONS_TO_TXN, add, _add_error)
        if code != 0:
            raise _Fatal(f"AddPartitionsToTxn: {ErrorCode(code).name}")
        key = (self.name, self.epoch, t)
        for i in range(self.rng.randint(1, 3)):
            p = self.rng.choice(parts)
            value = f"{self.name}:{t}:{i}".encode()
            await self._produce(p, value)
            self.checker.written(key, value)
        if self.rng.random() < 0.05:  # a pause past the transaction timeout: the coordinator aborts
            pause = TXN_TIMEOUT_MS / 1000 + self.rng.uniform(1.0, 3.0)
            self.trace.fault("producer-pause", f"{self.name} pauses {pause:.1f} s in transaction {t}")
            await asyncio.sleep(pause)
            if self.rng.random() < 0.5:  # and writes on as a zombie: its epoch is fenced by now
                value = f"{self.name}:{t}:zombie".encode()
                await self._produce(self.rng.choice(parts), value)
                self.checker.written(key, value)
        end = EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.pid,
                            producer_epoch=self.epoch, committed=commit)
        self.checker.end_sent(key, end)
        code = await self._coordinator_call(ApiKey.END_TXN, end, lambda r: r.error_code)
        if code != 0:
            raise _Fatal(f"EndTxn: {ErrorCode(code).name}")
        self.checker.ended(key, commit)
        self.trace.emit(f"{self.name} transaction {t} {'committed' if commit else 'aborted'}")

    async def _produce(self, p: int, value: bytes) -> None:
        batch = build_batch([(now_ms(), self.name.encode(), value, [])], producer_id=self.pid,
                            producer_epoch=self.epoch, base_sequence=self.seqs[p], is_transactional=True)
        req = produce_request(self.topic, p, batch, -1)
        req.transactional_id = self.transactional_id
        for _ in range(40):
            leader = await self.leader(self.topic, p)
            try:
                resp = await self.call(leader, ApiKey.PRODUCE, req)
            except NetworkError:
                await self.backoff()
                continue
            code = resp.responses[0].partition_responses[0].error_code
            if code == 0:
                self.seqs[p] += 1
                return
            if code not in RETRY_ELSEWHERE:
                raise _Fatal(f"Produce: {ErrorCode(code).name}")
            self.leaders.pop((self.topic, p), None)
            await self.backoff()
        raise _Fatal("Produce never answered")


def _add_error(resp: Any) -> int:
    if resp.error_code:
        return int(resp.error_code)
    for t in resp.results_by_topic_v3_and_below:
        for p in t.results_by_partition:
            if p.partition_error_code:
                return int(p.partition_error_code)
    return 0


class CommittedReader(Reader):
    """A read_committed reader: what it delivers must come from committed transactions."""

    def __init__(self, *args: Any, txn_checker: TxnChecker, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.txn_checker = txn_checker

    def request(self) -> Any:
        topic, p = self.tp
        return fetch_request(topic, p, self.offset, max_wait_ms=self.wait_ms, isolation=1)

    def deliver(self, part: Any) -> None:
        buf = part.records or b""
        aborted = sorted((a.first_offset, a.producer_id) for a in part.aborted_transactions or [])
        aborted_pids: set[int] = set()
        for h in rb.iter_batches(buf):
            while aborted and aborted[0][0] <= h.last_offset:
                aborted_pids.add(aborted.pop(0)[1])
            if h.last_offset >= self.offset:
                if h.is_control:
                    if rb.control_type(buf, h) == rb.CONTROL_ABORT:
                        aborted_pids.discard(h.producer_id)
                elif not (h.is_transactional and h.producer_id in aborted_pids):
                    for r in rb.iter_records(buf, h):
                        if r.offset >= self.offset:
                            self.txn_checker.delivered(self.tp, r.offset, bytes(r.value or b""), self.name)
            self.offset = max(self.offset, h.last_offset + 1)
