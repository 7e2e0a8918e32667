"""The transaction and group coordinator runtimes together over real logs (no sockets): markers reach
data partitions and `__consumer_offsets`, transactional offsets stay pending until their marker,
coordinator fail-over finishes prepared transactions, and everything survives a reload."""

from __future__ import annotations

import asyncio
from pathlib import Path

from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.runtime import GroupCoordinatorRuntime
from shoal.coordinator.txn.runtime import TransactionCoordinatorRuntime
from shoal.coordinator.txn.shard import TxnConfig
from shoal.coordinator.txn.state import TxnState
from shoal.protocol.errors import ErrorCode as E
from shoal.protocol.generated.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from shoal.protocol.generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from shoal.protocol.generated.end_txn_request import EndTxnRequest
from shoal.protocol.generated.init_producer_id_request import InitProducerIdRequest
from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest
from shoal.protocol.generated.offset_fetch_request import OffsetFetchRequest
from shoal.protocol.generated.txn_offset_commit_request import TxnOffsetCommitRequest
from shoal.protocol.record_encode import build_batch
from shoal.storage.config import LogConfig
from shoal.storage.manager import LogManager
from shoal.storage.producer_state import ProducerStateError

GROUP_CFG = GroupConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0)
TXN_CFG = TxnConfig(transaction_state_log_num_partitions=1)
DATA = ("out", 0)


class Cluster:
    """One node's two coordinators and a marker writer, over one LogManager."""

    def __init__(self, path: Path, node_id: int = 1, gate: asyncio.Event | None = None) -> None:
        self.lm = LogManager([path], LogConfig())
        self.lm.load_existing()
        self.gate = gate
        self.marker_results: list[E] = []
        self.groups = GroupCoordinatorRuntime(node_id, self.lm, GROUP_CFG)
        self.txn = TransactionCoordinatorRuntime(
            node_id, self.lm, TXN_CFG, next_producer_id=iter(range(100, 10_000)).__next__,
            offsets_partition=lambda g: 0, write_marker=self.write_marker)

    async def write_marker(self, topic: str, p: int, pid: int, epoch: int, coord_epoch: int, commit: bool) -> E:
        if self.gate is not None:
            await self.gate.wait()
        if topic == "__consumer_offsets":
            code = await self.groups.write_marker(p, pid, epoch, coord_epoch, commit)
        else:
            try:
                self.lm.get_or_create(topic, p).append_marker(pid, epoch, coord_epoch, commit, 0)
                code = E.NONE
            except ProducerStateError as e:
                code = E(e.error_code)
        self.marker_results.append(code)
        return code

    async def start(self) -> Cluster:
        await self.groups.load_partition(0)
        await self.txn.load_partition(0)
        return self

    async def stop(self) -> None:
        await self.txn.close()
        await self.groups.close()
        self.lm.close()

    async def init(self, tid: str = "tx") -> tuple[int, int]:
        r = await self.txn.handle(22, 4, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000))
        assert r.error_code == 0, r
        return r.producer_id, r.producer_epoch

    async def add(self, pid: int, epoch: int, tid: str = "tx") -> None:
        r = await self.txn.handle(24, 3, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="out", partitions=[0])]))
        assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        r = await self.txn.handle(25, 3, AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid,
                                                                producer_epoch=epoch, group_id="g"))
        assert r.error_code == 0

    def produce(self, pid: int, epoch: int, seq: int, value: bytes) -> None:
        batch = bytearray(build_batch([(0, None, value, None)], producer_id=pid, producer_epoch=epoch,
                                      base_sequence=seq, is_transactional=True))
        self.lm.get_or_create(*DATA).append(batch, 0)

    async def txn_commit_offset(self, pid: int, epoch: int, offset: int, tid: str = "tx") -> None:
        r = await self.groups.handle(28, 3, TxnOffsetCommitRequest(
            transactional_id=tid, group_id="g", producer_id=pid, producer_epoch=epoch, generation_id=-1,
            member_id="", topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="in", partitions=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                       committed_metadata="m")])]))
        assert r.topics[0].partitions[0].error_code == 0

    async def fetch_offset(self, require_stable: bool) -> tuple[int, int]:
        r = await self.groups.handle(9, 7, OffsetFetchRequest(group_id="g", require_stable=require_stable, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name="in", partition_indexes=[0])]))
        p = r.topics[0].partitions[0]
        return p.error_code, p.committed_offset

    async def end(self, pid: int, epoch: int, commit: bool, tid: str = "tx"):
        return await self.txn.handle(26, 3, EndTxnRequest(transactional_id=tid, producer_id=pid,
                                                          producer_epoch=epoch, committed=commit))


