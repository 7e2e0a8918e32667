"""TransactionCoordinatorShard: the deterministic transaction coordinator of one `__transaction_state`
partition.

Shaped like the group coordinator's shard: `handle` and `poll` take a request
or the time and return a CoordinatorResult (responses, records, and the
markers to write); `replay` is the one path that applies a record, live and
on load. The runtime appends the records before releasing responses, then
writes the markers and reports back through `markers_written`, after which
the shard writes CompleteCommit / CompleteAbort.

Kafka's rules (TransactionCoordinator / TransactionMetadata):

- InitProducerId keeps a transactional id's producer id and bumps its epoch;
  KIP-360 clients name their current id and epoch: the same epoch bumps, the
  one before (a retry of a bump whose answer was lost) returns the current
  one, anything else is fenced. An exhausted epoch rotates to a new producer
  id. An Ongoing transaction is first fenced (epoch + 1) and aborted, and the
  client is told CONCURRENT_TRANSACTIONS so it retries (bumping once more).
- PrepareCommit / PrepareAbort answer CONCURRENT_TRANSACTIONS until every
  marker is written and the Complete state is durable.
- EndTxn is answered once the markers are written (Kafka answers after the
  Prepare record; answering later means a consumer that starts right after
  commit_transaction() sees the data). It is answered anyway after
  `end_txn_max_wait_ms`, Prepare being durable, if a partition is unwritable.
- Transactions open longer than their timeout are aborted with an epoch bump,
  so the timed-out producer is fenced; idle ids expire after
  transactional.id.expiration.ms (a tombstone).
- On load, transactions found in PrepareCommit / PrepareAbort get their
  markers written again and are completed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from shoal.coordinator.result import CoordinatorResult, ShardRequest, int_settings_from_properties
from shoal.coordinator.shard import ShardSkeleton
from shoal.coordinator.txn.records import (
    TopicPartition,
    TxnLogValue,
    decode_txn_key,
    decode_txn_value,
    txn_key,
    txn_value,
)
from shoal.coordinator.txn.responses import (
    add_partitions_topics,
    describe_error,
    error_response,
    for_version,
    init_producer_id_response,
    requested_partitions,
)
from shoal.coordinator.txn.state import STATE_BY_NAME, TxnState, check_transition
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from shoal.protocol.generated.add_partitions_to_txn_response import AddPartitionsToTxnResponse
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_transactions_response import DescribeTransactionsResponse
from shoal.protocol.generated.end_txn_response import EndTxnResponse
from shoal.protocol.generated.list_transactions_response import ListTransactionsResponse

log = logging.getLogger(__name__)
E = ErrorCode
S = TxnState
K = ApiKey
NO_PRODUCER_ID = -1
NO_EPOCH = -1
MAX_EPOCH = 32767
_LOAD_YIELD_EVERY = 50_000
ABORT_TIMER = ("abort-timed-out",)
EXPIRE_TIMER = ("expire-ids",)


def epoch_exhausted(epoch: int) -> bool:
    """Kafka rotates to a new producer id once an epoch reaches Short.MAX_VALUE - 1."""
    return epoch >= MAX_EPOCH - 1


@dataclass(slots=True)
class TxnConfig:
    """Broker-level transaction settings; field names are Kafka's property names with dots as underscores."""

    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    transaction_state_log_num_partitions: int = 50
    # shoal's own: how long EndTxn waits for its markers before answering anyway
    end_txn_max_wait_ms: int = 5_000

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> TxnConfig:
        return int_settings_from_properties(cls(), props)


