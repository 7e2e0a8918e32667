"""Responses of the transaction coordinator's APIs, and error codes as each version knows them.

Newer error codes reach old clients as the code they understand: before
InitProducerId v4 and AddPartitionsToTxn / AddOffsetsToTxn / EndTxn v2,
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH (which aiokafka and librdkafka map
to "fenced"); TRANSACTION_ABORTABLE exists only from the versions that added
it, else INVALID_TXN_STATE.
"""

from __future__ import annotations

from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from shoal.protocol.generated.add_partitions_to_txn_response import AddPartitionsToTxnResponse
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_transactions_response import DescribeTransactionsResponse
from shoal.protocol.generated.end_txn_response import EndTxnResponse
from shoal.protocol.generated.init_producer_id_response import InitProducerIdResponse
from shoal.protocol.generated.list_transactions_response import ListTransactionsResponse

K = ApiKey
TXN_API_KEYS = frozenset({K.INIT_PRODUCER_ID, K.ADD_PARTITIONS_TO_TXN, K.ADD_OFFSETS_TO_TXN, K.END_TXN,
                          K.DESCRIBE_TRANSACTIONS, K.LIST_TRANSACTIONS})

# The first version of each API that knows PRODUCER_FENCED / TRANSACTION_ABORTABLE.
_FENCED_SINCE: dict[int, int] = {K.INIT_PRODUCER_ID: 4, K.ADD_PARTITIONS_TO_TXN: 2, K.ADD_OFFSETS_TO_TXN: 2, K.END_TXN: 2}
_ABORTABLE_SINCE: dict[int, int] = {K.INIT_PRODUCER_ID: 5, K.ADD_PARTITIONS_TO_TXN: 5, K.ADD_OFFSETS_TO_TXN: 4, K.END_TXN: 4,
                    K.TXN_OFFSET_COMMIT: 4, K.PRODUCE: 11}


def for_version(api_key: int, api_version: int, error: ErrorCode) -> ErrorCode:
    """`error` as a client speaking `api_version` of `api_key` knows it."""
    if error == ErrorCode.PRODUCER_FENCED and api_version < _FENCED_SINCE.get(api_key, 0):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and api_version < _ABORTABLE_SINCE.get(api_key, 0):
        return ErrorCode.INVALID_TXN_STATE
    return error


def init_producer_id_response(api_version: int, error: ErrorCode, producer_id: int = -1,
                              producer_epoch: int = -1) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0,
                                  error_code=int(for_version(K.INIT_PRODUCER_ID, api_version, error)),
                                  producer_id=producer_id, producer_epoch=producer_epoch)


def add_partitions_topics(results: dict[tuple[str, int], ErrorCode], api_version: int,
                          ) -> list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult]] = {}
    for (topic, partition), error in results.items():
        by_topic.setdefault(topic, []).append(AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
            partition_index=partition,
            partition_error_code=int(for_version(K.ADD_PARTITIONS_TO_TXN, api_version, error))))
    return [AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps)
            for t, ps in by_topic.items()]


def requested_partitions(topics: Any) -> list[tuple[str, int]]:
    return [(t.name, p) for t in topics for p in t.partitions]


def error_response(api_key: ApiKey, api_version: int, request: Any, error: ErrorCode) -> Any:
    """One error for a whole request (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS ...)."""
    if api_key == K.INIT_PRODUCER_ID:
        return init_producer_id_response(api_version, error)
    if api_key == K.ADD_PARTITIONS_TO_TXN:
        if api_version >= 4:
            return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=int(error), results_by_transaction=[])
        parts = requested_partitions(request.v3_and_below_topics)
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0, results_by_topic_v3_and_below=add_partitions_topics(
                dict.fromkeys(parts, error), api_version))
    if api_key == K.ADD_OFFSETS_TO_TXN:
        return AddOffsetsToTxnResponse(throttle_time_ms=0,
                                       error_code=int(for_version(K.ADD_OFFSETS_TO_TXN, api_version, error)))
    if api_key == K.END_TXN:
        return EndTxnResponse(throttle_time_ms=0, error_code=int(for_version(K.END_TXN, api_version, error)))
    if api_key == K.DESCRIBE_TRANSACTIONS:
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=[
            describe_error(tid, error) for tid in request.transactional_ids])
    if api_key == K.LIST_TRANSACTIONS:
        return ListTransactionsResponse(throttle_time_ms=0, error_code=int(error), unknown_state_filters=[],
                                        transaction_states=[])
    raise ValueError(f"api key {api_key} is not a transaction coordinator API")


def describe_error(transactional_id: str, error: ErrorCode) -> DescribeTransactionsResponse.TransactionState:
    return DescribeTransactionsResponse.TransactionState(
        error_code=int(error), transactional_id=transactional_id, transaction_state="",
        transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[])