async def _commit_and_abort(tmp_path: Path) -> None:
    c = await Cluster(tmp_path).start()
    pid, epoch = await c.init()
    await c.add(pid, epoch)
    c.produce(pid, epoch, 0, b"a")
    await c.txn_commit_offset(pid, epoch, 10)
    data = c.lm.get(*DATA)
    assert data.last_stable_offset == 0 and data.high_watermark == 1
    assert await c.fetch_offset(require_stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert await c.fetch_offset(require_stable=False) == (0, -1)
    r = await c.end(pid, epoch, True)
    # Answered once the markers are in: the data is readable and the offset committed.
    assert r.error_code == 0
    assert data.last_stable_offset == data.high_watermark == 2
    assert await c.fetch_offset(require_stable=True) == (0, 10)
    # An aborted transaction leaves the committed offset alone.
    await c.add(pid, epoch)
    c.produce(pid, epoch, 1, b"b")
    await c.txn_commit_offset(pid, epoch, 20)
    assert (await c.end(pid, epoch, False)).error_code == 0
    assert await c.fetch_offset(require_stable=True) == (0, 10)
    assert [e.producer_id for e in data.aborted_transactions(0, 100)] == [pid]
    # A plain commit after a pending transactional one wins when that transaction commits.
    await c.add(pid, epoch)
    await c.txn_commit_offset(pid, epoch, 30)
    r = await c.groups.handle(8, 8, OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                                        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                                            name="in", partitions=[
                                                                OffsetCommitRequest.OffsetCommitRequestPartition(
                                                                    partition_index=0, committed_offset=40)])]))
    assert r.topics[0].partitions[0].error_code == 0
    assert (await c.end(pid, epoch, True)).error_code == 0
    assert await c.fetch_offset(require_stable=True) == (0, 40)
    # A transaction left open with a pending offset survives a restart, still pending.
    await c.add(pid, epoch)
    await c.txn_commit_offset(pid, epoch, 50)
    await c.stop()
    c = await Cluster(tmp_path).start()
    assert await c.fetch_offset(require_stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert await c.fetch_offset(require_stable=False) == (0, 40)
    assert c.txn.shard(0).txns["tx"].state == TxnState.ONGOING
    assert (await c.end(pid, epoch, True)).error_code == 0
    assert await c.fetch_offset(require_stable=True) == (0, 50)
    await c.stop()


def test_commit_abort_and_pending_offsets(tmp_path: Path) -> None:
    asyncio.run(asyncio.wait_for(_commit_and_abort(tmp_path), 30))


async def _failover(tmp_path: Path) -> None:
    gate = asyncio.Event()
    a = await Cluster(tmp_path, node_id=1, gate=gate).start()
    epoch_a = a.txn.shard(0).coordinator_epoch
    pid, epoch = await a.init()
    await a.add(pid, epoch)
    a.produce(pid, epoch, 0, b"x")
    await a.txn_commit_offset(pid, epoch, 7)
    end = asyncio.create_task(a.end(pid, epoch, True))
    await asyncio.sleep(0.05)
    assert not end.done()  # the markers are held at the gate
    # The node stops coordinating: the parked EndTxn is told to find the new coordinator.
    a.txn.unload_partition(0)
    assert (await end).error_code == E.NOT_COORDINATOR
    # The new coordinator (same storage, next coordinator epoch) finishes the prepared commit.
    b = Cluster.__new__(Cluster)
    b.lm, b.gate, b.marker_results, b.groups = a.lm, None, [], a.groups
    b.txn = TransactionCoordinatorRuntime(2, a.lm, TXN_CFG, next_producer_id=iter(range(500, 600)).__next__,
                                          offsets_partition=lambda g: 0, write_marker=b.write_marker)
    await b.txn.load_partition(0)
    assert b.txn.shard(0).coordinator_epoch == epoch_a + 1
    for _ in range(100):
        if b.txn.shard(0).txns["tx"].state == TxnState.COMPLETE_COMMIT:
            break
        await asyncio.sleep(0.01)
    assert b.txn.shard(0).txns["tx"].state == TxnState.COMPLETE_COMMIT
    data = a.lm.get(*DATA)
    assert data.last_stable_offset == data.high_watermark == 2
    assert await a.fetch_offset(require_stable=True) == (0, 7)
    # The old coordinator's late markers are fenced by the coordinator epoch.
    gate.set()
    await asyncio.sleep(0.05)
    assert set(a.marker_results) <= {E.TRANSACTION_COORDINATOR_FENCED}
    # The retried EndTxn at the new coordinator is an idempotent success.
    r = await b.txn.handle(26, 3, EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                                committed=True))
    assert r.error_code == 0
    await b.txn.close()
    await a.stop()
    # The coordinator epoch only grows, across restarts too.
    c = await Cluster(tmp_path).start()
    assert c.txn.shard(0).coordinator_epoch == epoch_a + 2
    await c.stop()


def test_coordinator_failover_finishes_prepared_transactions(tmp_path: Path) -> None:
    asyncio.run(asyncio.wait_for(_failover(tmp_path), 30))
