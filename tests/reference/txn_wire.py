"""A transaction scripted at the wire level, for the error codes clients turn into exceptions.

InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, Produce and EndTxn
with right and wrong producer ids, epochs and sequences, each answer recorded by Kafka's
error name. Producer ids differ between brokers, so epochs are recorded relative to the
first one. Versions are pinned to the transaction protocol v1 that every client speaks
(EndTxn v4, AddPartitionsToTxn v3), so both brokers are asked the same question.
"""

from __future__ import annotations

import time
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from shoal.protocol.generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from shoal.protocol.generated.end_txn_request import EndTxnRequest
from shoal.protocol.generated.init_producer_id_request import InitProducerIdRequest
from shoal.protocol.generated.produce_request import ProduceRequest
from shoal.protocol.generated.txn_offset_commit_request import TxnOffsetCommitRequest
from shoal.protocol.record_encode import build_batch
from shoal.tools.wire import BrokerConnection, ToolClient, ToolError
from tests.interop.txn_helpers import read_all
from tests.reference.scenarios import err

INIT_V, ADD_PARTS_V, ADD_OFFSETS_V, TXN_COMMIT_V, END_V, PRODUCE_V = 4, 3, 3, 3, 4, 9
_RETRIABLE = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
              ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS}


class TxnScript:
    """One transactional id on its coordinator's connection, and the partition leader's."""

    def __init__(self, bootstrap: str, tid: str, topic: str) -> None:
        self.tid = tid
        self.topic = topic
        self.client = ToolClient(bootstrap, timeout=20)
        deadline = time.monotonic() + 30
        while True:  # the first FindCoordinator makes Kafka create __transaction_state
            try:
                self.coord: BrokerConnection = self.client.find_coordinator(tid, 1)
                break
            except ToolError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        leader = self.client.metadata([topic]).topics[0].partitions[0].leader_id
        self.leader = self.client.node(leader)
        self.pid, self.epoch, self.first_epoch = -1, -1, 0
        self.sequence = 0

    def close(self) -> None:
        self.client.close()

    def init(self, timeout_ms: int = 60000, retry: bool = True) -> dict[str, Any]:
        """InitProducerId; retried while the coordinator is loading or still aborting."""
        deadline = time.monotonic() + 30
        while True:
            resp = self.coord.send(InitProducerIdRequest(transactional_id=self.tid, transaction_timeout_ms=timeout_ms,
                                                         producer_id=-1, producer_epoch=-1), INIT_V)
            if not retry or resp.error_code not in _RETRIABLE or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if resp.error_code == ErrorCode.NONE:
            if self.pid < 0:
                self.first_epoch = resp.producer_epoch
            self.pid, self.epoch, self.sequence = resp.producer_id, resp.producer_epoch, 0
        return {"error": err(resp.error_code), "epoch": resp.producer_epoch - self.first_epoch
                if resp.error_code == ErrorCode.NONE else None}

    def add_partitions(self, topics: dict[str, list[int]], pid: int | None = None,
                       epoch: int | None = None) -> list[tuple[str, int, str]]:
        req = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.pid if pid is None else pid,
            v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                 for t, ps in topics.items()])
        resp = self.coord.send(req, ADD_PARTS_V)
        return sorted((t.name, p.partition_index, err(p.partition_error_code))
                      for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition)

    def add_offsets(self, group: str) -> str:
        req = AddOffsetsToTxnRequest(transactional_id=self.tid, producer_id=self.pid, producer_epoch=self.epoch,
                                     group_id=group)
        return err(self.coord.send(req, ADD_OFFSETS_V).error_code)

    def txn_offset_commit(self, group: str, offset: int, generation: int = -1, member_id: str = "") -> list[str]:
        group_conn = self.client.find_coordinator(group, 0)
        req = TxnOffsetCommitRequest(
            transactional_id=self.tid, group_id=group, producer_id=self.pid, producer_epoch=self.epoch,
            generation_id=generation, member_id=member_id, topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                name=self.topic, partitions=[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset)])])
        resp = group_conn.send(req, TXN_COMMIT_V)
        return [err(p.error_code) for t in resp.topics for p in t.partitions]

    def produce(self, values: list[bytes], epoch: int | None = None, sequence: int | None = None) -> str:
        """A transactional batch to partition 0; the sequence advances when it is accepted."""
        seq = self.sequence if sequence is None else sequence
        batch = build_batch([(int(time.time() * 1000), None, v, None) for v in values], producer_id=self.pid,
                            producer_epoch=self.epoch if epoch is None else epoch, base_sequence=seq,
                            is_transactional=True)
        req = ProduceRequest(transactional_id=self.tid, acks=-1, timeout_ms=10000, topic_data=[
            ProduceRequest.TopicProduceData(name=self.topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])])
        resp = self.leader.send(req, PRODUCE_V)
        code = resp.responses[0].partition_responses[0].error_code
        if code == ErrorCode.NONE and sequence is None:
            self.sequence += len(values)
        return err(code)

    def end(self, commit: bool, epoch: int | None = None, pid: int | None = None) -> str:
        deadline = time.monotonic() + 30
        while True:  # CONCURRENT_TRANSACTIONS: the previous transaction's markers are still being written
            resp = self.coord.send(EndTxnRequest(transactional_id=self.tid, producer_id=self.pid if pid is None else pid,
                                                 producer_epoch=self.epoch if epoch is None else epoch,
                                                 committed=commit), END_V)
            if resp.error_code != ErrorCode.CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
                return err(resp.error_code)
            time.sleep(0.2)


