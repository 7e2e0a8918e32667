"""FindCoordinator, and the group APIs handed to each node's group coordinator runtime.

FindCoordinator answers for both kinds of key: groups (key type 0) live in
`__consumer_offsets`, transactional ids (key type 1) in `__transaction_state`;
either topic is created on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, authorized_operations, authorizer, filter_allowed
from shoal.coordinator.group.responses import error_response
from shoal.coordinator.share.runtime import parse_coordinator_key
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from shoal.protocol.generated.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse
from shoal.protocol.generated.delete_groups_request import DeleteGroupsRequest
from shoal.protocol.generated.find_coordinator_response import FindCoordinatorResponse
from shoal.protocol.generated.offset_commit_response import OffsetCommitResponse
from shoal.protocol.generated.offset_delete_response import OffsetDeleteResponse
from shoal.protocol.generated.offset_fetch_request import OffsetFetchRequest
from shoal.protocol.generated.offset_fetch_response import OffsetFetchResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.broker.services import BrokerServices
    from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
    from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest

GROUP_KEY = 0
TRANSACTION_KEY = 1
SHARE_KEY = 2  # "groupId:topicId:partition", for the share coordinator (KIP-932)

_GROUP = ResourceType.GROUP
_TOPIC = ResourceType.TOPIC


async def commit_known_topics(broker: BrokerServices, req, response_cls, commit,  # noqa: ANN001, ANN201
                              readable: set[str] | None = None):
    """As Kafka's KafkaApis for OffsetCommit and TxnOffsetCommit: partitions of topics the principal
    may not READ (not in ``readable``, when given) are answered TOPIC_AUTHORIZATION_FAILED, then those
    of topics that do not exist UNKNOWN_TOPIC_OR_PARTITION here; ``commit(req)`` gets the rest (if any).
    ``response_cls`` is the response (OffsetCommitResponse or TxnOffsetCommitResponse); its
    topic and partition structs are found by Kafka's naming."""
    topics = broker.metadata.topics

    def refusal(topic: str) -> ErrorCode:
        if readable is not None and topic not in readable:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def known(topic: str, index: int) -> bool:
        # Kafka checks the partition too, not only the topic (its metadata cache "contains")
        info = topics.get(topic)
        if readable is not None and topic not in readable:
            return False
        return info is not None and 0 <= index < info.num_partitions

    refused = [(t.name, [p.partition_index for p in t.partitions if not known(t.name, p.partition_index)])
               for t in req.topics]
    refused = [(topic, indexes) for topic, indexes in refused if indexes]
    if not refused:
        return await commit(req)
    kept = []
    for t in req.topics:
        t.partitions = [p for p in t.partitions if known(t.name, p.partition_index)]
        if t.partitions:
            kept.append(t)
    req.topics = kept
    resp = await commit(req) if req.topics else response_cls(throttle_time_ms=0, topics=[])
    name = response_cls.__name__
    topic_cls = getattr(response_cls, f"{name}Topic")
    partition_cls = getattr(response_cls, f"{name}Partition")
    answered = {t.name: t for t in resp.topics}
    extra = []
    for topic, indexes in refused:
        parts = [partition_cls(partition_index=i, error_code=refusal(topic)) for i in indexes]
        if topic in answered:  # one entry per topic, as Kafka's response builder
            answered[topic].partitions = list(answered[topic].partitions) + parts
        else:
            extra.append(topic_cls(name=topic, partitions=parts))
    resp.topics = extra + list(resp.topics)
    return resp


