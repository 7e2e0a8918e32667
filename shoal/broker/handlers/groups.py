"""FindCoordinator, and the group APIs handed to each node's group coordinator runtime.

FindCoordinator answers for both kinds of key: groups (key type 0) live in
`__consumer_offsets`, transactional ids (key type 1) in `__transaction_state`;
either topic is created on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from shoal.protocol.generated.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse
from shoal.protocol.generated.find_coordinator_response import FindCoordinatorResponse
from shoal.protocol.generated.offset_commit_response import OffsetCommitResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.broker.services import BrokerServices
    from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
    from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest

GROUP_KEY = 0
TRANSACTION_KEY = 1

_GROUP = ResourceType.GROUP
_TOPIC = ResourceType.TOPIC


async def commit_known_topics(broker: BrokerServices, req, response_cls, commit):  # noqa: ANN001, ANN201
    """As Kafka's KafkaApis for OffsetCommit and TxnOffsetCommit: partitions of topics that do not
    exist are answered UNKNOWN_TOPIC_OR_PARTITION here; ``commit(req)`` gets the rest (if any).
    ``response_cls`` is the response (OffsetCommitResponse or TxnOffsetCommitResponse); its
    topic and partition structs are found by Kafka's naming."""
    topics = broker.metadata.topics

    def known(topic: str, index: int) -> bool:
        # Kafka checks the partition too, not only the topic (its metadata cache "contains")
        info = topics.get(topic)
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
        parts = [partition_cls(partition_index=i, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for i in indexes]
        if topic in answered:  # one entry per topic, as Kafka's response builder
            answered[topic].partitions = list(answered[topic].partitions) + parts
        else:
            extra.append(topic_cls(name=topic, partitions=parts))
    resp.topics = extra + list(resp.topics)
    return resp


async def _locate(broker: BrokerServices, key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port) of the coordinator of a group or transactional id."""
    if key_type == GROUP_KEY:
        code, node = await broker.coordinators.locate(key)
    elif key_type == TRANSACTION_KEY:
        if not key:
            return ErrorCode.INVALID_REQUEST, "a transactional id must not be empty", -1, "", -1
        code, node = await broker.txn_coordinators.locate(key)
    else:
        return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1, "", -1
    if node is None:
        return code, None, -1, "", -1
    return ErrorCode.NONE, None, node.node_id, node.advertised_host, node.port


# Kafka checks the key's resource: a group's DESCRIBE, or a transactional id's.
@handles(ApiKey.FIND_COORDINATOR, access=(Access(_GROUP, AclOperation.DESCRIBE),
                                          Access(ResourceType.TRANSACTIONAL_ID, AclOperation.DESCRIBE)))
async def find_coordinator(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.api_version >= 4:
        found = []
        for key in req.coordinator_keys:
            code, msg, node_id, host, port = await _locate(ctx.broker, key, req.key_type)
            found.append(FindCoordinatorResponse.Coordinator(
                key=key, node_id=node_id, host=host, port=port, error_code=code, error_message=msg))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=found)
    key_type = req.key_type if ctx.api_version >= 1 else GROUP_KEY
    code, msg, node_id, host, port = await _locate(ctx.broker, req.key, key_type)
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
    """A group API, answered by this node's group coordinator runtime."""
    return await ctx.broker.coordinators.runtime(ctx.node.node_id).handle(
        ctx.api_key, ctx.api_version, req, client_id=ctx.client_id or "", client_host=ctx.client_host)


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
    return await commit_known_topics(ctx.broker, req, OffsetCommitResponse, lambda known: group_api(ctx, known))