@dataclass(slots=True)
class TransactionMetadata:
    """What the coordinator knows of one transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_EPOCH
    timeout_ms: int = 60_000
    state: TxnState = S.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    # Kept in memory only (as Kafka): the epoch before the last KIP-360 bump, to recognise retries.
    last_producer_epoch: int = NO_EPOCH

    def value(self, **changes: Any) -> TxnLogValue:
        v = TxnLogValue(producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                        timeout_ms=self.timeout_ms, state=self.state, partitions=set(self.partitions),
                        last_update_ms=self.last_update_ms, start_ms=self.start_ms,
                        previous_producer_id=self.previous_producer_id)
        for k, val in changes.items():
            setattr(v, k, val)
        return v


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Markers the runtime must write: one per partition, all for one transaction's outcome."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


@dataclass(slots=True)
class _Waiter:
    token: Any
    api_key: ApiKey
    api_version: int


class TransactionCoordinatorShard(ShardSkeleton):
    """All transactional ids of one `__transaction_state` partition."""

    def __init__(self, partition: int, config: TxnConfig | None = None, coordinator_epoch: int = 0, *,
                 next_producer_id: Callable[[], int],
                 offsets_partition: Callable[[str], int],
                 partition_exists: Callable[[str, int], bool] = lambda t, p: True) -> None:
        super().__init__(partition)
        self.config = config or TxnConfig()
        self.coordinator_epoch = coordinator_epoch
        self.next_producer_id = next_producer_id
        self.offsets_partition = offsets_partition
        self.partition_exists = partition_exists
        self.txns: dict[str, TransactionMetadata] = {}
        self._waiters: dict[str, list[_Waiter]] = {}
        self.handlers.update({
            K.INIT_PRODUCER_ID: self.init_producer_id, K.ADD_PARTITIONS_TO_TXN: self.add_partitions,
            K.ADD_OFFSETS_TO_TXN: self.add_offsets, K.END_TXN: self.end_txn,
            K.DESCRIBE_TRANSACTIONS: self.describe_transactions, K.LIST_TRANSACTIONS: self.list_transactions})

    # ================================================================ output
    def _write(self, meta: TransactionMetadata, value: TxnLogValue | None, last_epoch: int | None = None) -> None:
        """Transition `meta` to `value` (validated; None: Dead, the id is deleted), as a record queued for
        the log and applied now."""
        target = S.DEAD if value is None else value.state
        check_transition(meta.state, target)
        assert self._out is not None
        log.info("TransactionalId %s with producer id %d and epoch %d transitions from %s to %s (%s).",
                 meta.transactional_id, meta.producer_id if value is None else value.producer_id,
                 meta.producer_epoch if value is None else value.producer_epoch, meta.state.display_name,
                 target.display_name, f"__transaction_state-{self.partition}")
        key, raw = txn_key(meta.transactional_id), None if value is None else txn_value(value)
        self._out.add_record(key, raw)
        self.replay(key, raw)
        if last_epoch is not None:
            meta.last_producer_epoch = last_epoch

    def _start_markers(self, meta: TransactionMetadata, commit: bool) -> None:
        assert self._out is not None
        self._out.markers.append(MarkerJob(meta.transactional_id, meta.producer_id, meta.producer_epoch,
                                           self.coordinator_epoch, commit, tuple(sorted(meta.partitions))))

    # ================================================================ replay / load
    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one `__transaction_state` record (live and on load)."""
        try:
            tid = decode_txn_key(key)
        except ValueError:
            self.skip_record(int.from_bytes(key[:2], "big", signed=True))
            return
        if value is None:
            self.txns.pop(tid, None)
            return
        v = decode_txn_value(value)
        meta = self.txns.get(tid)
        if meta is None:
            meta = self.txns[tid] = TransactionMetadata(tid, v.producer_id)
        meta.producer_id = v.producer_id
        meta.producer_epoch = v.producer_epoch
        meta.timeout_ms = v.timeout_ms
        meta.state = v.state
        meta.partitions = set(v.partitions)
        meta.start_ms = v.start_ms
        meta.last_update_ms = v.last_update_ms
        meta.previous_producer_id = v.previous_producer_id

    def replay_loaded(self, latest: dict[bytes, bytes | None]) -> Iterator[None]:
        for i, (key, value) in enumerate(latest.items()):
            self.replay(key, value)
            if i % _LOAD_YIELD_EVERY == _LOAD_YIELD_EVERY - 1:
                yield

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        """After a load: finish every transaction a previous coordinator left prepared."""
        self._begin()
        log.info("Loaded %d transactional ids from __transaction_state-%d (coordinator epoch %d).",
                 len(self.txns), self.partition, self.coordinator_epoch)
        for meta in self.txns.values():
            if meta.state.is_prepare:
                self._start_markers(meta, meta.state == S.PREPARE_COMMIT)
        self._ensure_timers(now_ms)
        return self._end()

    def unload(self) -> CoordinatorResult:
        """The partition moved away: parked requests get NOT_COORDINATOR (they retry elsewhere)."""
        self._begin()
        log.info("Unloading __transaction_state-%d: removing %d cached transactional ids.", self.partition,
                 len(self.txns))
        for waiters in self._waiters.values():
            for w in waiters:
                self.respond(w.token, error_response(w.api_key, w.api_version, None, E.NOT_COORDINATOR))
        self._waiters.clear()
        self.txns.clear()
        self.timers.clear()
        return self._end()

    # ================================================================ requests
    def _unsupported(self, ctx: ShardRequest, request: Any) -> Any:
        return error_response(ctx.api_key, ctx.api_version, request, E.UNSUPPORTED_VERSION)

    # ---------------------------------------------------------------- InitProducerId
    def init_producer_id(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any | None:
        v = ctx.api_version
        tid = req.transactional_id
        if not tid:
            return init_producer_id_response(v, E.INVALID_REQUEST)
        timeout = req.transaction_timeout_ms
        if timeout <= 0 or timeout > self.config.transaction_max_timeout_ms:
            return init_producer_id_response(v, E.INVALID_TRANSACTION_TIMEOUT)
        exp_pid = req.producer_id if v >= 3 else NO_PRODUCER_ID
        exp_epoch = req.producer_epoch if v >= 3 else NO_EPOCH
        if (exp_pid == NO_PRODUCER_ID) != (exp_epoch == NO_EPOCH):
            return init_producer_id_response(v, E.INVALID_REQUEST)
        expected = None if exp_pid == NO_PRODUCER_ID else (exp_pid, exp_epoch)
        meta = self.txns.get(tid)
        if meta is None:
            # Not persisted until the bump below is: a failed append leaves no trace.
            meta = self.txns[tid] = TransactionMetadata(tid, self.next_producer_id(), timeout_ms=timeout,
                                                        last_update_ms=now_ms)
        if expected is not None and not (
                meta.producer_epoch == NO_EPOCH or expected[0] == meta.producer_id
                or (expected[0] == meta.previous_producer_id and epoch_exhausted(expected[1]))):
            return init_producer_id_response(v, E.PRODUCER_FENCED)
        if meta.state.is_prepare:
            return init_producer_id_response(v, E.CONCURRENT_TRANSACTIONS)
        if meta.state == S.ONGOING:
            # Fence the open transaction (epoch + 1) and abort it; the client retries once it is done.
            self._fence_and_abort(meta, now_ms)
            self._park(meta.transactional_id, ctx, now_ms)
            return None
        if epoch_exhausted(meta.producer_epoch) and (expected is None or expected[1] == meta.producer_epoch):
            new_pid, new_epoch = self.next_producer_id(), 0
            last_epoch = meta.producer_epoch if expected is not None else NO_EPOCH
            previous = meta.producer_id
        else:
            new_pid, previous = meta.producer_id, meta.previous_producer_id
            if expected is None:
                new_epoch, last_epoch = meta.producer_epoch + 1, NO_EPOCH
            elif meta.producer_epoch == NO_EPOCH or expected[1] == meta.producer_epoch:
                new_epoch, last_epoch = meta.producer_epoch + 1, meta.producer_epoch
            elif expected[1] == meta.last_producer_epoch:
                new_epoch, last_epoch = meta.producer_epoch, meta.last_producer_epoch  # a retry
            else:
                return init_producer_id_response(v, E.PRODUCER_FENCED)
        self._write(meta, meta.value(producer_id=new_pid, producer_epoch=new_epoch, timeout_ms=timeout,
                                     state=S.EMPTY, partitions=set(), start_ms=-1, last_update_ms=now_ms,
                                     previous_producer_id=previous), last_epoch)
        return init_producer_id_response(v, E.NONE, meta.producer_id, meta.producer_epoch)

    def describe_transactions(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any:
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=[
            self.describe(tid) for tid in req.transactional_ids])

    def _fence_and_abort(self, meta: TransactionMetadata, now_ms: int) -> None:
        """Kafka's prepareFenceProducerEpoch + abort: PrepareAbort under epoch + 1, then markers."""
        epoch = meta.producer_epoch + 1 if meta.producer_epoch < MAX_EPOCH else meta.producer_epoch
        check_transition(meta.state, S.PREPARE_EPOCH_FENCE)
        self._write(meta, meta.value(producer_epoch=epoch, state=S.PREPARE_ABORT, last_update_ms=now_ms),
                    NO_EPOCH)
        self._start_markers(meta, commit=False)

    # ---------------------------------------------------------------- AddPartitionsToTxn / AddOffsetsToTxn
    def _validate(self, tid: str | None, producer_id: int, producer_epoch: int) -> tuple[ErrorCode, Any]:
        if not tid:
            return E.INVALID_REQUEST, None
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, None
        if meta.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED, None
        return E.NONE, meta

    def _add(self, tid: str | None, producer_id: int, producer_epoch: int, partitions: list[TopicPartition],
             now_ms: int) -> ErrorCode:
        error, meta = self._validate(tid, producer_id, producer_epoch)
        if error != E.NONE:
            return error
        if meta.state.is_prepare:
            return E.CONCURRENT_TRANSACTIONS  # the previous transaction's markers are still being written
        if meta.state == S.ONGOING and meta.partitions.issuperset(partitions):
            return E.NONE
        start = now_ms if meta.state != S.ONGOING else meta.start_ms
        self._write(meta, meta.value(state=S.ONGOING, partitions=meta.partitions | set(partitions),
                                     start_ms=start, last_update_ms=now_ms))
        return E.NONE

    def add_offsets(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any:
        error = self._add(req.transactional_id, req.producer_id, req.producer_epoch,
                          [("__consumer_offsets", self.offsets_partition(req.group_id))], now_ms)
        return AddOffsetsToTxnResponse(throttle_time_ms=0,
                                       error_code=int(for_version(ctx.api_key, ctx.api_version, error)))

    def add_partitions(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any:
        v = ctx.api_version
        if v >= 4:
            results = []
            for t in req.transactions:
                parts = requested_partitions(t.topics)
                if t.verify_only:
                    errors = {tp: self.verify(t.transactional_id, t.producer_id, t.producer_epoch, tp)
                              for tp in parts}
                else:
                    errors = self._add_checked(t.transactional_id, t.producer_id, t.producer_epoch, parts, now_ms)
                results.append(AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                    transactional_id=t.transactional_id, topic_results=add_partitions_topics(errors, v)))
            return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=results)
        parts = requested_partitions(req.v3_and_below_topics)
        errors = self._add_checked(req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                   req.v3_and_below_producer_epoch, parts, now_ms)
        return AddPartitionsToTxnResponse(throttle_time_ms=0,
                                          results_by_topic_v3_and_below=add_partitions_topics(errors, v))

    def _add_checked(self, tid: str, producer_id: int, producer_epoch: int, parts: list[TopicPartition],
                     now_ms: int) -> dict[TopicPartition, ErrorCode]:
        """One error for every partition; an unknown partition fails the rest as OPERATION_NOT_ATTEMPTED."""
        unknown = {tp for tp in parts if not self.partition_exists(*tp)}
        if unknown:
            return {tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED
                    for tp in parts}
        return dict.fromkeys(parts, self._add(tid, producer_id, producer_epoch, parts, now_ms))

    def verify(self, tid: str | None, producer_id: int, producer_epoch: int, tp: TopicPartition) -> ErrorCode:
        """KIP-890 part 1: may this producer write transactionally to `tp` now? (read-only)"""
        error, meta = self._validate(tid, producer_id, producer_epoch)
        if error != E.NONE:
            return error
        if meta.state.is_prepare:
            return E.CONCURRENT_TRANSACTIONS
        if meta.state != S.ONGOING or tp not in meta.partitions:
            return E.TRANSACTION_ABORTABLE
        return E.NONE

    # ---------------------------------------------------------------- EndTxn
    def end_txn(self, ctx: ShardRequest, req: Any, now_ms: int) -> Any | None:
        v = ctx.api_version

        def answer(error: ErrorCode) -> Any:
            return EndTxnResponse(throttle_time_ms=0, error_code=int(for_version(K.END_TXN, v, error)))

        error, meta = self._validate(req.transactional_id, req.producer_id, req.producer_epoch)
        if error != E.NONE:
            return answer(error)
        commit = bool(req.committed)
        state = meta.state
        if state == S.ONGOING:
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            self._write(meta, meta.value(state=target, last_update_ms=now_ms))
            self._start_markers(meta, commit)
            self._park(meta.transactional_id, ctx, now_ms)
            return None
        if state == S.COMPLETE_COMMIT:
            return answer(E.NONE if commit else E.INVALID_TXN_STATE)  # a retry of a commit that completed
        if state == S.COMPLETE_ABORT:
            return answer(E.INVALID_TXN_STATE if commit else E.NONE)
        if state == S.PREPARE_COMMIT:
            return answer(E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE)
        if state == S.PREPARE_ABORT:
            return answer(E.INVALID_TXN_STATE if commit else E.CONCURRENT_TRANSACTIONS)
        return answer(E.INVALID_TXN_STATE)  # Empty: nothing to end

    def _park(self, tid: str, ctx: ShardRequest, now_ms: int) -> None:
        """Hold a response until the transaction's markers are written (or the wait runs out)."""
        w = _Waiter(ctx.token, ctx.api_key, ctx.api_version)
        self._waiters.setdefault(tid, []).append(w)
        self.timers.schedule(("end-wait", ctx.token), now_ms + self.config.end_txn_max_wait_ms,
                             lambda now: self._wait_expired(tid, w))

    def _wait_expired(self, tid: str, w: _Waiter) -> None:
        waiters = self._waiters.get(tid)
        if waiters is None or w not in waiters:
            return
        waiters.remove(w)
        if not waiters:
            del self._waiters[tid]
        # The Prepare record is durable, so the outcome is decided (Kafka answers at this point).
        self.respond(w.token, self._completion_response(w))

    @staticmethod
    def _completion_response(w: _Waiter) -> Any:
        if w.api_key == K.END_TXN:
            return EndTxnResponse(throttle_time_ms=0, error_code=0)
        return init_producer_id_response(w.api_version, E.CONCURRENT_TRANSACTIONS)

    # ---------------------------------------------------------------- markers
    def markers_written(self, job: MarkerJob, now_ms: int) -> CoordinatorResult:
        """Every marker of `job` is in its partition: complete the transaction."""
        self._begin()
        meta = self.txns.get(job.transactional_id)
        target = S.PREPARE_COMMIT if job.commit else S.PREPARE_ABORT
        if (meta is not None and meta.state == target and meta.producer_id == job.producer_id
                and meta.producer_epoch == job.producer_epoch and job.coordinator_epoch == self.coordinator_epoch):
            done = S.COMPLETE_COMMIT if job.commit else S.COMPLETE_ABORT
            self._write(meta, meta.value(state=done, partitions=set(), last_update_ms=now_ms))
            for w in self._waiters.pop(job.transactional_id, []):
                self.timers.cancel(("end-wait", w.token))
                self.respond(w.token, self._completion_response(w))
        return self._end()

    # ---------------------------------------------------------------- timers
    def _ensure_timers(self, now_ms: int) -> None:
        if ABORT_TIMER not in self.timers:
            self.timers.schedule(
                ABORT_TIMER, now_ms + self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                self._abort_timed_out)
        if EXPIRE_TIMER not in self.timers:
            self.timers.schedule(
                EXPIRE_TIMER, now_ms + self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
                self._expire_ids)

    def _abort_timed_out(self, now_ms: int) -> None:
        for meta in list(self.txns.values()):
            if meta.state == S.ONGOING and meta.start_ms + meta.timeout_ms < now_ms:
                self._fence_and_abort(meta, now_ms)
        self._ensure_timers(now_ms)

    def _expire_ids(self, now_ms: int) -> None:
        self._remove_expired(now_ms)
        self._ensure_timers(now_ms)

    def _remove_expired(self, now_ms: int) -> None:
        limit = self.config.transactional_id_expiration_ms
        for tid, meta in list(self.txns.items()):
            if (meta.state.expiration_allowed and meta.producer_epoch != NO_EPOCH
                    and now_ms - meta.last_update_ms >= limit and tid not in self._waiters):
                self._write(meta, None)

    # ---------------------------------------------------------------- admin
    def describe(self, tid: str) -> DescribeTransactionsResponse.TransactionState:
        if not tid:
            return describe_error(tid, E.INVALID_REQUEST)
        meta = self.txns.get(tid)
        if meta is None or meta.producer_epoch == NO_EPOCH or meta.state == S.DEAD:
            return describe_error(tid, E.TRANSACTIONAL_ID_NOT_FOUND)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return DescribeTransactionsResponse.TransactionState(
            error_code=0, transactional_id=tid, transaction_state=meta.state.display_name,
            transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
            producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
            topics=[DescribeTransactionsResponse.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()])

    def list_transactions(self, ctx: ShardRequest, req: Any, now_ms: int) -> ListTransactionsResponse:
        states = {STATE_BY_NAME[s] for s in req.state_filters if s in STATE_BY_NAME}
        unknown = [s for s in req.state_filters if s not in STATE_BY_NAME]
        pids = set(req.producer_id_filters)
        duration = req.duration_filter if ctx.api_version >= 1 else -1
        out = []
        for tid, meta in sorted(self.txns.items()):
            if meta.producer_epoch == NO_EPOCH or meta.state == S.DEAD:
                continue
            if states and meta.state not in states:
                continue
            if pids and meta.producer_id not in pids:
                continue
            if duration >= 0 and (meta.start_ms < 0 or now_ms - meta.start_ms < duration):
                continue
            out.append(ListTransactionsResponse.TransactionState(
                transactional_id=tid, producer_id=meta.producer_id, transaction_state=meta.state.display_name))
        return ListTransactionsResponse(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                                        transaction_states=out)
