"""The producer's sender: the background loop that drains ready batches from the accumulator, sends
them to their partition leaders in Produce requests, and completes, retries or fails each batch by the
answer (with the idempotent producer's sequence bookkeeping). :class:`ProducerSender` is a base of
:class:`~shoal.client.producer.AIOProducer`, which holds the configuration, the accumulator and the
producer id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from shoal.protocol.errors import ErrorCode, is_retriable
from shoal.protocol.generated.api_keys import ApiKey
from shoal.waits import wait_event

from .accumulator import ProducerBatch, RecordAccumulator
from .cluster import KafkaClient, now_ms
from .errors import KafkaConnectionError, KafkaTimeoutError, TransactionAbortedError, error_for
from .protocol import request_class
from .structs import TopicPartition, by_topic
from .transactions import TransactionManager

log = logging.getLogger(__name__)

# Sequence errors: the broker lost track of this producer (KIP-360: the epoch must be bumped).
_SEQUENCE_ERRORS = {ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID,
                    ErrorCode.INVALID_PRODUCER_EPOCH}

_METADATA_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.KAFKA_STORAGE_ERROR,
}


class ProducerSender:
    """The sender half of `AIOProducer` (which sets these attributes and provides `_ids`,
    `_init_producer_id` and `_wake`)."""

    config: dict[str, Any]
    client: KafkaClient
    accumulator: RecordAccumulator | None
    txn: TransactionManager | None
    partitioner: Any
    acks: int
    compression: int
    idempotent: bool
    transactional_id: str | None
    sequences: dict[TopicPartition, int]
    _acked: dict[TopicPartition, int]
    _pid_reset_needed: bool
    _wakeup: asyncio.Event | None
    _in_flight: dict[int, int]
    _in_flight_tasks: set[asyncio.Task]
    _muted: set[TopicPartition]
    _closed: bool
    _node_write_locks: dict[int, asyncio.Lock]

    async def _run_sender(self) -> None:
        assert self.accumulator is not None and self._wakeup is not None
        acc = self.accumulator
        txn = self.txn
        while True:
            now = now_ms()
            self._expire(now)
            if txn is not None and txn.has_error:
                self._fail_queued(txn.error or TransactionAbortedError("the transaction failed"))
            if self._pid_reset_needed:
                if any(self._in_flight.values()):
                    await self._wait_for_wakeup(0.005)
                    continue
                await self._reset_producer_id()
            # Clear before looking, so that an append from another thread after the look wakes us.
            self._wakeup.clear()
            by_node, need_meta, need_add = self._drain_ready(now)
            for node, batches in by_node.items():
                self._dispatch(node, batches)
            if need_add and txn is not None and not txn.has_error:
                for tp in need_add:
                    txn.need_partition(tp)
            if need_meta:
                with contextlib.suppress(Exception):
                    await self.client.refresh_metadata()
                await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
                continue
            with acc.lock:
                deadline = acc.next_deadline(now_ms())
            timeout = None if deadline is None else max(0.0, (deadline - now_ms()) / 1000)
            if deadline is not None and timeout == 0.0 and not by_node:
                timeout = 0.001  # ready but blocked on in-flight: wait for a response or a tick
            await self._wait_for_wakeup(timeout)

    def _drain_ready(self, now: int) -> tuple[dict[int, list[ProducerBatch]], bool, list[TopicPartition]]:
        """Pop the batches that can be sent now, by leader node; also whether some partition has no
        known leader (metadata needed) and the partitions still to be added to the transaction."""
        assert self.accumulator is not None
        acc = self.accumulator
        max_in_flight = self.config["max.in.flight.requests.per.connection"]
        txn = self.txn
        by_node: dict[int, list[ProducerBatch]] = {}
        need_meta = False
        need_add: list[TopicPartition] = []
        with acc.lock:
            for tp in list(acc.ready(now, self._closed)):
                if tp in self._muted:
                    continue
                if txn is not None and tp not in txn.partitions:
                    need_add.append(tp)  # its batches wait until it joins the transaction
                    continue
                leader = self.client.cluster.leader_for(tp.topic, tp.partition)
                if leader < 0:
                    need_meta = True
                    continue
                if self._in_flight.get(leader, 0) >= max_in_flight:
                    continue
                b = acc.pop(tp)
                if b.sticky_topic is not None:
                    self.partitioner.on_new_batch(b.sticky_topic[0], b.sticky_topic[1], tp.partition)
                by_node.setdefault(leader, []).append(b)
        return by_node, need_meta, need_add

    async def _wait_for_wakeup(self, timeout: float | None) -> None:
        assert self._wakeup is not None
        await wait_event(self._wakeup, timeout)

    def _fail_queued(self, exc: BaseException) -> None:
        """Fail every batch not sent yet (a transaction in error or aborted, or the producer closing)."""
        assert self.accumulator is not None
        with self.accumulator.lock:
            queued = list(self.accumulator.all_batches())
            self.accumulator.batches.clear()
            for b in queued:
                self.accumulator.release(b)
        for b in queued:
            b.fail(exc)

    async def _reset_producer_id(self) -> None:
        """After a sequence error: a new producer id, sequences from 0, unsent retries re-stamped."""
        assert self.accumulator is not None
        self._pid_reset_needed = False
        try:
            await self._init_producer_id()
        except Exception as e:  # noqa: BLE001 - fail what waits rather than the sender
            self._fail_queued(e)
            return
        with self.accumulator.lock:
            for b in self.accumulator.all_batches():
                if b.payload is not None:
                    b.payload = None
                    b.base_sequence = -1

    def _expire(self, now: int) -> None:
        assert self.accumulator is not None
        limit = self.config["delivery.timeout.ms"]
        expired: list[ProducerBatch] = []
        with self.accumulator.lock:
            for q in self.accumulator.batches.values():
                while q and now - q[0].created_ms > limit:
                    b = q.popleft()
                    self.accumulator.release(b)
                    expired.append(b)
        for b in expired:
            b.fail(KafkaTimeoutError(f"expiring {b.count} record(s) for {b.tp}: delivery.timeout.ms elapsed"))

    def _dispatch(self, node: int, batches: list[ProducerBatch]) -> None:
        pid, epoch = self._ids()
        for b in batches:
            if b.payload is None:
                # Stamp producer id/epoch/sequence once, before the first send: retries resend the same bytes.
                b.producer_id, b.producer_epoch = pid, epoch
                b.is_transactional = self.txn is not None
                if pid >= 0:
                    b.base_sequence = self.sequences.get(b.tp, 0)
                    self.sequences[b.tp] = (b.base_sequence + b.count) & 0x7FFFFFFF
            b.encode(self.compression)
            if self.config["max.in.flight.requests.per.connection"] == 1:
                self._muted.add(b.tp)
        self._in_flight[node] = self._in_flight.get(node, 0) + 1
        task = asyncio.get_running_loop().create_task(self._produce(node, batches))
        task.batches = batches  # type: ignore[attr-defined]
        self._in_flight_tasks.add(task)
        task.add_done_callback(self._in_flight_tasks.discard)

    async def _produce(self, node: int, batches: list[ProducerBatch]) -> None:
        assert self.accumulator is not None and self._wakeup is not None
        cls = request_class(ApiKey.PRODUCE)
        topics = by_topic((b.tp, cls.PartitionProduceData(index=b.tp.partition, records=b.payload))
                          for b in batches)
        req = cls(transactional_id=self.transactional_id, acks=self.acks, timeout_ms=self.config["request.timeout.ms"],
                  topic_data=[cls.TopicProduceData(name=t, partition_data=ps) for t, ps in topics.items()])
        try:
            # Requests to a node must hit the wire in the order their batches were drained,
            # or a partition's batches could be appended out of order. Waiting for the
            # connection can suspend, so writes are ordered by a FIFO lock taken before it.
            async with self._write_order(node):
                conn = await self.client.conn(node)
                fut = conn.send_nowait(req, expect_response=self.acks != 0)
            if fut is None:  # acks=0: no response will come
                await conn.drain()
                for b in batches:
                    self._done(b)
                    b.complete(-1, -1)
                return
            resp = await conn.wait_response(fut, req)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
            log.debug("produce to node %s failed: %r", node, e)
            for b in batches:
                self._retry_or_fail(b, e, refresh=True)
            return
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - fail the records rather than the sender
            for b in batches:
                self._batch_failed(b, e, getattr(e, "code", None))
            return
        finally:
            self._in_flight[node] -= 1
            self._wakeup.set()
        self._handle_produce_response(resp, batches)

    def _handle_produce_response(self, resp: Any, batches: list[ProducerBatch]) -> None:
        """Complete, retry or fail each batch of a Produce request by its partition's answer."""
        index = {b.tp: b for b in batches}
        for t in resp.responses:
            for p in t.partition_responses:
                b = index.pop(TopicPartition(t.name, p.index), None)
                if b is None:
                    continue
                if p.error_code == 0 or p.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                    self._done(b)
                    if b.base_sequence >= 0 and b.producer_id == self._ids()[0]:
                        self._acked[b.tp] = b.base_sequence + b.count - 1
                    b.complete(p.base_offset, p.log_append_time_ms)
                elif p.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and self._earlier_unacked(b):
                    # An earlier batch of the partition is still being retried and reached the broker
                    # after this one (Java's canRetry): send this one again after it.
                    self._retry_or_fail(b, error_for(p.error_code), refresh=False)
                elif is_retriable(p.error_code):
                    self._retry_or_fail(b, error_for(p.error_code), refresh=p.error_code in _METADATA_ERRORS)
                else:
                    self._batch_failed(b, error_for(p.error_code, f"produce to {b.tp}"), p.error_code)
        for b in index.values():
            self._done(b)
            b.fail(error_for(ErrorCode.UNKNOWN_SERVER_ERROR, f"no response for {b.tp}"))

    def _earlier_unacked(self, b: ProducerBatch) -> bool:
        acked = self._acked.get(b.tp, -1)
        return b.producer_id == self._ids()[0] and b.base_sequence > acked + 1

    def _batch_failed(self, b: ProducerBatch, exc: BaseException, code: int | None) -> None:
        """Fail ``b`` for good. Its sequence is now a hole the broker will never fill, so a
        transaction must be aborted (with an epoch bump) and an idempotent producer needs a new id."""
        self._done(b)
        b.fail(exc)
        if self.txn is not None:
            self.txn.batch_error(code if code is not None else ErrorCode.UNKNOWN_SERVER_ERROR, exc)
            if code not in _SEQUENCE_ERRORS and code not in (ErrorCode.PRODUCER_FENCED,
                                                              ErrorCode.INVALID_PRODUCER_EPOCH):
                self.txn.needs_epoch_bump = True  # the batch may still land: fence it (KAFKA-14053)
        elif self.idempotent:
            self._pid_reset_needed = True
            self._wake()

    def _write_order(self, node: int) -> asyncio.Lock:
        lock = self._node_write_locks.get(node)
        if lock is None:
            lock = self._node_write_locks[node] = asyncio.Lock()
        return lock

    def _done(self, b: ProducerBatch) -> None:
        assert self.accumulator is not None
        with self.accumulator.lock:
            self.accumulator.release(b)
        self._muted.discard(b.tp)

    def _retry_or_fail(self, b: ProducerBatch, exc: BaseException, *, refresh: bool) -> None:
        assert self.accumulator is not None
        b.attempts += 1
        now = now_ms()
        if b.attempts > self.config["retries"] or now - b.created_ms > self.config["delivery.timeout.ms"]:
            self._batch_failed(b, exc, getattr(exc, "code", None))
            return
        b.retry_after_ms = now + self.config["retry.backoff.ms"]
        self._muted.discard(b.tp)
        with self.accumulator.lock:
            self.accumulator.reenqueue(b)
        if refresh:
            self.client.cluster.topics.pop(b.tp.topic, None)
            self.client.add_topics([b.tp.topic])
