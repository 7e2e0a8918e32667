"""The producer side of transactions (Java's TransactionManager): state, and the coordinator calls.

States: UNINITIALIZED -> (init_transactions) READY -> (begin_transaction) IN_TRANSACTION
-> COMMITTING / ABORTING -> READY. An error inside a transaction moves it to
ABORTABLE_ERROR (the application must abort); being fenced, or any error the
protocol cannot recover from, to FATAL_ERROR (the producer must be closed).

Partitions join the transaction before their first batch is sent (the sender
asks for them with AddPartitionsToTxn); offsets join through AddOffsetsToTxn
and are then written with TxnOffsetCommit to the group's coordinator.
Retriable answers (CONCURRENT_TRANSACTIONS while the previous transaction's
markers are written, a coordinator moving or loading) are retried until
``max.block.ms``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from enum import Enum
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey

from .cluster import KafkaClient, now_ms
from .errors import (
    CommitFailedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    error_for,
)
from .protocol import request_class
from .structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition, by_topic

log = logging.getLogger(__name__)

E = ErrorCode
_COORDINATOR_MOVED = (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE)
_RETRY = _COORDINATOR_MOVED + (E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS, E.REQUEST_TIMED_OUT)
_FENCED = (E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
# Errors after which the producer's epoch must be bumped before the next transaction (KIP-360).
NEEDS_EPOCH_BUMP = (E.OUT_OF_ORDER_SEQUENCE_NUMBER, E.UNKNOWN_PRODUCER_ID)
_CONCURRENT_BACKOFF_S = 0.02  # Java retries CONCURRENT_TRANSACTIONS after about 20 ms


class TxnState(Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING_TRANSACTION"
    ABORTING = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


class TransactionManager:
    """One transactional producer's transaction state and its calls to the transaction coordinator."""

    def __init__(self, client: KafkaClient, config: dict[str, Any], transactional_id: str,
                 wake_sender: Callable[[], None]) -> None:
        self.client = client
        self.config = config
        self.transactional_id = transactional_id
        self.timeout_ms = int(config["transaction.timeout.ms"])
        self.wake_sender = wake_sender
        self.state = TxnState.UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        self.partitions: set[TopicPartition] = set()  # in the coordinator's transaction
        self.pending: set[TopicPartition] = set()  # waiting for AddPartitionsToTxn
        self.offsets_added = False
        self.error: BaseException | None = None
        self.needs_epoch_bump = False
        self.coordinator: int | None = None
        self._adding: asyncio.Task | None = None

    # ---------------------------------------------------------------- state
    @property
    def has_error(self) -> bool:
        return self.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR)

    def _transition(self, target: TxnState, *allowed: TxnState) -> None:
        if self.state == TxnState.FATAL_ERROR:
            raise self.error or IllegalStateError("the producer hit a fatal error")
        if self.state not in allowed:
            raise IllegalStateError(f"transactional producer {self.transactional_id!r}: cannot go from "
                                    f"{self.state.value} to {target.value}")
        self.state = target

    def check_can_send(self) -> None:
        if self.state == TxnState.IN_TRANSACTION:
            return
        if self.has_error and self.error is not None:
            raise self.error
        raise IllegalStateError(f"cannot send in state {self.state.value}: call begin_transaction() first")

    def abortable(self, exc: BaseException, code: int | None = None) -> None:
        """An error inside the transaction: only an abort can follow."""
        if self.state == TxnState.FATAL_ERROR:
            return
        if code in NEEDS_EPOCH_BUMP:
            self.needs_epoch_bump = True
        if self.state != TxnState.ABORTABLE_ERROR:
            log.info("transaction %s must be aborted: %r", self.transactional_id, exc)
            self.error = exc
            self.state = TxnState.ABORTABLE_ERROR

    def fatal(self, exc: BaseException) -> None:
        if self.state != TxnState.FATAL_ERROR:
            log.warning("transactional producer %s failed for good: %r", self.transactional_id, exc)
            self.error = exc
            self.state = TxnState.FATAL_ERROR

    def batch_error(self, code: int, exc: BaseException) -> None:
        """A produced batch failed (not retriable, or out of retries)."""
        if code in _FENCED:
            self.fatal(ProducerFencedError(code, "the producer was fenced by a newer one with the same "
                                                 f"transactional.id {self.transactional_id!r}"))
        else:
            self.abortable(exc, code)

    # ---------------------------------------------------------------- coordinator requests
    async def _call(self, api_key: int, build: Callable[[int], Any], deadline_ms: int, *,
                    node: int | None = None) -> Any:
        """Send to the transaction coordinator (or ``node``); reconnects, rediscovers and retries
        connection failures until the deadline."""
        while True:
            target = node
            try:
                if target is None:
                    if self.coordinator is None:
                        self.coordinator = await self.client.find_coordinator(self.transactional_id, 1, deadline_ms)
                    target = self.coordinator
                conn = await self.client.conn(target, purpose="txn")
                version = conn.version_for(api_key)
                return await conn.send(build(version), version=version)
            except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
                log.debug("transaction request %d to node %s failed: %r", api_key, target, e)
                if node is None:
                    self.coordinator_moved()
                if now_ms() >= deadline_ms:
                    raise KafkaTimeoutError(f"transaction request {api_key} timed out") from e
                await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    async def _call_until_done(self, api_key: int, build: Callable[[int], Any], deadline_ms: int, what: str) -> Any:
        """``_call`` again while the answer's error is a retriable one (``what`` names the call in a timeout)."""
        while True:
            resp = await self._call(api_key, build, deadline_ms)
            if resp.error_code not in _RETRY:
                return resp
            await self._retry_pause(resp.error_code, deadline_ms, what)

    def _fatal_error(self, code: int, what: str) -> BaseException:
        """A coordinator error the producer cannot go on after (fenced: ProducerFencedError); now FATAL_ERROR."""
        err: BaseException = error_for(code, what)
        if code in _FENCED:
            err = ProducerFencedError(code, f"transactional.id {self.transactional_id!r} is in use by a newer producer")
        self.fatal(err)
        return err

    def coordinator_moved(self) -> None:
        if self.coordinator is not None:
            self.client.close_node_purpose(self.coordinator, "txn")
            self.coordinator = None

    async def _retry_pause(self, code: int, deadline_ms: int, what: str) -> None:
        if code in _COORDINATOR_MOVED:
            self.coordinator_moved()
        if now_ms() >= deadline_ms:
            raise KafkaTimeoutError(f"{what} did not complete within max.block.ms (last error "
                                    f"{ErrorCode(code).name})")
        await asyncio.sleep(_CONCURRENT_BACKOFF_S if code == E.CONCURRENT_TRANSACTIONS
                            else self.config["retry.backoff.ms"] / 1000)

    def _deadline(self) -> int:
        return now_ms() + int(self.config["max.block.ms"])

    # ---------------------------------------------------------------- InitProducerId
    async def init(self, *, bump: bool = False) -> None:
        """Get the producer id and a new epoch (fencing older producers of this transactional id).

        With ``bump`` the current id and epoch are named, so the coordinator
        bumps this producer's own epoch (KIP-360) instead of treating it as a
        new producer.
        """
        if not bump:
            self._transition(TxnState.INITIALIZING, TxnState.UNINITIALIZED)
        deadline = self._deadline()
        cls = request_class(ApiKey.INIT_PRODUCER_ID)
        expected = (self.producer_id, self.producer_epoch) if bump else (-1, -1)
        resp = await self._call_until_done(ApiKey.INIT_PRODUCER_ID, lambda v: cls(
            transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms,
            producer_id=expected[0] if v >= 3 else -1, producer_epoch=expected[1] if v >= 3 else -1),
            deadline, "init_transactions")
        if resp.error_code:
            raise self._fatal_error(resp.error_code, f"InitProducerId for {self.transactional_id!r}")
        self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
        self.needs_epoch_bump = False
        self.state = TxnState.READY

    def reset(self) -> None:
        """Back to UNINITIALIZED, to init again as a new producer of this transactional id."""
        if self._adding is not None and not self._adding.done():
            self._adding.cancel()
        self.state = TxnState.UNINITIALIZED
        self.partitions.clear()
        self.pending.clear()
        self.offsets_added = False
        self.error = None
        self.needs_epoch_bump = False
        self.producer_id = self.producer_epoch = -1

    def begin(self) -> None:
        self._transition(TxnState.IN_TRANSACTION, TxnState.READY)

    # ---------------------------------------------------------------- AddPartitionsToTxn
    def need_partition(self, tp: TopicPartition) -> None:
        """The sender has a batch for ``tp``, which is not in the transaction yet."""
        if tp in self.partitions:
            return
        self.pending.add(tp)
        if self._adding is None or self._adding.done():
            self._adding = asyncio.get_running_loop().create_task(self._add_pending())

    async def _add_pending(self) -> None:
        cls = request_class(ApiKey.ADD_PARTITIONS_TO_TXN)
        deadline = now_ms() + int(self.config["delivery.timeout.ms"])
        try:
            while self.pending and not self.has_error:
                topics = by_topic((tp, tp.partition) for tp in sorted(self.pending))
                resp = await self._call(ApiKey.ADD_PARTITIONS_TO_TXN, lambda v, topics=topics: cls(
                    v3_and_below_transactional_id=self.transactional_id,
                    v3_and_below_producer_id=self.producer_id, v3_and_below_producer_epoch=self.producer_epoch,
                    v3_and_below_topics=[cls.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                         for t, ps in topics.items()]), deadline)
                retry_code = None
                for t in resp.results_by_topic_v3_and_below:
                    for r in t.results_by_partition:
                        tp = TopicPartition(t.name, r.partition_index)
                        code = r.partition_error_code
                        if code == 0:
                            self.pending.discard(tp)
                            self.partitions.add(tp)
                        elif code in _RETRY or code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.OPERATION_NOT_ATTEMPTED):
                            retry_code = code
                        elif code in _FENCED:
                            self.batch_error(code, error_for(code))
                        else:
                            self.fatal(error_for(code, f"AddPartitionsToTxn {tp}"))
                if retry_code is not None:
                    await self._retry_pause(retry_code, deadline, "AddPartitionsToTxn")
        except KafkaTimeoutError as e:
            self.abortable(e)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - the transaction cannot go on
            self.abortable(e)
        finally:
            self.wake_sender()

    # ---------------------------------------------------------------- offsets
    async def send_offsets(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                           group: ConsumerGroupMetadata) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator."""
        self.check_can_send()
        deadline = self._deadline()
        cls = request_class(ApiKey.ADD_OFFSETS_TO_TXN)
        resp = await self._call_until_done(ApiKey.ADD_OFFSETS_TO_TXN, lambda v: cls(
            transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, group_id=group.group_id), deadline, "send_offsets_to_transaction")
        code = resp.error_code
        if code:
            err = error_for(code, "AddOffsetsToTxn")
            self.batch_error(code, err) if code in _FENCED else self.abortable(err)
            raise self.error or err
        self.offsets_added = True
        await self._commit_offsets(offsets, group, deadline)

    async def _commit_offsets(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                              group: ConsumerGroupMetadata, deadline: int) -> None:
        cls = request_class(ApiKey.TXN_OFFSET_COMMIT)
        remaining = dict(offsets)
        node: int | None = None
        while remaining:
            if node is None:
                node = await self.client.find_coordinator(group.group_id, 0, deadline)
            topics = by_topic((tp, cls.TxnOffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=om.offset, committed_leader_epoch=om.leader_epoch,
                committed_metadata=om.metadata)) for tp, om in remaining.items())
            resp = await self._call(ApiKey.TXN_OFFSET_COMMIT, lambda v, topics=topics: cls(
                transactional_id=self.transactional_id, group_id=group.group_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, generation_id=group.generation_id, member_id=group.member_id,
                group_instance_id=group.group_instance_id,
                topics=[cls.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()]),
                deadline, node=node)
            retry_code = None
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    code = p.error_code
                    if code == 0:
                        remaining.pop(tp, None)
                    elif code in _RETRY or code == E.UNKNOWN_TOPIC_OR_PARTITION:
                        retry_code = code
                    elif code in _FENCED:
                        self.batch_error(code, error_for(code))
                        raise self.error or error_for(code)
                    else:
                        err = (CommitFailedError(f"TxnOffsetCommit for group {group.group_id}: "
                                                 f"{ErrorCode(code).name}")
                               if code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID)
                               else error_for(code, f"TxnOffsetCommit {tp}"))
                        self.abortable(err)
                        raise err
            if retry_code is not None:
                if retry_code in _COORDINATOR_MOVED:
                    node = None
                if now_ms() >= deadline:
                    raise KafkaTimeoutError("TxnOffsetCommit did not complete within max.block.ms")
                await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    # ---------------------------------------------------------------- EndTxn
    def begin_commit(self) -> None:
        if self.state == TxnState.ABORTABLE_ERROR:
            assert self.error is not None
            raise self.error
        self._transition(TxnState.COMMITTING, TxnState.IN_TRANSACTION, TxnState.COMMITTING)

    def begin_abort(self) -> None:
        self._transition(TxnState.ABORTING, TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR,
                         TxnState.ABORTING)

    async def end(self, commit: bool) -> None:
        """EndTxn, if anything joined the transaction; then READY for the next one."""
        if self._adding is not None and not self._adding.done():
            self._adding.cancel()
        self.pending.clear()
        if self.partitions or self.offsets_added:
            deadline = self._deadline()
            cls = request_class(ApiKey.END_TXN)
            resp = await self._call_until_done(ApiKey.END_TXN, lambda v: cls(
                transactional_id=self.transactional_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, committed=commit), deadline,
                "commit_transaction" if commit else "abort_transaction")
            if resp.error_code:
                raise self._fatal_error(resp.error_code, "EndTxn")
        self.partitions.clear()
        self.offsets_added = False
        self.error = None
        self.state = TxnState.READY


def as_group_metadata(group: str | ConsumerGroupMetadata) -> ConsumerGroupMetadata:
    return ConsumerGroupMetadata(group) if isinstance(group, str) else group


__all__ = ["TransactionManager", "TxnState", "as_group_metadata", "KafkaError"]
