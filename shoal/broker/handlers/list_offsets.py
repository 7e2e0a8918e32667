"""ListOffsets (earliest, latest, max timestamp, by timestamp) and OffsetForLeaderEpoch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, filter_allowed
from shoal.broker.handlers.fetch import leader_error
from shoal.clock import now_ms
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.list_offsets_response import ListOffsetsResponse
from shoal.protocol.generated.offset_for_leader_epoch_response import OffsetForLeaderEpochResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.list_offsets_request import ListOffsetsRequest
    from shoal.protocol.generated.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest
    from shoal.storage import PartitionLog

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
# the first ListOffsets version that may ask for each special timestamp (Kafka's ReplicaManager table);
# any other negative timestamp, or one asked at an older version, is UNSUPPORTED_VERSION
_SPECIAL_SINCE = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}

PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset
_DESCRIBE_TOPIC = (Access(ResourceType.TOPIC, AclOperation.DESCRIBE),)


def _offset_for(plog: PartitionLog, ts: int, read_committed: bool) -> tuple[int, int]:
    """(timestamp, offset) that ListOffsets answers for ``ts`` (a timestamp or a special value)."""
    if ts == LATEST:
        return -1, plog.last_stable_offset if read_committed else plog.high_watermark
    if ts == LATEST_TIERED:  # no tiered storage: nothing is tiered, as Kafka without remote storage answers
        return -1, -1
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return -1, plog.log_start_offset
    found = plog.offset_for_timestamp(ts)  # a timestamp, or MAX_TIMESTAMP (-3), which storage resolves too
    # read_committed: an undecided record is not there yet
    if found is not None and not (read_committed and found[0] >= plog.last_stable_offset):
        offset, timestamp = found
        return timestamp, offset
    return -1, -1


def lookup(ctx: RequestContext, topic: str, p, read_committed: bool) -> PartitionResponse:  # noqa: ANN001
    index = p.partition_index
    if ctx.api_version >= 1 and p.timestamp < 0 and ctx.api_version < _SPECIAL_SINCE.get(p.timestamp, 1 << 15):
        # checked first, as Kafka does: -6 (earliest pending upload) needs v11, which shoal does not speak
        return PartitionResponse(partition_index=index, error_code=ErrorCode.UNSUPPORTED_VERSION, timestamp=-1,
                                 offset=-1)
    code = leader_error(ctx, topic, index, p.current_leader_epoch)
    if code != ErrorCode.NONE:
        return PartitionResponse(partition_index=index, error_code=code)
    epoch = ctx.broker.metadata.leader_epoch(topic, index)
    plog = ctx.broker.partition_log(topic, index)
    if ctx.api_version == 0:  # Kafka 3.x's v0: offsets of segment starts, by file time
        return PartitionResponse(partition_index=index, error_code=ErrorCode.NONE,
                                 old_style_offsets=plog.legacy_offsets_before(p.timestamp, p.max_num_offsets,
                                                                              now_ms()))
    timestamp, offset = _offset_for(plog, p.timestamp, read_committed)
    return PartitionResponse(partition_index=index, error_code=ErrorCode.NONE, timestamp=timestamp, offset=offset,
                             leader_epoch=epoch if ctx.api_version >= 4 else -1)


@handles(ApiKey.LIST_OFFSETS, access=_DESCRIBE_TOPIC)
async def list_offsets(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    read_committed = ctx.api_version >= 2 and req.isolation_level == 1
    # each topic's DESCRIBE, checked before its existence
    may = filter_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in req.topics))
    return ListOffsetsResponse(throttle_time_ms=0, topics=[
        ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=[
            lookup(ctx, t.name, p, read_committed) if t.name in may
            else PartitionResponse(partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for p in t.partitions])
        for t in req.topics])


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH, access=_DESCRIBE_TOPIC)
async def offset_for_leader_epoch(ctx: RequestContext, req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    # Storage is shared by every replica, so no log is ever truncated: the end
    # offset of any epoch a client asks about is the current log end.
    # the cluster's CLUSTER_ACTION (a follower), else each topic's DESCRIBE
    may = {t.topic for t in req.topics} if allowed(ctx, AclOperation.CLUSTER_ACTION) else filter_allowed(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in req.topics))
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if t.topic not in may:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                code = leader_error(ctx, t.topic, p.partition, p.current_leader_epoch)
            if code != ErrorCode.NONE:
                parts.append(EpochEndOffset(error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1))
                continue
            epoch = ctx.broker.metadata.leader_epoch(t.topic, p.partition)
            plog = ctx.broker.partition_log(t.topic, p.partition)
            parts.append(EpochEndOffset(error_code=ErrorCode.NONE, partition=p.partition,
                                        leader_epoch=min(p.leader_epoch, epoch), end_offset=plog.log_end_offset))
        out.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=out)