def wire_transaction(bootstrap: str, tid: str, topic: str, group: str) -> dict[str, Any]:
    """The script; the observations by step name."""
    s = TxnScript(bootstrap, tid, topic)
    out: dict[str, Any] = {}
    try:
        out["init timeout above max"] = s.init(timeout_ms=900_001, retry=False)
        out["init"] = s.init()
        out["init again"] = s.init()
        out["commit with no transaction"] = s.end(True)
        out["abort with no transaction"] = s.end(False)
        out["produce before adding the partition"] = s.produce([b"early"])
        out["add partitions old epoch"] = s.add_partitions({topic: [0]}, epoch=s.epoch - 1)
        out["add partitions wrong producer id"] = s.add_partitions({topic: [0]}, pid=s.pid + 1000)
        out["add partitions unknown topic"] = s.add_partitions({topic: [0], "no-such-topic-txn": [0]})
        out["add partitions"] = s.add_partitions({topic: [0]})
        out["produce"] = s.produce([b"a", b"b"])
        out["produce out of order"] = s.produce([b"c"], sequence=s.sequence + 5)
        out["produce duplicate"] = s.produce([b"a", b"b"], sequence=0)
        out["produce old epoch"] = s.produce([b"d"], epoch=s.epoch - 1)
        out["add offsets"] = s.add_offsets(group)
        out["txn offset commit as unknown member"] = s.txn_offset_commit(group, 7, generation=3, member_id="bogus")
        out["txn offset commit"] = s.txn_offset_commit(group, 7)
        out["end old epoch"] = s.end(True, epoch=s.epoch - 1)
        out["end wrong producer id"] = s.end(True, pid=s.pid + 1000)
        out["commit"] = s.end(True)
        out["commit retried"] = s.end(True)
        out["abort after commit"] = s.end(False)
        out["second transaction add"] = s.add_partitions({topic: [0]})
        out["second transaction produce"] = s.produce([b"e"])
        out["fenced by a new init"] = s.init()
        out["end with the fenced epoch"] = s.end(False, epoch=s.epoch - 1)
        out["abort with no transaction after fencing"] = s.end(False)
    finally:
        s.close()
    # The first transaction committed "a", "b"; the second ("e") was aborted by the fencing init.
    out["read_committed"] = read_all(bootstrap, topic)
    out["read_uncommitted"] = read_all(bootstrap, topic, isolation="read_uncommitted")
    return out
