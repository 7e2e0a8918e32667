"""The sans-IO transaction coordinator with a fake clock: Kafka's state table, epoch rules (KIP-98/360),
retries, timeouts, expiry, markers, and load == live."""

from __future__ import annotations

import itertools

import pytest

from shoal.coordinator.result import ShardRequest
from shoal.coordinator.txn.records import TxnLogValue, decode_txn_value, txn_key, txn_value
from shoal.coordinator.txn.shard import MarkerJob, TransactionCoordinatorShard, TxnConfig
from shoal.coordinator.txn.state import VALID_PREVIOUS, IllegalTransition, TxnState, check_transition
from shoal.protocol.errors import ErrorCode as E
from shoal.protocol.generated.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from shoal.protocol.generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from shoal.protocol.generated.api_keys import ApiKey as K
from shoal.protocol.generated.describe_transactions_request import DescribeTransactionsRequest
from shoal.protocol.generated.end_txn_request import EndTxnRequest
from shoal.protocol.generated.init_producer_id_request import InitProducerIdRequest
from shoal.protocol.generated.list_transactions_request import ListTransactionsRequest

S = TxnState
T0 = 1_000_000
CFG = TxnConfig(transaction_abort_timed_out_transaction_cleanup_interval_ms=100,
                transactional_id_expiration_ms=10_000, end_txn_max_wait_ms=5_000)


class Harness:
    def __init__(self, config: TxnConfig = CFG, coordinator_epoch: int = 0,
                 known: set[tuple[str, int]] | None = None) -> None:
        self.pids = itertools.count(1000)
        self.now = T0
        self.records: list[tuple[bytes, bytes | None]] = []
        self.markers: list[MarkerJob] = []
        self.tokens = itertools.count(1)
        self.parked: dict[int, object] = {}
        self.shard = TransactionCoordinatorShard(
            0, config, coordinator_epoch, next_producer_id=lambda: next(self.pids),
            offsets_partition=lambda group: 7,
            partition_exists=(lambda t, p: known is None or (t, p) in known))

    def _take(self, result, token=None):
        self.records.extend(result.records)
        self.markers.extend(result.markers)
        answer = None
        for tok, resp in result.responses:
            if tok == token:
                answer = resp
            else:
                self.parked[tok] = resp
        return answer

    def call(self, api_key: K, version: int, req):
        token = next(self.tokens)
        return self._take(self.shard.handle(ShardRequest(token, api_key, version), req, self.now), token), token

    def init(self, tid: str | None = "t", timeout: int = 60_000, pid: int = -1, epoch: int = -1, v: int = 4):
        resp, token = self.call(K.INIT_PRODUCER_ID, v, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout,
                                                             producer_id=pid, producer_epoch=epoch))
        return resp if resp is not None else token

    def add(self, pid: int, epoch: int, parts: list[tuple[str, int]], tid: str = "t", v: int = 3):
        topics: dict[str, list[int]] = {}
        for t, p in parts:
            topics.setdefault(t, []).append(p)
        req = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                 for t, ps in topics.items()])
        resp, _ = self.call(K.ADD_PARTITIONS_TO_TXN, v, req)
        return {(t.name, r.partition_index): r.partition_error_code
                for t in resp.results_by_topic_v3_and_below for r in t.results_by_partition}

    def end(self, pid: int, epoch: int, commit: bool, tid: str = "t", v: int = 3):
        resp, token = self.call(K.END_TXN, v, EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                     committed=commit))
        return resp.error_code if resp is not None else ("parked", token)

    def finish_markers(self) -> None:
        jobs, self.markers = self.markers, []
        for job in jobs:
            self._take(self.shard.markers_written(job, self.now))

    def poll(self, advance: int) -> None:
        self.now += advance
        self._take(self.shard.poll(self.now))

    def meta(self, tid: str = "t"):
        return self.shard.txns[tid]


def test_state_table_matches_kafka() -> None:
    for target, previous in VALID_PREVIOUS.items():
        for state in S:
            if state in previous:
                check_transition(state, target)
            else:
                with pytest.raises(IllegalTransition):
                    check_transition(state, target)
    assert VALID_PREVIOUS[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE}
    assert VALID_PREVIOUS[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}


def test_records_round_trip_in_kafkas_format() -> None:
    v = TxnLogValue(producer_id=5, producer_epoch=3, timeout_ms=1000, state=S.ONGOING,
                    partitions={("a", 1), ("a", 0), ("b", 2)}, last_update_ms=9, start_ms=8)
    raw = txn_value(v)
    assert raw[:2] == b"\x00\x00" and decode_txn_value(raw) == v
    assert txn_key("x")[:2] == b"\x00\x00"
    empty = decode_txn_value(txn_value(TxnLogValue(5, 3, 1000, S.EMPTY)))
    assert empty.partitions == set()


