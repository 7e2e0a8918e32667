"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932).

Sent to the share group's coordinator, as Kafka's admin client does. A share group's "offset" per
partition is its share-partition start offset, kept by the share coordinator
(`__share_group_state`); describing also gives the lag (v1): the records from the start offset to
the high watermark not yet acknowledged or archived. Altering and deleting need an empty group:
the share partitions start over (at the given offset, or at `share.auto.offset.reset` once
deleted) and their in-flight state is dropped.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, filter_allowed
from shoal.coordinator.group.share.group import ShareGroup
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.alter_share_group_offsets_response import AlterShareGroupOffsetsResponse
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.delete_share_group_offsets_response import DeleteShareGroupOffsetsResponse
from shoal.protocol.generated.describe_share_group_offsets_response import DescribeShareGroupOffsetsResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.alter_share_group_offsets_request import AlterShareGroupOffsetsRequest
    from shoal.protocol.generated.delete_share_group_offsets_request import DeleteShareGroupOffsetsRequest
    from shoal.protocol.generated.describe_share_group_offsets_request import DescribeShareGroupOffsetsRequest

_D = DescribeShareGroupOffsetsResponse
_AL = AlterShareGroupOffsetsResponse
_DE = DeleteShareGroupOffsetsResponse
_GROUP, _TOPIC = ResourceType.GROUP, ResourceType.TOPIC
_ACKNOWLEDGED, _ARCHIVED = 2, 4
_ZERO_ID = uuid.UUID(int=0)
_UNKNOWN_PARTITION = "This server does not host this topic-partition."


def _share_group(ctx: RequestContext, group_id: str) -> tuple[ErrorCode, str | None, ShareGroup | None]:
    """The share group as its coordinator (this node) holds it: (error, message, group)."""
    coordinators = ctx.broker.coordinators
    partition = coordinators.partition_for(group_id)
    rt = coordinators.runtime(ctx.node.node_id)
    status = rt.status(partition)
    if status != ErrorCode.NONE:
        return status, None, None
    group = rt.shard(partition).groups.get(group_id)
    if group is None:
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
    if not isinstance(group, ShareGroup):
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
    return ErrorCode.NONE, None, group


def _empty_group(ctx: RequestContext, group_id: str,
                 operation: AclOperation) -> tuple[ErrorCode, str | None, ShareGroup | None]:
    """Altering or deleting offsets: the group's ``operation`` ACL, then the share group, empty."""
    if not allowed(ctx, operation, _GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, None
    code, message, group = _share_group(ctx, group_id)
    if code == ErrorCode.NONE and group is not None and not group.is_empty():
        return ErrorCode.NON_EMPTY_GROUP, "The group has active members.", None
    return code, message, group


async def _describe_partition(ctx: RequestContext, group_id: str, topic: str, index: int, version: int) -> Any:
    broker = ctx.broker
    info = broker.metadata.topics.get(topic)
    if info is None or not 0 <= index < info.num_partitions:
        return _D.DescribeShareGroupOffsetsResponsePartition(
            partition_index=index, start_offset=-1, leader_epoch=-1, lag=-1,
            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=_UNKNOWN_PARTITION)
    code, state = await broker.share_coordinators.read_state(group_id, info.topic_id, index)
    if code != ErrorCode.NONE:
        return _D.DescribeShareGroupOffsetsResponsePartition(partition_index=index, start_offset=-1,
                                                             leader_epoch=-1, lag=-1, error_code=code)
    live = broker.share.states().get((group_id, topic, index))
    hw = broker.partition_log(topic, index).high_watermark
    if live is not None:
        start, lag = live.start_offset, live.lag(hw)
    elif state is not None and state.start_offset >= 0:
        start = state.start_offset
        done = sum(b.last_offset - b.first_offset + 1 for b in state.state_batches
                   if b.delivery_state in (_ACKNOWLEDGED, _ARCHIVED) and b.first_offset >= start)
        lag = max(0, hw - start - done)
    else:
        start, lag = -1, -1
    return _D.DescribeShareGroupOffsetsResponsePartition(
        partition_index=index, start_offset=start,
        leader_epoch=state.leader_epoch if state is not None and start >= 0 else -1,
        lag=lag if version >= 1 else -1, error_code=ErrorCode.NONE)


@handles(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, min_version=0, max_version=1,
         access=(Access(_GROUP, AclOperation.DESCRIBE), Access(_TOPIC, AclOperation.DESCRIBE)))
async def describe_share_group_offsets(ctx: RequestContext,
                                       req: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse:
    out = []
    for g in req.groups:
        if not allowed(ctx, AclOperation.DESCRIBE, _GROUP, g.group_id):
            out.append(_D.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=[], error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        code, message, group = _share_group(ctx, g.group_id)
        if code != ErrorCode.NONE or group is None:
            out.append(_D.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=[], error_code=code,
                                                                 error_message=message))
            continue
        if g.topics is None:  # every topic whose share state the group initialized
            wanted = [(t.name, sorted(t.partitions)) for t in group.initialized.values()]
        else:
            wanted = [(t.topic_name, list(t.partitions)) for t in g.topics]
        may = filter_allowed(ctx, AclOperation.DESCRIBE, _TOPIC, [name for name, _ in wanted])
        topics = []
        for name, partitions in wanted:
            info = ctx.broker.metadata.topics.get(name)
            if name not in may:
                parts = [_D.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in partitions]
            else:
                parts = [await _describe_partition(ctx, g.group_id, name, p, ctx.api_version) for p in partitions]
            topics.append(_D.DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=info.topic_id if info is not None else _ZERO_ID, partitions=parts))
        out.append(_D.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=topics))
    return _D(groups=out)


