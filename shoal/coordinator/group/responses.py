"""Building responses of the group APIs, including whole-request error responses.

`error_response` answers a request with one error in every place Kafka puts
it for that API and version (used for NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from shoal.protocol.generated.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse
from shoal.protocol.generated.delete_groups_response import DeleteGroupsResponse
from shoal.protocol.generated.describe_groups_response import DescribeGroupsResponse
from shoal.protocol.generated.heartbeat_response import HeartbeatResponse
from shoal.protocol.generated.join_group_response import JoinGroupResponse
from shoal.protocol.generated.leave_group_response import LeaveGroupResponse
from shoal.protocol.generated.list_groups_response import ListGroupsResponse
from shoal.protocol.generated.offset_commit_response import OffsetCommitResponse
from shoal.protocol.generated.offset_delete_response import OffsetDeleteResponse
from shoal.protocol.generated.offset_fetch_response import OffsetFetchResponse
from shoal.protocol.generated.share_group_describe_response import ShareGroupDescribeResponse
from shoal.protocol.generated.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from shoal.protocol.generated.sync_group_response import SyncGroupResponse
from shoal.protocol.generated.txn_offset_commit_response import TxnOffsetCommitResponse

# The group shard's handlers (GroupCoordinatorShard.handlers) are the same set.
GROUP_API_KEYS: frozenset[ApiKey] = frozenset({
    ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.JOIN_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
    ApiKey.SYNC_GROUP, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS, ApiKey.TXN_OFFSET_COMMIT,
    ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE,
    ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE})

UNKNOWN_GENERATION_ID = -1
INVALID_OFFSET = -1


def join_response(
    api_version: int,
    *,
    error: int,
    member_id: str = "",
    generation_id: int = UNKNOWN_GENERATION_ID,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    leader: str = "",
    skip_assignment: bool = False,
    members: list[tuple[str, str | None, bytes]] | None = None,
) -> JoinGroupResponse:
    """A JoinGroupResponse; protocol name is "" rather than null before v7 (not nullable there)."""
    if protocol_name is None and api_version < 7:
        protocol_name = ""
    return JoinGroupResponse(
        error_code=int(error),
        generation_id=generation_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        leader=leader,
        skip_assignment=skip_assignment,
        member_id=member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(member_id=mid, group_instance_id=iid, metadata=meta)
            for mid, iid, meta in (members or [])
        ],
    )


def sync_response(
    api_version: int,
    *,
    error: int,
    assignment: bytes = b"",
    protocol_type: str | None = None,
    protocol_name: str | None = None,
) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=int(error), assignment=assignment, protocol_type=protocol_type, protocol_name=protocol_name
    )


def offset_commit_response(
    topics: list[tuple[str, list[tuple[int, int]]]], cls: type = OffsetCommitResponse
) -> Any:
    """(topic, [(partition, error)]) in request order."""
    topic_cls = getattr(cls, cls.__name__.replace("Response", "ResponseTopic"))
    part_cls = getattr(cls, cls.__name__.replace("Response", "ResponsePartition"))
    return cls(
        topics=[
            topic_cls(name=name, partitions=[part_cls(partition_index=p, error_code=int(e)) for p, e in parts])
            for name, parts in topics
        ]
    )


def _request_topics(request: Any) -> list[tuple[str, list[int]]]:
    """(topic, [partitions]) of an OffsetCommit/TxnOffsetCommit request."""
    return [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics]


def offset_fetch_group_error(group_id: str, error: int) -> OffsetFetchResponse.OffsetFetchResponseGroup:
    return OffsetFetchResponse.OffsetFetchResponseGroup(group_id=group_id, topics=[], error_code=int(error))


_SIMPLE_ERROR_RESPONSES: dict[ApiKey, Callable[[Any, int], Any]] = {
    ApiKey.HEARTBEAT: lambda request, error: HeartbeatResponse(error_code=error),
    ApiKey.LEAVE_GROUP: lambda request, error: LeaveGroupResponse(error_code=error, members=[]),
    ApiKey.LIST_GROUPS: lambda request, error: ListGroupsResponse(error_code=error, groups=[]),
    ApiKey.OFFSET_DELETE: lambda request, error: OffsetDeleteResponse(error_code=error, topics=[]),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: lambda request, error: ConsumerGroupHeartbeatResponse(error_code=error),
    ApiKey.CONSUMER_GROUP_DESCRIBE: lambda request, error: ConsumerGroupDescribeResponse(groups=[
        ConsumerGroupDescribeResponse.DescribedGroup(group_id=g, error_code=error) for g in request.group_ids]),
    ApiKey.SHARE_GROUP_HEARTBEAT: lambda request, error: ShareGroupHeartbeatResponse(error_code=error),
    ApiKey.SHARE_GROUP_DESCRIBE: lambda request, error: ShareGroupDescribeResponse(groups=[
        ShareGroupDescribeResponse.DescribedGroup(group_id=g, error_code=error) for g in request.group_ids]),
}


def error_response(api_key: ApiKey, api_version: int, request: Any, error: int) -> Any:
    """The response to `request` failing as a whole with `error`."""
    error = int(error)
    if api_key == ApiKey.JOIN_GROUP:
        return join_response(api_version, error=error, member_id=request.member_id)
    if api_key == ApiKey.SYNC_GROUP:
        return sync_response(api_version, error=error)
    simple = _SIMPLE_ERROR_RESPONSES.get(api_key)
    if simple is not None:
        return simple(request, error)
    if api_key == ApiKey.OFFSET_COMMIT:
        return offset_commit_response([(n, [(p, error) for p in ps]) for n, ps in _request_topics(request)])
    if api_key == ApiKey.TXN_OFFSET_COMMIT:
        if api_version < 2 and error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE  # v0-1 clients do not know to wait for a load
        return offset_commit_response(
            [(n, [(p, error) for p in ps]) for n, ps in _request_topics(request)], TxnOffsetCommitResponse
        )
    if api_key == ApiKey.OFFSET_FETCH:
        if api_version >= 8:
            return OffsetFetchResponse(groups=[offset_fetch_group_error(g.group_id, error) for g in request.groups])
        topics = []
        if request.topics is not None:
            # Before v2 there is no top-level error: each partition carries it.
            topics = [
                OffsetFetchResponse.OffsetFetchResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetFetchResponse.OffsetFetchResponsePartition(
                            partition_index=p, committed_offset=INVALID_OFFSET, committed_leader_epoch=-1,
                            metadata="", error_code=error,
                        )
                        for p in t.partition_indexes
                    ],
                )
                for t in request.topics
            ]
        return OffsetFetchResponse(topics=topics, error_code=error)
    if api_key == ApiKey.DESCRIBE_GROUPS:
        return DescribeGroupsResponse(
            groups=[
                DescribeGroupsResponse.DescribedGroup(error_code=error, group_id=g, group_state="", protocol_type="",
                                                      protocol_data="", members=[])
                for g in request.groups
            ]
        )
    if api_key == ApiKey.DELETE_GROUPS:
        return DeleteGroupsResponse(
            results=[DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=error) for g in request.groups_names]
        )
    raise ValueError(f"not a group coordinator API: {api_key}")