def test_init_producer_id_keeps_the_id_and_bumps_the_epoch() -> None:
    h = Harness()
    r = h.init()
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 0)
    r = h.init()
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 1)
    assert h.init(tid="").error_code == E.INVALID_REQUEST
    assert h.init(timeout=0).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init(timeout=900_001).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init(pid=1000).error_code == E.INVALID_REQUEST  # id without epoch


def test_kip360_expected_epoch_rules() -> None:
    h = Harness()
    h.init()
    r = h.init(pid=1000, epoch=0)  # the producer bumps its own epoch
    assert (r.error_code, r.producer_epoch) == (0, 1)
    r = h.init(pid=1000, epoch=0)  # its answer was lost: the retry gets the same epoch
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 1)
    assert h.init(pid=1000, epoch=5).error_code == E.PRODUCER_FENCED
    assert h.init(pid=1000, epoch=5, v=3).error_code == E.INVALID_PRODUCER_EPOCH  # before v4
    assert h.init(pid=77, epoch=1).error_code == E.PRODUCER_FENCED  # not our producer id
    # No state yet, but an expected id: a new producer id (recovering from UNKNOWN_PRODUCER_ID).
    r = h.init(tid="fresh", pid=55, epoch=3)
    assert (r.error_code, r.producer_epoch) == (0, 0) and r.producer_id != 55


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    h = Harness()
    h.init()
    h.shard.replay(txn_key("t"), txn_value(h.meta().value(producer_epoch=32766)))
    r = h.init(pid=1000, epoch=32766)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1001, 0)
    assert h.meta().previous_producer_id == 1000
    r = h.init(pid=1000, epoch=32766)  # the retry after rotation gets the same answer
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1001, 0)
    assert h.init(pid=1000, epoch=5).error_code == E.PRODUCER_FENCED


