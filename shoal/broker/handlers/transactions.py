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

from shoal.broker.handlers.groups import commit_known_topics
from shoal.coordinator.group.responses import TXN_OFFSET_COMMIT
from shoal.coordinator.group.responses import error_response as group_error_response
from shoal.coordinator.txn.responses import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    INIT_PRODUCER_ID,
    LIST_TRANSACTIONS,
    for_version,
    init_producer_id_response,
)
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.describe_producers_response import DescribeProducersResponse
from shoal.protocol.generated.txn_offset_commit_response import TxnOffsetCommitResponse
from shoal.protocol.generated.write_txn_markers_response import WriteTxnMarkersResponse

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext

WRITE_TXN_MARKERS = 27
DESCRIBE_PRODUCERS = 61
OFFSETS_TOPIC = "__consumer_offsets"


def register(broker: Broker) -> None:
    txn = broker.txn_coordinators

    async def init_producer_id(ctx: RequestContext, req):
        if req.transactional_id is None:
            return init_producer_id_response(ctx.api_version, ErrorCode.NONE, broker.producer_ids.next_id(), 0)
        return await coordinator_api(INIT_PRODUCER_ID)(ctx, req)

    def coordinator_api(api_key: int):
        async def handle(ctx: RequestContext, req):
            return await txn.runtime(ctx.node.node_id).handle(
                api_key, ctx.api_version, req, client_id=ctx.client_id or "", client_host=ctx.client_host)
        return handle

    async def txn_offset_commit(ctx: RequestContext, req):
        return await commit_known_topics(broker, req, TxnOffsetCommitResponse,
                                         lambda known: txn_offset_commit_known(ctx, known))

    async def txn_offset_commit_known(ctx: RequestContext, req):
        partition = broker.coordinators.partition_for(req.group_id)
        code = txn.verify(req.transactional_id, req.producer_id, req.producer_epoch, OFFSETS_TOPIC, partition)
        if code != ErrorCode.NONE:
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.CONCURRENT_TRANSACTIONS):
                code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # retriable: the client tries again
            elif code == ErrorCode.PRODUCER_FENCED:
                code = ErrorCode.INVALID_PRODUCER_EPOCH
            return group_error_response(TXN_OFFSET_COMMIT, ctx.api_version, req,
                                        for_version(TXN_OFFSET_COMMIT, ctx.api_version, code))
        return await broker.coordinators.runtime(ctx.node.node_id).handle(
            TXN_OFFSET_COMMIT, ctx.api_version, req, client_id=ctx.client_id or "", client_host=ctx.client_host)

    async def write_txn_markers(ctx: RequestContext, req) -> WriteTxnMarkersResponse:
        results = []
        for m in req.markers:
            topics = []
            for t in m.topics:
                parts = []
                for p in t.partition_indexes:
                    info = broker.metadata.topics.get(t.name)
                    if info is None or not 0 <= p < info.num_partitions:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    elif broker.metadata.leader(t.name, p) != ctx.node.node_id:
                        code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    else:
                        code = await txn.write_marker(t.name, p, m.producer_id, m.producer_epoch,
                                                      m.coordinator_epoch, m.transaction_result)
                    parts.append(WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                        partition_index=p, error_code=int(code)))
                topics.append(WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
            results.append(WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
        return WriteTxnMarkersResponse(markers=results)

    async def describe_producers(ctx: RequestContext, req) -> DescribeProducersResponse:
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partition_indexes:
                info = broker.metadata.topics.get(t.name)
                if info is None or not 0 <= p < info.num_partitions:
                    parts.append(DescribeProducersResponse.PartitionResponse(
                        partition_index=p, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, active_producers=[]))
                    continue
                if broker.metadata.leader(t.name, p) != ctx.node.node_id:
                    parts.append(DescribeProducersResponse.PartitionResponse(
                        partition_index=p, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, active_producers=[]))
                    continue
                state = broker.partition_log(t.name, p).producer_state
                parts.append(DescribeProducersResponse.PartitionResponse(
                    partition_index=p, error_code=0, active_producers=[
                        DescribeProducersResponse.ProducerState(
                            producer_id=e.producer_id, producer_epoch=e.epoch, last_sequence=e.last_seq,
                            last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                            current_txn_start_offset=e.current_txn_first_offset)
                        for e in state.producers.values()]))
            topics.append(DescribeProducersResponse.TopicResponse(name=t.name, partitions=parts))
        return DescribeProducersResponse(throttle_time_ms=0, topics=topics)

    broker.apis.register(INIT_PRODUCER_ID, init_producer_id)
    broker.apis.register(ADD_PARTITIONS_TO_TXN, coordinator_api(ADD_PARTITIONS_TO_TXN))
    broker.apis.register(ADD_OFFSETS_TO_TXN, coordinator_api(ADD_OFFSETS_TO_TXN))
    broker.apis.register(END_TXN, coordinator_api(END_TXN), max_version=4)  # v5 is transaction version 2
    broker.apis.register(WRITE_TXN_MARKERS, write_txn_markers)
    broker.apis.register(TXN_OFFSET_COMMIT, txn_offset_commit)
    broker.apis.register(DESCRIBE_PRODUCERS, describe_producers)
    broker.apis.register(DESCRIBE_TRANSACTIONS, coordinator_api(DESCRIBE_TRANSACTIONS))
    broker.apis.register(LIST_TRANSACTIONS, coordinator_api(LIST_TRANSACTIONS))
