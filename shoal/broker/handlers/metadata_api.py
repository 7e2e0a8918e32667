"""Metadata: brokers, controller, cluster id, topics and their leaders (auto-create)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, authorized_operations, filter_allowed
from shoal.broker.metadata import TopicInfo, topic_name_error
from shoal.protocol.acl_operations import NOT_REQUESTED, AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.metadata_response import MetadataResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.broker.services import BrokerServices
    from shoal.protocol.generated.metadata_request import MetadataRequest

_ZERO_ID = uuid.UUID(int=0)
_NO_OPS = NOT_REQUESTED  # also the default of a topic entry's topic_authorized_operations

Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition


def live_brokers(ctx: RequestContext) -> list[MetadataResponse.MetadataResponseBroker]:
    return [MetadataResponse.MetadataResponseBroker(node_id=n.node_id, host=host, port=port, rack=None)
            for n in ctx.broker.nodes.values() if n.running for host, port in [ctx.address_of(n)]]


def topic_entry(broker: BrokerServices, info: TopicInfo, ops: int = NOT_REQUESTED) -> Topic:
    parts = []
    for p in range(info.num_partitions):
        st = broker.metadata.partition(info.name, p)
        parts.append(Partition(
            error_code=ErrorCode.NONE if st.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=p, leader_id=st.leader, leader_epoch=st.leader_epoch,
            replica_nodes=st.replicas, isr_nodes=st.isr,
            offline_replicas=[r for r in st.replicas if r not in st.isr]))
    return Topic(error_code=ErrorCode.NONE, name=info.name, topic_id=info.topic_id,
                 is_internal=info.is_internal, partitions=parts,
                 topic_authorized_operations=ops)


def _topic_ops(ctx: RequestContext, name: str, want_ops: bool) -> int:
    """KIP-430's field of a described topic: what the principal may do on it, when asked."""
    return authorized_operations(ctx, ResourceType.TOPIC, name) if want_ops else _NO_OPS


def _named_topic(ctx: RequestContext, req: MetadataRequest, wanted, want_ops: bool) -> Topic:  # noqa: ANN001
    """The entry of one topic the request names (by name, or by id from v10), auto-created if
    the broker and the request allow it. A topic the principal may not DESCRIBE answers
    TOPIC_AUTHORIZATION_FAILED whether it exists or not (by id: without its name)."""
    broker = ctx.broker
    name = wanted.name
    if name is None or wanted.topic_id != _ZERO_ID:
        # v12+: by topic id whenever one is given, as Kafka (its Java client names the topic "" then)
        info = broker.metadata.by_id.get(wanted.topic_id)
        if info is None:
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=wanted.topic_id)
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
            return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None, topic_id=wanted.topic_id)
        return topic_entry(broker, info, _topic_ops(ctx, info.name, want_ops))
    if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name)
    info = broker.metadata.topics.get(name)
    if info is None:
        if topic_name_error(name) is not None:
            return Topic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name)
        allow_auto = broker.config.get_bool("auto.create.topics.enable") and (
            ctx.api_version < 4 or req.allow_auto_topic_creation)
        if not allow_auto:
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name)
        if not (allowed(ctx, AclOperation.CREATE) or allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, name)):
            return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name)
        info = broker.auto_create_topic(name)
    return topic_entry(broker, info, _topic_ops(ctx, name, want_ops))


@handles(ApiKey.METADATA, access=(Access(ResourceType.TOPIC, AclOperation.DESCRIBE),))
async def metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    # KIP-430: what the principal may do, when asked (with no authorizer: everything)
    want_ops = ctx.api_version >= 8 and bool(req.include_topic_authorized_operations)
    cluster_ops = _NO_OPS
    if 8 <= ctx.api_version <= 10 and req.include_cluster_authorized_operations:
        cluster_ops = authorized_operations(ctx, ResourceType.CLUSTER) if allowed(ctx, AclOperation.DESCRIBE) else 0
    if req.topics is None or (ctx.api_version == 0 and not req.topics):
        # every topic the principal may DESCRIBE; the others are not revealed
        may = filter_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, broker.metadata.topics)
        out = [topic_entry(broker, t, _topic_ops(ctx, t.name, want_ops))
               for t in sorted(broker.metadata.topics.values(), key=lambda t: t.name) if t.name in may]
    elif ctx.api_version < 12 and any(t.name is None or t.topic_id != _ZERO_ID for t in req.topics):
        # v10 and v11 carry a topic id and a nullable name that no broker implemented; Kafka
        # refuses such a request with INVALID_REQUEST for every topic it names.
        out = [Topic(error_code=ErrorCode.INVALID_REQUEST, name=t.name or "", topic_id=t.topic_id)
               for t in req.topics]
        cluster_ops = _NO_OPS
    else:
        out = [_named_topic(ctx, req, wanted, want_ops) for wanted in req.topics]
    return MetadataResponse(
        throttle_time_ms=0, brokers=live_brokers(ctx), cluster_id=broker.cluster_id,
        controller_id=broker.metadata.controller_id, topics=out, cluster_authorized_operations=cluster_ops)