@handles(ApiKey.ALTER_SHARE_GROUP_OFFSETS, min_version=0, max_version=0,
         access=(Access(_GROUP, AclOperation.READ), Access(_TOPIC, AclOperation.READ)))
async def alter_share_group_offsets(ctx: RequestContext,
                                    req: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    code, message, _ = _empty_group(ctx, req.group_id, AclOperation.READ)
    if code != ErrorCode.NONE:
        return _AL(error_code=code, error_message=message)
    may = filter_allowed(ctx, AclOperation.READ, _TOPIC, [t.topic_name for t in req.topics])
    topics = []
    for t in req.topics:
        info = ctx.broker.metadata.topics.get(t.topic_name)
        parts = []
        for p in t.partitions:
            if t.topic_name not in may:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < info.num_partitions:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.start_offset < 0:
                error = ErrorCode.INVALID_REQUEST
            else:
                error = await ctx.broker.share.reset(req.group_id, t.topic_name, p.partition_index, p.start_offset)
            parts.append(_AL.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index,
                                                                     error_code=error))
        topics.append(_AL.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=info.topic_id if info is not None else _ZERO_ID, partitions=parts))
    return _AL(error_code=ErrorCode.NONE, responses=topics)


@handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS, min_version=0, max_version=0,
         access=(Access(_GROUP, AclOperation.DELETE), Access(_TOPIC, AclOperation.READ)))
async def delete_share_group_offsets(ctx: RequestContext,
                                     req: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    code, message, group = _empty_group(ctx, req.group_id, AclOperation.DELETE)
    if code != ErrorCode.NONE:
        return _DE(error_code=code, error_message=message)
    assert group is not None
    may = filter_allowed(ctx, AclOperation.READ, _TOPIC, [t.topic_name for t in req.topics])
    out, deleted = [], set()
    for t in req.topics:
        info = ctx.broker.metadata.topics.get(t.topic_name)
        error, error_message = ErrorCode.NONE, None
        if t.topic_name not in may:
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is None:
            error, error_message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_PARTITION
        elif info.topic_id not in group.initialized:  # as Kafka: only a topic the group initialized
            error, error_message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."
        else:
            for p in range(info.num_partitions):
                code = await ctx.broker.share.reset(req.group_id, t.topic_name, p, None)
                error = code if error == ErrorCode.NONE else error
            deleted.add(info.topic_id)
        out.append(_DE.DeleteShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=info.topic_id if info is not None else _ZERO_ID, error_code=error,
            error_message=error_message))
    if deleted:  # the topics leave the group's ShareGroupStatePartitionMetadata
        coordinators = ctx.broker.coordinators
        await coordinators.runtime(ctx.node.node_id).run_event(
            coordinators.partition_for(req.group_id),
            lambda shard, now: shard.forget_share_topics(req.group_id, deleted, now))
    return _DE(error_code=ErrorCode.NONE, responses=out)

