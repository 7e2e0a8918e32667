"""CreateTopics, DeleteTopics, CreatePartitions: Kafka's checks and errors."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, filter_allowed
from shoal.broker.config import ConfigSource
from shoal.broker.metadata import INTERNAL_TOPICS, topic_name_error
from shoal.broker.topic_configs import InvalidTopicConfig, broker_topic_defaults, topic_log_config
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode, Refusal
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.create_partitions_response import CreatePartitionsResponse
from shoal.protocol.generated.create_topics_response import CreateTopicsResponse
from shoal.protocol.generated.delete_topics_response import DeleteTopicsResponse

if TYPE_CHECKING:
    import uuid

    from shoal.broker.metadata import TopicInfo
    from shoal.broker.node import RequestContext
    from shoal.broker.services import BrokerServices
    from shoal.protocol.generated.create_partitions_request import CreatePartitionsRequest
    from shoal.protocol.generated.create_topics_request import CreateTopicsRequest
    from shoal.protocol.generated.delete_topics_request import DeleteTopicsRequest

    CreatableTopic = CreateTopicsRequest.CreatableTopic

TopicResult = CreateTopicsResponse.CreatableTopicResult
PartitionsResult = CreatePartitionsResponse.CreatePartitionsTopicResult


def _check_assignment(broker: BrokerServices, assignment: list[list[int]]) -> None:
    for replicas in assignment:
        if not replicas or len(set(replicas)) != len(replicas):
            raise Refusal(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate or empty replica list {replicas}")
        for r in replicas:
            if r not in broker.nodes:
                raise Refusal(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker {r} in assignment")
    if len({len(r) for r in assignment}) > 1:
        raise Refusal(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions must have the same replication factor")


_TOO_LARGE = "Unable to perform excessively large batch operation."


def _too_large(broker: BrokerServices, records: int) -> bool:
    return records > broker.config.get_int("max.records.per.user.op")


# -- CreateTopics -------------------------------------------------------------

def _requested_configs(t: CreatableTopic) -> dict[str, str]:
    configs = {}
    for c in t.configs:
        if c.value is None:
            raise Refusal(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic config {c.name}")
        configs[c.name] = c.value
    return configs


def _explicit_layout(broker: BrokerServices, t: CreatableTopic) -> tuple[list[list[int]], int, int]:
    """The replica assignment the request gives: (assignment, partitions, replication factor)."""
    if t.num_partitions != -1 or t.replication_factor != -1:
        raise Refusal(ErrorCode.INVALID_REQUEST,
                       "Both numPartitions or replicationFactor and replicasAssignments were set.")
    ordered = sorted(t.assignments, key=lambda a: a.partition_index)
    if [a.partition_index for a in ordered] != list(range(len(ordered))):
        raise Refusal(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "Partitions should be a consecutive 0-based integer sequence")
    assignment = [list(a.broker_ids) for a in ordered]
    _check_assignment(broker, assignment)
    return assignment, len(assignment), len(assignment[0])


def _counted_layout(broker: BrokerServices, t: CreatableTopic) -> tuple[int, int]:
    """Partitions and replication factor from the request's counts or the broker's defaults."""
    config = broker.config
    partitions = config.get_int("num.partitions") if t.num_partitions == -1 else t.num_partitions
    rf = config.get_int("default.replication.factor") if t.replication_factor == -1 else t.replication_factor
    if partitions <= 0:
        raise Refusal(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if rf <= 0:
        raise Refusal(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if rf > len(broker.nodes):
        raise Refusal(ErrorCode.INVALID_REPLICATION_FACTOR,
                       f"Unable to replicate the partition {rf} time(s): The target replication "
                       f"factor of {rf} cannot be reached because only {len(broker.nodes)} "
                       "broker(s) are registered.")
    return partitions, rf


def _refused_topic(name: str, code: ErrorCode, message: str) -> TopicResult:
    # Kafka answers a refused topic with an empty config list, not null (v5+ has both)
    return TopicResult(name=name, error_code=code, error_message=message,
                       num_partitions=-1, replication_factor=-1, configs=[])


def _created_topic(ctx: RequestContext, name: str, configs: dict[str, str], partitions: int, rf: int,
                   topic_id: uuid.UUID | None) -> TopicResult:
    defaults = broker_topic_defaults(ctx.broker.config)
    described = [CreateTopicsResponse.CreatableTopicConfigs(
        name=k, value=configs.get(k, v), read_only=False,
        config_source=ConfigSource.TOPIC_CONFIG if k in configs else ConfigSource.DEFAULT_CONFIG,
        is_sensitive=False)
        for k, v in sorted(defaults.items())]
    result = TopicResult(name=name, error_code=ErrorCode.NONE, error_message=None, configs=None)
    if ctx.api_version >= 5:  # v5+ echoes the topic's settings
        result.num_partitions, result.replication_factor, result.configs = partitions, rf, described
    if topic_id is not None:
        result.topic_id = topic_id
    return result


def _create_one(ctx: RequestContext, t: CreatableTopic, validate_only: bool) -> TopicResult:
    broker = ctx.broker
    try:
        error = topic_name_error(t.name)
        if error:
            raise Refusal(ErrorCode.INVALID_TOPIC_EXCEPTION, error)
        if t.name in broker.metadata.topics:
            raise Refusal(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        configs = _requested_configs(t)
        assignment = None
        if t.assignments:
            assignment, partitions, rf = _explicit_layout(broker, t)
        else:
            partitions, rf = _counted_layout(broker, t)
        try:
            topic_log_config(configs, broker.log_defaults)
        except InvalidTopicConfig as e:
            raise Refusal(ErrorCode.INVALID_CONFIG, str(e)) from None
        topic_id = None
        if not validate_only:
            topic_id = broker.create_topic(t.name, partitions, rf, configs, assignment).topic_id
    except Refusal as e:
        return _refused_topic(t.name, e.code, str(e))
    return _created_topic(ctx, t.name, configs, partitions, rf, topic_id)


def _metadata_records(broker: BrokerServices, req: CreateTopicsRequest) -> int:
    """The metadata records creating every topic would write: the topic, each partition, each config."""
    default_partitions = broker.config.get_int("num.partitions")
    return sum(1 + (len(t.assignments) if t.assignments else
                    default_partitions if t.num_partitions == -1 else max(t.num_partitions, 0))
               + len(t.configs) for t in req.topics)


@handles(ApiKey.CREATE_TOPICS, access=(Access(ResourceType.TOPIC, AclOperation.CREATE),
                                       Access(ResourceType.CLUSTER, AclOperation.CREATE)))
async def create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    # As Kafka's controller: one request may write at most 10,000 metadata records (a topic,
    # each of its partitions, each config); a larger one fails whole, before any work.
    if _too_large(ctx.broker, _metadata_records(ctx.broker, req)):
        return CreateTopicsResponse(throttle_time_ms=0, topics=[
            _refused_topic(t.name, ErrorCode.POLICY_VIOLATION, _TOO_LARGE) for t in req.topics])
    seen: dict[str, int] = {}
    for t in req.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    # the cluster's CREATE, or each topic's; a created topic's configs need its DESCRIBE_CONFIGS
    creatable = set(seen) if allowed(ctx, AclOperation.CREATE) else filter_allowed(
        ctx, AclOperation.CREATE, ResourceType.TOPIC, seen)
    describable = filter_allowed(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, seen)
    results = []
    for t in req.topics:
        if seen[t.name] > 1:
            results.append(TopicResult(name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                                       error_message="Duplicate topic name.", configs=[]))
            continue
        if t.name not in creatable:
            results.append(TopicResult(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       error_message="Authorization failed.", configs=[]))
            continue
        result = _create_one(ctx, t, ctx.api_version >= 1 and req.validate_only)
        if t.name not in describable and result.error_code == ErrorCode.NONE and ctx.api_version >= 5:
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result.num_partitions, result.replication_factor, result.configs = -1, -1, []
        results.append(result)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


# -- DeleteTopics -------------------------------------------------------------

async def _delete_one(ctx: RequestContext, name: str | None,
                      topic_id: uuid.UUID | None, cluster_delete: bool) -> DeleteTopicsResponse.DeletableTopicResult:
    """Delete a topic named by ``name`` or (v6+) by ``topic_id``: Kafka's answer for it. Without
    ``cluster_delete`` (the cluster's DELETE) the topic's DELETE is needed, checked before its existence;
    a topic named by id whose name the principal may not DESCRIBE is answered without its name."""
    broker = ctx.broker
    if name is None and topic_id is not None:
        info = broker.metadata.by_id.get(topic_id)
        name_resolved = info.name if info else None
    else:
        name_resolved = name
    result = DeleteTopicsResponse.DeletableTopicResult(name=name_resolved, error_code=ErrorCode.NONE)
    if topic_id is not None:
        result.topic_id = topic_id
    if (name_resolved is not None and not cluster_delete
            and not allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, name_resolved)):
        result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if name is None and not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name_resolved):
            result.name = None
    elif name_resolved is None or name_resolved not in broker.metadata.topics:
        result.error_code = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    elif name_resolved in INTERNAL_TOPICS:
        result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
        result.error_message = f"Topic {name_resolved} is internal and cannot be deleted"
    elif not broker.config.get_bool("delete.topic.enable"):
        result.error_code = ErrorCode.TOPIC_DELETION_DISABLED
    else:
        result.topic_id = broker.metadata.topics[name_resolved].topic_id
        await broker.delete_topic(name_resolved)
    return result


@handles(ApiKey.DELETE_TOPICS, access=(Access(ResourceType.TOPIC, AclOperation.DELETE),))
async def delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, None) for name in req.topic_names]
    cluster_delete = allowed(ctx, AclOperation.DELETE)
    results = [await _delete_one(ctx, name, topic_id, cluster_delete) for name, topic_id in wanted]
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


# -- CreatePartitions ---------------------------------------------------------

def _new_assignment(broker: BrokerServices, t: CreatePartitionsRequest.CreatePartitionsTopic,
                    info: TopicInfo | None) -> list[list[int]] | None:
    """Check a partition increase as KRaft Kafka does; the replicas it gives the new partitions."""
    if info is None:
        raise Refusal(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t.name}' does not exist.")
    # KRaft Kafka's messages (ReplicationControlManager), which tools print as they are
    if t.count == info.num_partitions:
        raise Refusal(ErrorCode.INVALID_PARTITIONS, f"Topic already has {t.count} partition(s).")
    if t.count < info.num_partitions:
        raise Refusal(ErrorCode.INVALID_PARTITIONS,
                       f"The topic {t.name} currently has {info.num_partitions} partition(s); "
                       f"{t.count} would not be an increase.")
    if t.assignments is None:
        return None
    assignment = [list(a.broker_ids) for a in t.assignments]
    if len(assignment) != t.count - info.num_partitions:
        raise Refusal(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"Increasing the number of partitions by {t.count - info.num_partitions} "
                       f"but {len(assignment)} assignments provided.")
    _check_assignment(broker, assignment)
    return assignment


@handles(ApiKey.CREATE_PARTITIONS, access=(Access(ResourceType.TOPIC, AclOperation.ALTER),))
async def create_partitions(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    broker = ctx.broker
    added = 0
    for t in req.topics:
        info = broker.metadata.topics.get(t.name)
        if info is not None:
            added += max(t.count - info.num_partitions, 0)
    if _too_large(broker, added):
        return CreatePartitionsResponse(throttle_time_ms=0, results=[
            PartitionsResult(name=t.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=_TOO_LARGE)
            for t in req.topics])
    alterable = filter_allowed(ctx, AclOperation.ALTER, ResourceType.TOPIC, (t.name for t in req.topics))
    results = []
    for t in req.topics:
        code, message = ErrorCode.NONE, None
        if t.name not in alterable:
            results.append(PartitionsResult(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                            error_message=None))
            continue
        try:
            assignment = _new_assignment(broker, t, broker.metadata.topics.get(t.name))
            if not req.validate_only:
                broker.add_partitions(t.name, t.count, assignment)
        except Refusal as e:
            code, message = e.code, str(e)
        results.append(PartitionsResult(name=t.name, error_code=code, error_message=message))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