def test_add_partitions_rules() -> None:
    h = Harness(known={("a", 0), ("a", 1), ("b", 0)})
    assert h.add(1, 0, [("a", 0)]) == {("a", 0): E.INVALID_PRODUCER_ID_MAPPING}
    h.init()
    assert h.add(999, 0, [("a", 0)]) == {("a", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert h.add(1000, 1, [("a", 0)]) == {("a", 0): E.PRODUCER_FENCED}
    assert h.add(1000, 1, [("a", 0)], v=1) == {("a", 0): E.INVALID_PRODUCER_EPOCH}
    h.records.clear()
    assert h.add(1000, 0, [("a", 0), ("a", 1)]) == {("a", 0): 0, ("a", 1): 0}
    assert h.meta().state == S.ONGOING and len(h.records) == 1
    start = h.meta().start_ms
    h.now += 50
    assert h.add(1000, 0, [("a", 1)]) == {("a", 1): 0}
    assert len(h.records) == 1  # nothing new: no write
    assert h.add(1000, 0, [("b", 0)]) == {("b", 0): 0}
    assert h.meta().start_ms == start  # the transaction started at its first AddPartitions
    assert h.add(1000, 0, [("b", 0), ("zz", 0)]) == {("b", 0): E.OPERATION_NOT_ATTEMPTED,
                                                    ("zz", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    resp, _ = h.call(K.ADD_OFFSETS_TO_TXN, 0, AddOffsetsToTxnRequest(transactional_id="t", producer_id=1000, producer_epoch=0,
                                                  group_id="g"))
    assert resp.error_code == 0 and ("__consumer_offsets", 7) in h.meta().partitions


@pytest.mark.parametrize("state,commit,expected", [
    (S.COMPLETE_COMMIT, True, E.NONE), (S.COMPLETE_COMMIT, False, E.INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, True, E.INVALID_TXN_STATE), (S.COMPLETE_ABORT, False, E.NONE),
    (S.PREPARE_COMMIT, True, E.CONCURRENT_TRANSACTIONS), (S.PREPARE_COMMIT, False, E.INVALID_TXN_STATE),
    (S.PREPARE_ABORT, True, E.INVALID_TXN_STATE), (S.PREPARE_ABORT, False, E.CONCURRENT_TRANSACTIONS),
    (S.EMPTY, True, E.INVALID_TXN_STATE), (S.EMPTY, False, E.INVALID_TXN_STATE),
])
def test_end_txn_state_table(state: TxnState, commit: bool, expected: E) -> None:
    h = Harness()
    h.init()
    h.shard.replay(txn_key("t"), txn_value(h.meta().value(state=state, partitions={("a", 0)})))
    assert h.end(1000, 0, commit) == expected


def test_end_txn_identity_checks() -> None:
    h = Harness()
    assert h.end(1000, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    h.init()
    assert h.end(1001, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.end(1000, 3, True) == E.PRODUCER_FENCED
    assert h.end(1000, 3, True, v=1) == E.INVALID_PRODUCER_EPOCH
    assert h.end(1000, 0, True, tid="") == E.INVALID_REQUEST


def test_commit_writes_prepare_then_markers_then_complete() -> None:
    h = Harness()
    h.init()
    h.add(1000, 0, [("a", 0), ("b", 3)])
    h.records.clear()
    outcome = h.end(1000, 0, True)
    assert outcome[0] == "parked"
    assert [decode_txn_value(v).state for _, v in h.records] == [S.PREPARE_COMMIT]
    assert h.markers == [MarkerJob("t", 1000, 0, 0, True, (("a", 0), ("b", 3)))]
    # While the markers are written, the next transaction must wait.
    assert h.init().error_code == E.CONCURRENT_TRANSACTIONS
    assert h.add(1000, 0, [("a", 0)]) == {("a", 0): E.CONCURRENT_TRANSACTIONS}
    job = h.markers[0]
    h.finish_markers()
    assert h.meta().state == S.COMPLETE_COMMIT and h.meta().partitions == set()
    assert h.parked.pop(outcome[1]).error_code == 0
    # Marker completion is idempotent: a second report changes nothing.
    h.records.clear()
    h._take(h.shard.markers_written(job, h.now))
    assert h.records == []
    assert h.end(1000, 0, True) == E.NONE  # a retry of the commit


def test_end_txn_is_answered_after_the_wait_if_markers_hang() -> None:
    h = Harness()
    h.init()
    h.add(1000, 0, [("a", 0)])
    _, token = h.end(1000, 0, False)
    h.poll(4_999)
    assert token not in h.parked
    h.poll(1)
    assert h.parked[token].error_code == 0  # PrepareAbort is durable: the outcome is decided
    assert h.meta().state == S.PREPARE_ABORT


def test_init_during_ongoing_fences_and_aborts_first() -> None:
    h = Harness()
    h.init()
    h.add(1000, 0, [("a", 0)])
    token = h.init()
    assert isinstance(token, int)  # parked until the abort is complete
    assert h.meta().state == S.PREPARE_ABORT and h.meta().producer_epoch == 1
    assert h.markers == [MarkerJob("t", 1000, 1, 0, False, (("a", 0),))]
    assert h.add(1000, 0, [("a", 0)]) == {("a", 0): E.PRODUCER_FENCED}  # the zombie is fenced
    h.finish_markers()
    assert h.meta().state == S.COMPLETE_ABORT
    assert h.parked.pop(token).error_code == E.CONCURRENT_TRANSACTIONS
    r = h.init()
    assert (r.error_code, r.producer_epoch) == (0, 2)  # bumped once more by the retry


def test_timed_out_transaction_is_aborted_with_an_epoch_bump() -> None:
    h = Harness()
    h.init(timeout=1000)
    h.add(1000, 0, [("a", 0)])
    h.poll(1000)
    assert h.meta().state == S.ONGOING  # not yet past its timeout
    h.poll(101)
    assert h.meta().state == S.PREPARE_ABORT and h.meta().producer_epoch == 1
    h.finish_markers()
    assert h.meta().state == S.COMPLETE_ABORT
    assert h.end(1000, 0, True) == E.PRODUCER_FENCED  # the timed-out producer learns it is fenced


def test_transactional_id_expiry() -> None:
    h = Harness()
    h.init()
    h.poll(3_600_000)
    assert "t" not in h.shard.txns and h.records[-1] == (txn_key("t"), None)
    resp, _ = h.call(K.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(transactional_ids=["t"]))
    assert resp.transaction_states[0].error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    assert h.add(1000, 0, [("a", 0)]) == {("a", 0): E.INVALID_PRODUCER_ID_MAPPING}
    r = h.init()
    assert r.error_code == 0 and r.producer_id == 1001


def test_describe_and_list() -> None:
    h = Harness()
    h.init(tid="a")
    h.init(tid="b")
    h.add(1001, 0, [("x", 1), ("x", 0)], tid="b")
    resp, _ = h.call(K.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(transactional_ids=["b", "nope", ""]))
    b, nope, empty = resp.transaction_states
    assert (b.error_code, b.transaction_state, b.producer_id, b.transaction_start_time_ms) == (0, "Ongoing", 1001, T0)
    assert [(t.topic, t.partitions) for t in b.topics] == [("x", [0, 1])]
    assert nope.error_code == E.TRANSACTIONAL_ID_NOT_FOUND and empty.error_code == E.INVALID_REQUEST
    resp, _ = h.call(K.LIST_TRANSACTIONS, 1, ListTransactionsRequest(state_filters=["Ongoing", "Bogus"], producer_id_filters=[]))
    assert [t.transactional_id for t in resp.transaction_states] == ["b"]
    assert resp.unknown_state_filters == ["Bogus"]
    h.now += 500
    resp, _ = h.call(K.LIST_TRANSACTIONS, 1, ListTransactionsRequest(state_filters=[], producer_id_filters=[1000, 1001],
                                                   duration_filter=400))
    assert [t.transactional_id for t in resp.transaction_states] == ["b"]


def test_verify_for_kip890() -> None:
    h = Harness()
    h.init()
    assert h.shard.verify("t", 1000, 0, ("a", 0)) == E.TRANSACTION_ABORTABLE
    h.add(1000, 0, [("a", 0)])
    assert h.shard.verify("t", 1000, 0, ("a", 0)) == E.NONE
    assert h.shard.verify("t", 1000, 0, ("a", 1)) == E.TRANSACTION_ABORTABLE
    assert h.shard.verify("t", 1000, 9, ("a", 0)) == E.PRODUCER_FENCED
    assert h.shard.verify("nope", 1000, 0, ("a", 0)) == E.INVALID_PRODUCER_ID_MAPPING


def test_loading_replays_to_the_live_state_and_finishes_prepared_transactions() -> None:
    h = Harness()
    h.init(tid="a")
    h.add(1000, 0, [("x", 0)], tid="a")
    h.init(tid="b")
    h.add(1001, 0, [("y", 0)], tid="b")
    h.end(1001, 0, True, tid="b")  # left in PrepareCommit: the coordinator "dies" before its markers
    h.init(tid="c")
    latest = dict(h.records)
    fresh = TransactionCoordinatorShard(0, CFG, 1, next_producer_id=lambda: 5000, offsets_partition=lambda g: 7)
    list(fresh.replay_loaded(latest))
    strip = {tid: (m.producer_id, m.producer_epoch, m.state, m.partitions, m.start_ms, m.timeout_ms)
             for tid, m in h.shard.txns.items()}
    assert {tid: (m.producer_id, m.producer_epoch, m.state, m.partitions, m.start_ms, m.timeout_ms)
            for tid, m in fresh.txns.items()} == strip
    result = fresh.on_loaded(h.now)
    assert result.markers == [MarkerJob("b", 1001, 0, 1, True, (("y", 0),))]  # the new coordinator epoch
    # A report from the old coordinator's epoch changes nothing; the new one completes it.
    assert fresh.markers_written(MarkerJob("b", 1001, 0, 0, True, (("y", 0),)), h.now).records == []
    done = fresh.markers_written(result.markers[0], h.now)
    assert fresh.txns["b"].state == S.COMPLETE_COMMIT and len(done.records) == 1


def test_unload_answers_parked_requests_not_coordinator() -> None:
    h = Harness()
    h.init()
    h.add(1000, 0, [("a", 0)])
    _, token = h.end(1000, 0, True)
    h._take(h.shard.unload())
    assert h.parked[token].error_code == E.NOT_COORDINATOR


def test_add_partitions_v4_batches_and_verify_only() -> None:
    h = Harness(known={("a", 0), ("a", 1)})
    h.init(tid="t1")
    h.init(tid="t2")
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    req = AddPartitionsToTxnRequest(transactions=[
        T(transactional_id="t1", producer_id=1000, producer_epoch=0, verify_only=False,
          topics=[topic(name="a", partitions=[0])]),
        T(transactional_id="t2", producer_id=1001, producer_epoch=0, verify_only=True,
          topics=[topic(name="a", partitions=[1])]),
        T(transactional_id="t2", producer_id=1001, producer_epoch=7, verify_only=False,
          topics=[topic(name="a", partitions=[1])]),
    ])
    resp, _ = h.call(K.ADD_PARTITIONS_TO_TXN, 5, req)
    got = [(r.transactional_id, [(t.name, p.partition_index, p.partition_error_code)
                                 for t in r.topic_results for p in t.results_by_partition])
           for r in resp.results_by_transaction]
    assert got == [("t1", [("a", 0, 0)]), ("t2", [("a", 1, E.TRANSACTION_ABORTABLE)]),
                   ("t2", [("a", 1, E.PRODUCER_FENCED)])]
    assert h.meta("t1").state == S.ONGOING and h.meta("t2").state == S.EMPTY
