"""FindCoordinator, and the group APIs handed to each node's group coordinator runtime.

FindCoordinator answers for both kinds of key: groups (key type 0) live in
`__consumer_offsets`, transactional ids (key type 1) in `__transaction_state`;
either topic is created on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.coordinator.group.responses import GROUP_API_KEYS, TXN_OFFSET_COMMIT
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.find_coordinator_response import FindCoordinatorResponse
from shoal.protocol.generated.offset_commit_response import OffsetCommitResponse

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext

GROUP_KEY = 0
TRANSACTION_KEY = 1


async def commit_known_topics(broker: Broker, req, response_cls, commit):  # noqa: ANN001, ANN201
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


def register(broker: Broker) -> None:
    async def locate(key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
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

    async def find_coordinator(ctx: RequestContext, req) -> FindCoordinatorResponse:
        if ctx.api_version >= 4:
            found = []
            for key in req.coordinator_keys:
                code, msg, node_id, host, port = await locate(key, req.key_type)
                found.append(FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node_id, host=host, port=port, error_code=code, error_message=msg))
            return FindCoordinatorResponse(throttle_time_ms=0, coordinators=found)
        code, msg, node_id, host, port = await locate(req.key, req.key_type if ctx.api_version >= 1 else GROUP_KEY)
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=code,
                                       error_message=msg if ctx.api_version >= 1 else None,
                                       node_id=node_id, host=host, port=port)

    def group_handler(api_key: int):
        async def handle(ctx: RequestContext, req):
            return await broker.coordinators.runtime(ctx.node.node_id).handle(
                api_key, ctx.api_version, req, client_id=ctx.client_id or "", client_host=ctx.client_host)
        return handle

    offset_commit_to_coordinator = group_handler(8)

    async def offset_commit(ctx: RequestContext, req) -> OffsetCommitResponse:
        return await commit_known_topics(broker, req, OffsetCommitResponse,
                                         lambda known: offset_commit_to_coordinator(ctx, known))

    broker.apis.register(10, find_coordinator)
    # TxnOffsetCommit is registered with the transaction APIs (it is verified against the transaction first).
    for api_key in sorted(GROUP_API_KEYS - {TXN_OFFSET_COMMIT}):
        broker.apis.register(api_key, offset_commit if api_key == 8 else group_handler(api_key))
