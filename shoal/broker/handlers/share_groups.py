"""ShareGroupHeartbeat (API 76) and ShareGroupDescribe (API 77), v1 only as Kafka 4.4 serves them,
handed to the group coordinator runtime after Kafka's checks (KafkaApis.handleShareGroupHeartbeat /
handleShareGroupDescribe, read from Kafka 4.4.0's jar):

- share groups off (the share.version feature 0): UNSUPPORTED_VERSION;
- heartbeat: the group's READ (GROUP_AUTHORIZATION_FAILED), a member id of 1-36 characters
  (INVALID_REQUEST "Invalid member id in the request."), DESCRIBE of every subscribed topic named
  (TOPIC_AUTHORIZATION_FAILED);
- describe: each group's DESCRIBE (that group's entry GROUP_AUTHORIZATION_FAILED), its authorized
  operations when asked, and a group whose members are assigned topics the principal may not
  DESCRIBE answers TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, authorized_operations, authorizer, filter_allowed
from shoal.broker.handlers.groups import group_coordinator
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.share_group_describe_response import ShareGroupDescribeResponse
from shoal.protocol.generated.share_group_heartbeat_response import ShareGroupHeartbeatResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.share_group_describe_request import ShareGroupDescribeRequest
    from shoal.protocol.generated.share_group_heartbeat_request import ShareGroupHeartbeatRequest

_GROUP = ResourceType.GROUP
_TOPIC = ResourceType.TOPIC
D = ShareGroupDescribeResponse
UNAUTHORIZED_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def member_id_valid(member_id: str | None) -> bool:
    """Kafka's KafkaApis.isMemberIdValid: non-empty, at most 36 characters (a UUID string)."""
    return bool(member_id) and len(member_id or "") <= 36


@handles(ApiKey.SHARE_GROUP_HEARTBEAT, min_version=1, max_version=1,
         access=(Access(_GROUP, AclOperation.READ), Access(_TOPIC, AclOperation.DESCRIBE)))
async def share_group_heartbeat(ctx: RequestContext, req: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    if not ctx.broker.coordinators.config.share_groups_enabled:
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    if not allowed(ctx, AclOperation.READ, _GROUP, req.group_id):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not member_id_valid(req.member_id):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.INVALID_REQUEST,
                                           error_message="Invalid member id in the request.")
    if req.subscribed_topic_names and authorizer(ctx) is not None:
        names = set(req.subscribed_topic_names)
        if len(filter_allowed(ctx, AclOperation.DESCRIBE, _TOPIC, names)) < len(names):
            return ShareGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    resp: ShareGroupHeartbeatResponse = await group_coordinator(ctx, req)
    return resp


@handles(ApiKey.SHARE_GROUP_DESCRIBE, min_version=1, max_version=1, access=(Access(_GROUP, AclOperation.DESCRIBE),))
async def share_group_describe(ctx: RequestContext, req: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    if not ctx.broker.coordinators.config.share_groups_enabled:
        return D(groups=[D.DescribedGroup(group_id=g, error_code=ErrorCode.UNSUPPORTED_VERSION) for g in req.group_ids])
    order = list(req.group_ids)
    may = filter_allowed(ctx, AclOperation.DESCRIBE, _GROUP, order)
    req.group_ids = [g for g in order if g in may]
    resp: ShareGroupDescribeResponse = await group_coordinator(ctx, req) if req.group_ids else D(groups=[])
    by_id: dict[str, Any] = {}
    for g in resp.groups:
        by_id[g.group_id] = _checked_topics(ctx, g, bool(req.include_authorized_operations))
    out = []
    for gid in order:  # duplicates answered once per request entry, as the runtime does
        denied = D.DescribedGroup(group_id=gid, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        out.append(by_id[gid] if gid in by_id else denied)
    resp.groups = out
    return resp


def _checked_topics(ctx: RequestContext, group: Any, asked_ops: bool) -> Any:
    """A described group whose members are assigned topics the principal may not DESCRIBE fails."""
    if group.error_code == ErrorCode.NONE and authorizer(ctx) is not None:
        names = {tp.topic_name for m in group.members for tp in m.assignment.topic_partitions}
        if names and len(filter_allowed(ctx, AclOperation.DESCRIBE, _TOPIC, names)) < len(names):
            return D.DescribedGroup(group_id=group.group_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                    error_message=UNAUTHORIZED_TOPICS)
    if asked_ops and group.error_code == ErrorCode.NONE:
        group.authorized_operations = authorized_operations(ctx, _GROUP, group.group_id)
    return group
