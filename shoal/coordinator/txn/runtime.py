"""TransactionCoordinatorRuntime: the transaction coordinator's routing and marker writing.

Requests go to the shard of the transactional id's `__transaction_state`
partition (batched AddPartitionsToTxn and DescribeTransactions are split per
partition; ListTransactions asks every owned partition). After a result's
records are durable, its marker jobs are driven here: each marker goes to its
partition through `write_marker` (supplied by the broker), retried while the
partition has no leader, and once all are written the shard completes the
transaction.

Each load of a partition takes the next coordinator epoch, persisted beside
the partition's log, so the epoch only grows across fail-overs and restarts:
partitions refuse markers from an older coordinator epoch
(TRANSACTION_COORDINATOR_FENCED).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from shoal import fileio
from shoal.clock import now_ms
from shoal.coordinator.runtime import CoordinatorRuntime, Partition
from shoal.coordinator.txn.responses import (
    TXN_API_KEYS,
    add_partitions_topics,
    error_response,
    requested_partitions,
)
from shoal.coordinator.txn.shard import MarkerJob, TransactionCoordinatorShard, TxnConfig
from shoal.coordinator.txn.state import STATE_BY_NAME
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.add_partitions_to_txn_response import AddPartitionsToTxnResponse
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_transactions_response import DescribeTransactionsResponse
from shoal.protocol.generated.list_transactions_response import ListTransactionsResponse
from shoal.storage.config import LogConfig

log = logging.getLogger(__name__)

TRANSACTION_TOPIC = "__transaction_state"
# Kafka's transaction.state.log.segment.bytes default; the topic is compacted.
TXN_LOG_CONFIG = LogConfig(cleanup_policy="compact", segment_bytes=104_857_600)
COORDINATOR_EPOCH_FILE = "coordinator-epoch"

# (topic, partition, producer id, producer epoch, coordinator epoch, commit) -> error
MarkerWriter = Callable[[str, int, int, int, int, bool], Awaitable[ErrorCode]]

# Marker results after which a partition needs nothing more from this coordinator.
_MARKER_DONE = {ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                # a newer producer epoch or coordinator has moved past this transaction
                ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}


class TransactionCoordinatorRuntime(CoordinatorRuntime[TransactionCoordinatorShard]):
    """The transaction coordinator of one broker node."""

    topic = TRANSACTION_TOPIC
    name = "transaction coordinator"

    def __init__(self, node_id: int, log_manager: Any, config: TxnConfig | None = None, *,
                 next_producer_id: Callable[[], int], offsets_partition: Callable[[str], int],
                 write_marker: MarkerWriter, partition_exists: Callable[[str, int], bool] = lambda t, p: True,
                 log_config: LogConfig = TXN_LOG_CONFIG, clock_ms: Callable[[], int] = now_ms,
                 partition_for: Callable[[str], int] | None = None) -> None:
        super().__init__(node_id, log_manager, log_config=log_config, clock_ms=clock_ms, partition_for=partition_for)
        self.config = config or TxnConfig()
        self._next_producer_id = next_producer_id
        self._offsets_partition = offsets_partition
        self._partition_exists = partition_exists
        self._write_marker = write_marker
        self._marker_tasks: set[asyncio.Task] = set()

    @property
    def num_partitions(self) -> int:
        return self.config.transaction_state_log_num_partitions

    # ================================================================ the generic runtime's hooks
    def new_shard(self, partition: int, plog: Any) -> TransactionCoordinatorShard:
        return TransactionCoordinatorShard(
            partition, self.config, self._next_coordinator_epoch(plog.dir),
            next_producer_id=self._next_producer_id, offsets_partition=self._offsets_partition,
            partition_exists=self._partition_exists)

    @staticmethod
    def _next_coordinator_epoch(directory: Any) -> int:
        path = directory / COORDINATOR_EPOCH_FILE
        try:
            epoch = int(path.read_text().strip()) + 1
        except (FileNotFoundError, ValueError):
            epoch = 0
        fileio.replace_file(path, f"{epoch}\n".encode(), fsync=True)
        return epoch

    def error_response(self, api_key: ApiKey, api_version: int, request: Any, error: ErrorCode) -> Any:
        return error_response(api_key, api_version, request, error)

    def after_apply(self, partition: int, part: Partition[TransactionCoordinatorShard], result: Any) -> None:
        for job in result.markers:
            task = asyncio.get_running_loop().create_task(self._drive_markers(partition, part, job))
            self._marker_tasks.add(task)
            task.add_done_callback(self._marker_tasks.discard)

    # ================================================================ requests
    async def handle(self, api_key: ApiKey, api_version: int, request: Any, *, client_id: str = "",
                     client_host: str = "") -> Any:
        if api_key not in TXN_API_KEYS:
            raise ValueError(f"api key {api_key} is not a transaction coordinator API")
        if api_key == ApiKey.LIST_TRANSACTIONS:
            return await self._list(api_version, request, client_id, client_host)
        if api_key == ApiKey.DESCRIBE_TRANSACTIONS:
            return await self._describe(api_version, request, client_id, client_host)
        if api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
            if api_version >= 4:
                return await self._add_partitions_batched(api_version, request, client_id, client_host)
            tid = request.v3_and_below_transactional_id
        else:
            tid = request.transactional_id
        return await self.run(self.partition_for(tid or ""), api_key, api_version, request, client_id, client_host)

    async def _add_partitions_batched(self, api_version: int, request: Any, client_id: str,
                                      client_host: str) -> Any:
        by_partition: dict[int, list[Any]] = {}
        for t in request.transactions:
            by_partition.setdefault(self.partition_for(t.transactional_id), []).append(t)
        results: dict[str, Any] = {}

        async def one(partition: int, txns: list[Any]) -> None:
            sub = type(request)(transactions=txns)
            resp = await self.run(partition, ApiKey.ADD_PARTITIONS_TO_TXN, api_version, sub, client_id, client_host)
            if resp.error_code:  # the whole partition failed: every partition of those transactions did
                for t in txns:
                    results[t.transactional_id] = AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                        transactional_id=t.transactional_id, topic_results=add_partitions_topics(
                            dict.fromkeys(requested_partitions(t.topics), ErrorCode(resp.error_code)),
                            api_version))
            for r in resp.results_by_transaction:
                results[r.transactional_id] = r

        await asyncio.gather(*(one(p, ts) for p, ts in by_partition.items()))
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=[
            results[t.transactional_id] for t in request.transactions if t.transactional_id in results])

    async def _describe(self, api_version: int, request: Any, client_id: str, client_host: str) -> Any:
        ids = list(request.transactional_ids)

        async def ask(partition: int, idxs: list[int]) -> list[Any]:
            sub = type(request)(transactional_ids=[ids[i] for i in idxs])
            resp = await self.run(partition, ApiKey.DESCRIBE_TRANSACTIONS, api_version, sub, client_id, client_host)
            return resp.transaction_states

        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=await self.scatter(ids, ask))

    async def _list(self, api_version: int, request: Any, client_id: str, client_host: str) -> Any:
        error = ErrorCode.NONE
        out: list[Any] = []
        unknown: list[str] = []
        for partition in sorted(self._partitions):
            if self.status(partition) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                continue
            resp = await self.run(partition, ApiKey.LIST_TRANSACTIONS, api_version, request, client_id, client_host)
            if resp.error_code:
                error = ErrorCode(resp.error_code)
                continue
            out.extend(resp.transaction_states)
            unknown = list(resp.unknown_state_filters)
        if not self._partitions:
            unknown = [s for s in request.state_filters if s not in STATE_BY_NAME]
        return ListTransactionsResponse(throttle_time_ms=0, error_code=int(error), unknown_state_filters=unknown,
                                        transaction_states=out)

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
               partition: int) -> ErrorCode:
        """KIP-890 part 1, read-only: is (topic, partition) in this producer's open transaction?"""
        p = self.partition_for(transactional_id)
        status = self.status(p)
        if status != ErrorCode.NONE:
            return status
        shard = self.shard(p)
        assert shard is not None  # status() said it is loaded
        return shard.verify(transactional_id, producer_id, producer_epoch, (topic, partition))

    # ================================================================ markers
    async def _drive_markers(self, partition: int, part: Partition[TransactionCoordinatorShard], job: MarkerJob) -> None:
        remaining = set(job.partitions)
        backoff = 0.01
        try:
            while remaining:
                if self._partitions.get(partition) is not part:
                    return  # moved away: the next coordinator finishes the transaction on load
                for topic, p in sorted(remaining):
                    code = await self._write_marker(topic, p, job.producer_id, job.producer_epoch,
                                                    job.coordinator_epoch, job.commit)
                    if code in _MARKER_DONE:
                        if code != ErrorCode.NONE:
                            log.info("marker for %s (producer %d) on %s-%d: %s; nothing more to write there",
                                     job.transactional_id, job.producer_id, topic, p, code.name)
                        remaining.discard((topic, p))
                if remaining:
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
            await self.run_event(partition, lambda shard, now: shard.markers_written(job, now), part)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: writing markers of %s failed", self.name, job.transactional_id)

    async def close(self) -> None:
        for task in list(self._marker_tasks):
            task.cancel()
        await super().close()