async def _locate(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port) of the coordinator of a group or transactional id."""
    broker = ctx.broker
    if key_type == GROUP_KEY:
        code, node = await broker.coordinators.locate(key)
    elif key_type == TRANSACTION_KEY:
        if not key:
            return ErrorCode.INVALID_REQUEST, "a transactional id must not be empty", -1, "", -1
        code, node = await broker.txn_coordinators.locate(key)
    elif key_type == SHARE_KEY:
        if ctx.api_version < 6:  # as Kafka: share coordinators are looked up from version 6 on
            return ErrorCode.INVALID_REQUEST, "share coordinator lookups need FindCoordinator v6+", -1, "", -1
        try:  # as Kafka's SharePartitionKey.validate
            parse_coordinator_key(key)
        except ValueError as e:
            return ErrorCode.INVALID_REQUEST, str(e), -1, "", -1
        code, node = await broker.share_coordinators.locate(key)
    else:
        return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1, "", -1
    if node is None:
        return code, None, -1, "", -1
    return (ErrorCode.NONE, None, node.node_id, *ctx.address_of(node))


async def _locate_allowed(ctx: RequestContext, key: str, key_type: int,
                          ) -> tuple[ErrorCode, str | None, int, str, int]:
    """`_locate`, when the principal may DESCRIBE the group or transactional id (Kafka's error otherwise)."""
    if key_type == GROUP_KEY and not allowed(ctx, AclOperation.DESCRIBE, _GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, -1, "", -1
    if key_type == TRANSACTION_KEY and not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, -1, "", -1
    # Kafka: only brokers locate share coordinators (CLUSTER_ACTION on the cluster).
    if key_type == SHARE_KEY and not allowed(ctx, AclOperation.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, -1, "", -1
    return await _locate(ctx, key, key_type)


# Kafka checks the key's resource: a group's DESCRIBE, or a transactional id's.
@handles(ApiKey.FIND_COORDINATOR, access=(Access(_GROUP, AclOperation.DESCRIBE),
                                          Access(ResourceType.TRANSACTIONAL_ID, AclOperation.DESCRIBE)))
async def find_coordinator(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.api_version >= 4:
        found = []
        for key in req.coordinator_keys:
            code, msg, node_id, host, port = await _locate_allowed(ctx, key, req.key_type)
            found.append(FindCoordinatorResponse.Coordinator(
                key=key, node_id=node_id, host=host, port=port, error_code=code, error_message=msg))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=found)
    key_type = req.key_type if ctx.api_version >= 1 else GROUP_KEY
    code, msg, node_id, host, port = await _locate_allowed(ctx, req.key, key_type)
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=msg if ctx.api_version >= 1 else None,
                                   node_id=node_id, host=host, port=port)


# As Kafka's KafkaApis: a group's READ to take part in it, DESCRIBE to look at it, DELETE to
# delete it or its offsets; the topics' READ (DESCRIBE for OffsetFetch) for their offsets.
# ListGroups lists the groups the principal may DESCRIBE (all of them with the cluster's DESCRIBE).
# TxnOffsetCommit is declared with the transaction APIs (it is verified against the transaction first).
@handles(ApiKey.OFFSET_FETCH, access=(Access(_GROUP, AclOperation.DESCRIBE), Access(_TOPIC, AclOperation.DESCRIBE)))
@handles(ApiKey.JOIN_GROUP, access=(Access(_GROUP, AclOperation.READ),))
@handles(ApiKey.HEARTBEAT, access=(Access(_GROUP, AclOperation.READ),))
@handles(ApiKey.LEAVE_GROUP, access=(Access(_GROUP, AclOperation.READ),))
@handles(ApiKey.SYNC_GROUP, access=(Access(_GROUP, AclOperation.READ),))
@handles(ApiKey.DESCRIBE_GROUPS, access=(Access(_GROUP, AclOperation.DESCRIBE),))
@handles(ApiKey.LIST_GROUPS, access=(Access(_GROUP, AclOperation.DESCRIBE),))
@handles(ApiKey.DELETE_GROUPS, access=(Access(_GROUP, AclOperation.DELETE),))
@handles(ApiKey.OFFSET_DELETE, access=(Access(_GROUP, AclOperation.DELETE), Access(_TOPIC, AclOperation.READ)))
async def group_api(ctx: RequestContext, req):  # noqa: ANN001, ANN201
    """A group API, answered by this node's group coordinator runtime, after Kafka's ACL checks."""
    if authorizer(ctx) is None:
        return await group_coordinator(ctx, req)
    api_key = ctx.api_key
    if api_key in _READ_GROUP_APIS:
        if not allowed(ctx, AclOperation.READ, _GROUP, req.group_id):
            return error_response(ApiKey(api_key), ctx.api_version, req, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return await group_coordinator(ctx, req)
    if api_key == ApiKey.OFFSET_DELETE:
        return await _offset_delete(ctx, req)
    if api_key == ApiKey.OFFSET_FETCH:
        return await _offset_fetch(ctx, req)
    if api_key == ApiKey.DELETE_GROUPS:
        return await _delete_groups(ctx, req)
    if api_key in (ApiKey.DESCRIBE_GROUPS, ApiKey.CONSUMER_GROUP_DESCRIBE):
        return await _describe_groups(ctx, req)
    if api_key == ApiKey.LIST_GROUPS:
        resp = await group_coordinator(ctx, req)
        if not allowed(ctx, AclOperation.DESCRIBE):  # the cluster's DESCRIBE lists every group
            ids = filter_allowed(ctx, AclOperation.DESCRIBE, _GROUP, (g.group_id for g in resp.groups))
            resp.groups = [g for g in resp.groups if g.group_id in ids]
        return resp
    return await group_coordinator(ctx, req)


async def group_coordinator(ctx: RequestContext, req):  # noqa: ANN001, ANN201
    """The request answered by this node's group coordinator runtime."""
    return await ctx.broker.coordinators.runtime(ctx.node.node_id).handle(
        ctx.api_key, ctx.api_version, req, client_id=ctx.client_id or "", client_host=ctx.client_host)


# The APIs of a group's members: the group's READ, or the whole request fails.
_READ_GROUP_APIS = frozenset({ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
                              ApiKey.CONSUMER_GROUP_HEARTBEAT})


async def _offset_delete(ctx: RequestContext, req):  # noqa: ANN001, ANN202
    """The group's DELETE, then each topic's READ (denied topics' partitions fail; the rest are deleted)."""
    if not allowed(ctx, AclOperation.DELETE, _GROUP, req.group_id):
        return error_response(ApiKey.OFFSET_DELETE, ctx.api_version, req, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = filter_allowed(ctx, AclOperation.READ, _TOPIC, (t.name for t in req.topics))
    denied = [t for t in req.topics if t.name not in readable]
    req.topics = [t for t in req.topics if t.name in readable]
    resp = await group_coordinator(ctx, req)
    if denied and resp.error_code == ErrorCode.NONE:
        resp.topics = list(resp.topics) + [OffsetDeleteResponse.OffsetDeleteResponseTopic(name=t.name, partitions=[
            OffsetDeleteResponse.OffsetDeleteResponsePartition(
                partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for p in t.partitions]) for t in denied]
    return resp


async def _offset_fetch(ctx: RequestContext, req):  # noqa: ANN001, ANN202
    """Each group's DESCRIBE (v8+: that group's entry fails; before: the whole request), then each topic's
    DESCRIBE: a named partition of a denied topic answers TOPIC_AUTHORIZATION_FAILED, and a fetch of all
    of a group's offsets leaves denied topics out."""
    denied_error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    if ctx.api_version < 8:
        if not allowed(ctx, AclOperation.DESCRIBE, _GROUP, req.group_id):
            return error_response(ApiKey.OFFSET_FETCH, ctx.api_version, req, denied_error)
        resp = await group_coordinator(ctx, req)
        resp.topics = _describable_offsets(ctx, resp.topics, req.topics is not None)
        return resp
    order = [g.group_id for g in req.groups]
    may = filter_allowed(ctx, AclOperation.DESCRIBE, _GROUP, order)
    named = {g.group_id: g.topics is not None for g in req.groups}
    req.groups = [g for g in req.groups if g.group_id in may]
    resp = await group_coordinator(ctx, req) if req.groups else OffsetFetchResponse(throttle_time_ms=0, groups=[])
    answered = {g.group_id: g for g in resp.groups}
    for g in answered.values():
        g.topics = _describable_offsets(ctx, g.topics, named.get(g.group_id, False))
    denied = error_response(ApiKey.OFFSET_FETCH, ctx.api_version,
                            OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=gid)
                                                       for gid in order if gid not in may]), denied_error)
    answered.update({g.group_id: g for g in denied.groups})
    resp.groups = [answered[gid] for gid in dict.fromkeys(order) if gid in answered]
    return resp


def _describable_offsets(ctx: RequestContext, topics, named: bool):  # noqa: ANN001, ANN202
    """OffsetFetch topics the principal may DESCRIBE; the others' named partitions fail, or (a fetch of
    every offset) the topics are left out."""
    if not topics:
        return topics
    may = filter_allowed(ctx, AclOperation.DESCRIBE, _TOPIC, (t.name for t in topics))
    if not named:
        return [t for t in topics if t.name in may]
    for t in topics:
        if t.name not in may:
            for p in t.partitions:
                p.committed_offset, p.committed_leader_epoch, p.metadata = -1, -1, ""
                p.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return topics


async def _delete_groups(ctx: RequestContext, req):  # noqa: ANN001, ANN202
    """Each group's DELETE: a denied group's result fails, the others are deleted."""
    order = list(req.groups_names)
    may = filter_allowed(ctx, AclOperation.DELETE, _GROUP, order)
    req.groups_names = [g for g in order if g in may]
    resp = await group_coordinator(ctx, req) if req.groups_names else error_response(
        ApiKey.DELETE_GROUPS, ctx.api_version, req, ErrorCode.NONE)
    results = {r.group_id: r for r in resp.results}
    results.update({r.group_id: r for r in error_response(
        ApiKey.DELETE_GROUPS, ctx.api_version, DeleteGroupsRequest(groups_names=[g for g in order if g not in may]),
        ErrorCode.GROUP_AUTHORIZATION_FAILED).results})
    resp.results = [results[g] for g in dict.fromkeys(order) if g in results]
    return resp


async def _describe_groups(ctx: RequestContext, req):  # noqa: ANN001, ANN202
    """DescribeGroups and ConsumerGroupDescribe: each group's DESCRIBE (a denied group's entry fails), and
    the authorized operations of the described groups when asked for."""
    resp = await group_coordinator(ctx, req)
    ids = [g.group_id for g in resp.groups]
    may = filter_allowed(ctx, AclOperation.DESCRIBE, _GROUP, ids)
    asked_ops = bool(req.include_authorized_operations) and (
        ctx.api_key == ApiKey.CONSUMER_GROUP_DESCRIBE or ctx.api_version >= 3)
    denied = {g.group_id: g for g in error_response(
        ApiKey(ctx.api_key), ctx.api_version, type(req)(**{_GROUP_IDS[ctx.api_key]: [i for i in ids if i not in may]}),
        ErrorCode.GROUP_AUTHORIZATION_FAILED).groups}
    out = []
    for g in resp.groups:
        if g.group_id not in may:
            out.append(denied[g.group_id])
            continue
        if asked_ops:
            g.authorized_operations = authorized_operations(ctx, _GROUP, g.group_id)
        out.append(g)
    resp.groups = out
    return resp


_GROUP_IDS: dict[int, str] = {ApiKey.DESCRIBE_GROUPS: "groups", ApiKey.CONSUMER_GROUP_DESCRIBE: "group_ids"}


# ConsumerGroupHeartbeat: the group's READ, and DESCRIBE of the subscribed topics (Kafka answers
# TOPIC_AUTHORIZATION_FAILED for named topics not described, and leaves them out of a regex's resolution).
@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT, access=(Access(_GROUP, AclOperation.READ), Access(_TOPIC, AclOperation.DESCRIBE)))
@handles(ApiKey.CONSUMER_GROUP_DESCRIBE, access=(Access(_GROUP, AclOperation.DESCRIBE),))
async def consumer_group_api(ctx: RequestContext, req):  # noqa: ANN001, ANN201
    """KIP-848's APIs. With "consumer" not in group.coordinator.rebalance.protocols, Kafka (4.4,
    checked) still advertises them in ApiVersions and answers UNSUPPORTED_VERSION before routing
    the group to its coordinator (KafkaApis); so does shoal."""
    if not ctx.broker.coordinators.config.consumer_protocol_enabled:
        if ctx.api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT:
            return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        return ConsumerGroupDescribeResponse(groups=[ConsumerGroupDescribeResponse.DescribedGroup(
            group_id=gid, error_code=ErrorCode.UNSUPPORTED_VERSION) for gid in req.group_ids])
    return await group_api(ctx, req)


@handles(ApiKey.OFFSET_COMMIT, access=(Access(_GROUP, AclOperation.READ), Access(_TOPIC, AclOperation.READ)))
async def offset_commit(ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    if not allowed(ctx, AclOperation.READ, _GROUP, req.group_id):
        return error_response(ApiKey.OFFSET_COMMIT, ctx.api_version, req, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = None
    if authorizer(ctx) is not None:
        readable = filter_allowed(ctx, AclOperation.READ, _TOPIC, (t.name for t in req.topics))
    return await commit_known_topics(ctx.broker, req, OffsetCommitResponse, lambda known: group_api(ctx, known),
                                     readable)
