"""Idempotent and transactional producers: InitProducerId, the transaction APIs, markers, admin.

- InitProducerId without a transactional id hands out a fresh producer id
  (epoch 0), as Kafka does even when a KIP-360 client names its old one; with
  one it goes to the transaction coordinator.
- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and
  ListTransactions go to this node's transaction coordinator runtime.
- TxnOffsetCommit answers partitions of topics that do not exist UNKNOWN_TOPIC_OR_PARTITION
  (as OffsetCommit); the rest is first checked against the producer's open transaction
  (the offsets partition must have been added by AddOffsetsToTxn, KIP-890),
  then handed to the group coordinator.
- WriteTxnMarkers appends markers (the coordinator writes its own in process;
  admin clients use this API to abort a hanging transaction).
- DescribeProducers reports a partition's producer state.

EndTxn is advertised up to v4 and Produce up to v11: transaction version 2
(KIP-890 part 2, an epoch bump on every EndTxn) is not implemented, so
clients stay on transaction version 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, allowed_any, authorizer, filter_allowed
from shoal.broker.handlers.fetch import leader_error
from shoal.broker.handlers.groups import commit_known_topics, group_coordinator
from shoal.broker.metadata import INTERNAL_TOPICS, OFFSETS_TOPIC
from shoal.coordinator.group.responses import error_response as group_error_response
from shoal.coordinator.txn.responses import (
    add_partitions_topics,
    for_version,
    init_producer_id_response,
    requested_partitions,
)
from shoal.coordinator.txn.responses import error_response as txn_error_response
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.add_partitions_to_txn_response import AddPartitionsToTxnResponse
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_producers_response import DescribeProducersResponse
from shoal.protocol.generated.describe_transactions_request import DescribeTransactionsRequest
from shoal.protocol.generated.txn_offset_commit_response import TxnOffsetCommitResponse
from shoal.protocol.generated.write_txn_markers_response import WriteTxnMarkersResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.describe_producers_request import DescribeProducersRequest
    from shoal.protocol.generated.init_producer_id_request import InitProducerIdRequest
    from shoal.protocol.generated.txn_offset_commit_request import TxnOffsetCommitRequest
    from shoal.protocol.generated.write_txn_markers_request import WriteTxnMarkersRequest

_WRITE_TXN_ID = Access(ResourceType.TRANSACTIONAL_ID, AclOperation.WRITE)
_READ_GROUP = Access(ResourceType.GROUP, AclOperation.READ)
# Errors of the transaction check that a TxnOffsetCommit client retries as a coordinator loading.
_RETRIED_AS_LOADING = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                 ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.CONCURRENT_TRANSACTIONS})


# As Kafka's KafkaApis: the transactional id's WRITE, and each API's other resources.
@handles(ApiKey.ADD_PARTITIONS_TO_TXN, access=(_WRITE_TXN_ID, Access(ResourceType.TOPIC, AclOperation.WRITE)))
@handles(ApiKey.ADD_OFFSETS_TO_TXN, access=(_WRITE_TXN_ID, _READ_GROUP))
@handles(ApiKey.END_TXN, max_version=4, access=(_WRITE_TXN_ID,))  # v5 is transaction version 2
# ListTransactions lists the transactional ids the principal may DESCRIBE.
@handles(ApiKey.DESCRIBE_TRANSACTIONS, access=(Access(ResourceType.TRANSACTIONAL_ID, AclOperation.DESCRIBE),))
@handles(ApiKey.LIST_TRANSACTIONS, access=(Access(ResourceType.TRANSACTIONAL_ID, AclOperation.DESCRIBE),))
async def transaction_api(ctx: RequestContext, req):  # noqa: ANN001, ANN201
    """A transaction API, answered by this node's transaction coordinator runtime after Kafka's ACL checks."""
    if authorizer(ctx) is not None:
        denied = await _txn_denied(ctx, req)
        if denied is not None:
            return denied
    resp = await ctx.broker.txn_coordinators.runtime(ctx.node.node_id).handle(
        ctx.api_key, ctx.api_version, req, client_id=ctx.client_id or "", client_host=ctx.client_host)
    if authorizer(ctx) is not None and ctx.api_key == ApiKey.LIST_TRANSACTIONS:
        may = filter_allowed(ctx, AclOperation.DESCRIBE, _TXN_ID, (t.transactional_id for t in resp.transaction_states))
        resp.transaction_states = [t for t in resp.transaction_states if t.transactional_id in may]
    elif authorizer(ctx) is not None and ctx.api_key == ApiKey.DESCRIBE_TRANSACTIONS:
        for state in resp.transaction_states:  # the partitions of topics not describable are left out
            may = filter_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in state.topics))
            state.topics = [t for t in state.topics if t.topic in may]
    return resp


_TXN_ID = ResourceType.TRANSACTIONAL_ID


async def _txn_denied(ctx: RequestContext, req):  # noqa: ANN001, ANN202
    """Kafka's response when the principal may not make this transaction request; None when it may.
    (DescribeTransactions with some ids denied: the answer, the allowed ids described.)"""
    api_key, version = ApiKey(ctx.api_key), ctx.api_version
    if api_key in (ApiKey.INIT_PRODUCER_ID, ApiKey.END_TXN, ApiKey.ADD_OFFSETS_TO_TXN):
        if not allowed(ctx, AclOperation.WRITE, _TXN_ID, req.transactional_id):
            return txn_error_response(api_key, version, req, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if api_key == ApiKey.ADD_OFFSETS_TO_TXN and not allowed(ctx, AclOperation.READ, ResourceType.GROUP,
                                                                req.group_id):
            return txn_error_response(api_key, version, req, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    elif api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
        if version >= 4:  # brokers verifying a transaction: the cluster's CLUSTER_ACTION
            if not allowed(ctx, AclOperation.CLUSTER_ACTION):
                return txn_error_response(api_key, version, req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            return None
        if not allowed(ctx, AclOperation.WRITE, _TXN_ID, req.v3_and_below_transactional_id):
            return txn_error_response(api_key, version, req, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        parts = requested_partitions(req.v3_and_below_topics)
        may = filter_allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC,
                             (t for t, _ in parts if t not in INTERNAL_TOPICS))
        if any(t not in may and t not in INTERNAL_TOPICS for t, _ in parts):  # nothing is added
            return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=add_partitions_topics(
                {(t, p): ErrorCode.TOPIC_AUTHORIZATION_FAILED if t not in may and t not in INTERNAL_TOPICS
                 else ErrorCode.OPERATION_NOT_ATTEMPTED for t, p in parts}, version))
    elif api_key == ApiKey.DESCRIBE_TRANSACTIONS:
        ids = list(req.transactional_ids)
        may = filter_allowed(ctx, AclOperation.DESCRIBE, _TXN_ID, ids)
        if len(may) < len(set(ids)):
            return await _describe_some(ctx, req, ids, may)
    return None


async def _describe_some(ctx: RequestContext, req, ids: list[str], may: set[str]):  # noqa: ANN001, ANN202
    """DescribeTransactions with some ids not describable: those answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    req.transactional_ids = [i for i in ids if i in may]
    denied = txn_error_response(ApiKey.DESCRIBE_TRANSACTIONS, ctx.api_version,
                                DescribeTransactionsRequest(transactional_ids=[i for i in ids if i not in may]),
                                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not req.transactional_ids:
        return denied
    resp = await transaction_api(ctx, req)
    resp.transaction_states = list(denied.transaction_states) + list(resp.transaction_states)
    return resp


# Without a transactional id Kafka checks the cluster's IDEMPOTENT_WRITE (or any topic's WRITE) instead.
@handles(ApiKey.INIT_PRODUCER_ID, access=(_WRITE_TXN_ID,))
async def init_producer_id(ctx: RequestContext, req: InitProducerIdRequest):  # noqa: ANN201
    if req.transactional_id is None:
        # an idempotent producer: the cluster's IDEMPOTENT_WRITE, or WRITE on some topic (KIP-679)
        if not (allowed(ctx, AclOperation.IDEMPOTENT_WRITE) or allowed_any(ctx, AclOperation.WRITE, ResourceType.TOPIC)):
            return init_producer_id_response(ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return init_producer_id_response(ctx.api_version, ErrorCode.NONE, ctx.broker.producer_ids.next_id(), 0)
    return await transaction_api(ctx, req)


@handles(ApiKey.TXN_OFFSET_COMMIT, access=(_WRITE_TXN_ID, _READ_GROUP, Access(ResourceType.TOPIC, AclOperation.READ)))
async def txn_offset_commit(ctx: RequestContext, req: TxnOffsetCommitRequest):  # noqa: ANN201
    readable = None
    if authorizer(ctx) is not None:
        denied = ErrorCode.NONE
        if not allowed(ctx, AclOperation.WRITE, _TXN_ID, req.transactional_id):
            denied = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not allowed(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
            denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
        if denied != ErrorCode.NONE:
            return group_error_response(ApiKey.TXN_OFFSET_COMMIT, ctx.api_version, req, denied)
        readable = filter_allowed(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    return await commit_known_topics(ctx.broker, req, TxnOffsetCommitResponse,
                                     lambda known: _txn_offset_commit_known(ctx, known), readable)


async def _txn_offset_commit_known(ctx: RequestContext, req: TxnOffsetCommitRequest):  # noqa: ANN201
    broker = ctx.broker
    partition = broker.coordinators.partition_for(req.group_id)
    code = broker.txn_coordinators.verify(req.transactional_id, req.producer_id, req.producer_epoch,
                                          OFFSETS_TOPIC, partition)
    if code != ErrorCode.NONE:
        if code in _RETRIED_AS_LOADING:
            code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # retriable: the client tries again
        elif code == ErrorCode.PRODUCER_FENCED:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        return group_error_response(ApiKey.TXN_OFFSET_COMMIT, ctx.api_version, req,
                                    for_version(ApiKey.TXN_OFFSET_COMMIT, ctx.api_version, code))
    return await group_coordinator(ctx, req)


@handles(ApiKey.WRITE_TXN_MARKERS, access=(Access(ResourceType.CLUSTER, AclOperation.CLUSTER_ACTION),))
async def write_txn_markers(ctx: RequestContext, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    txn = ctx.broker.txn_coordinators
    may = allowed(ctx, AclOperation.CLUSTER_ACTION)  # denied: every partition fails
    results = []
    for m in req.markers:
        topics = []
        for t in m.topics:
            parts = []
            for p in t.partition_indexes:
                code = leader_error(ctx, t.name, p, -1) if may else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                if code == ErrorCode.NONE:
                    code = await txn.write_marker(t.name, p, m.producer_id, m.producer_epoch,
                                                  m.coordinator_epoch, m.transaction_result)
                parts.append(WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=int(code)))
            topics.append(WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        results.append(WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=results)


def _producers(ctx: RequestContext, topic: str, p: int) -> DescribeProducersResponse.PartitionResponse:
    code = leader_error(ctx, topic, p, -1)
    if code != ErrorCode.NONE:
        return DescribeProducersResponse.PartitionResponse(partition_index=p, error_code=code, active_producers=[])
    state = ctx.broker.partition_log(topic, p).producer_state
    return DescribeProducersResponse.PartitionResponse(partition_index=p, error_code=0, active_producers=[
        DescribeProducersResponse.ProducerState(
            producer_id=e.producer_id, producer_epoch=e.epoch, last_sequence=e.last_seq,
            last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
            current_txn_start_offset=e.current_txn_first_offset)
        for e in state.producers.values()])


@handles(ApiKey.DESCRIBE_PRODUCERS, access=(Access(ResourceType.TOPIC, AclOperation.READ),))
async def describe_producers(ctx: RequestContext, req: DescribeProducersRequest) -> DescribeProducersResponse:
    may = filter_allowed(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    return DescribeProducersResponse(throttle_time_ms=0, topics=[
        DescribeProducersResponse.TopicResponse(name=t.name, partitions=[
            _producers(ctx, t.name, p) if t.name in may else DescribeProducersResponse.PartitionResponse(
                partition_index=p, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, active_producers=[])
            for p in t.partition_indexes])
        for t in req.topics])
