"""ListOffsets (earliest, latest, max timestamp, by timestamp) and OffsetForLeaderEpoch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.clock import now_ms
from shoal.broker.handlers.fetch import leader_epoch_error
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.list_offsets_response import ListOffsetsResponse
from shoal.protocol.generated.offset_for_leader_epoch_response import OffsetForLeaderEpochResponse

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5

PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


def register(broker: Broker) -> None:
    metadata = broker.metadata

    def lookup(ctx: RequestContext, topic: str, p, read_committed: bool) -> PartitionResponse:
        index = p.partition_index
        info = metadata.topics.get(topic)
        if info is None or not 0 <= index < info.num_partitions:
            return PartitionResponse(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if metadata.leader(topic, index) != ctx.node.node_id:
            return PartitionResponse(partition_index=index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        epoch = metadata.leader_epoch(topic, index)
        code = leader_epoch_error(epoch, p.current_leader_epoch)
        if code != ErrorCode.NONE:
            return PartitionResponse(partition_index=index, error_code=code)
        plog = broker.partition_log(topic, index)
        ts = p.timestamp
        if ctx.api_version == 0:  # Kafka 3.x's v0: offsets of segment starts, by file time
            return PartitionResponse(partition_index=index, error_code=ErrorCode.NONE,
                                     old_style_offsets=plog.legacy_offsets_before(ts, p.max_num_offsets, now_ms()))
        timestamp, offset = -1, -1
        if ts in (LATEST, LATEST_TIERED):
            offset = plog.last_stable_offset if read_committed else plog.high_watermark
        elif ts in (EARLIEST, EARLIEST_LOCAL):
            offset = plog.log_start_offset
        else:  # a timestamp, or MAX_TIMESTAMP (-3), which storage resolves too
            found = plog.offset_for_timestamp(ts)
            # read_committed: an undecided record is not there yet
            if found is not None and not (read_committed and found[0] >= plog.last_stable_offset):
                offset, timestamp = found
        return PartitionResponse(partition_index=index, error_code=ErrorCode.NONE,
                                 timestamp=timestamp, offset=offset,
                                 leader_epoch=epoch if ctx.api_version >= 4 else -1)

    async def list_offsets(ctx: RequestContext, req) -> ListOffsetsResponse:
        topics = []
        read_committed = ctx.api_version >= 2 and req.isolation_level == 1
        for t in req.topics:
            topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(
                name=t.name, partitions=[lookup(ctx, t.name, p, read_committed) for p in t.partitions]))
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    async def offset_for_leader_epoch(ctx: RequestContext, req) -> OffsetForLeaderEpochResponse:
        # Storage is shared by every replica, so no log is ever truncated: the end
        # offset of any epoch a client asks about is the current log end.
        out = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                info = metadata.topics.get(t.topic)
                if info is None or not 0 <= p.partition < info.num_partitions:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif metadata.leader(t.topic, p.partition) != ctx.node.node_id:
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                else:
                    code = leader_epoch_error(metadata.leader_epoch(t.topic, p.partition),
                                              p.current_leader_epoch)
                if code != ErrorCode.NONE:
                    parts.append(OffsetForLeaderEpochResponse.EpochEndOffset(
                        error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1))
                    continue
                epoch = metadata.leader_epoch(t.topic, p.partition)
                plog = broker.partition_log(t.topic, p.partition)
                parts.append(OffsetForLeaderEpochResponse.EpochEndOffset(
                    error_code=ErrorCode.NONE, partition=p.partition,
                    leader_epoch=min(p.leader_epoch, epoch), end_offset=plog.log_end_offset))
            out.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
        return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=out)

    broker.apis.register(2, list_offsets)
    broker.apis.register(23, offset_for_leader_epoch)
