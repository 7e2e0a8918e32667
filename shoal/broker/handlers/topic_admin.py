"""CreateTopics, DeleteTopics, CreatePartitions: Kafka's checks and errors."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shoal.broker.metadata import INTERNAL_TOPICS, topic_name_error
from shoal.broker.topic_configs import InvalidTopicConfig, broker_topic_defaults, topic_log_config
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.create_partitions_response import CreatePartitionsResponse
from shoal.protocol.generated.create_topics_response import CreateTopicsResponse
from shoal.protocol.generated.delete_topics_response import DeleteTopicsResponse

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext

log = logging.getLogger(__name__)

TopicResult = CreateTopicsResponse.CreatableTopicResult
# DescribeConfigs / CreateTopics config sources (Kafka's ConfigSource ids)
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _check_assignment(broker: Broker, assignment: list[list[int]]) -> None:
    for replicas in assignment:
        if not replicas or len(set(replicas)) != len(replicas):
            raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate or empty replica list {replicas}")
        for r in replicas:
            if r not in broker.nodes:
                raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker {r} in assignment")
    if len({len(r) for r in assignment}) > 1:
        raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions must have the same replication factor")


_TOO_LARGE = "Unable to perform excessively large batch operation."


def register(broker: Broker) -> None:
    config = broker.config

    def create_one(ctx: RequestContext, t, validate_only: bool) -> TopicResult:
        try:
            error = topic_name_error(t.name)
            if error:
                raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, error)
            if t.name in broker.metadata.topics:
                raise _Refused(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
            configs = {}
            for c in t.configs:
                if c.value is None:
                    raise _Refused(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic config {c.name}")
                configs[c.name] = c.value
            assignment = None
            if t.assignments:
                if t.num_partitions != -1 or t.replication_factor != -1:
                    raise _Refused(ErrorCode.INVALID_REQUEST,
                                   "Both numPartitions or replicationFactor and replicasAssignments were set.")
                ordered = sorted(t.assignments, key=lambda a: a.partition_index)
                if [a.partition_index for a in ordered] != list(range(len(ordered))):
                    raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   "Partitions should be a consecutive 0-based integer sequence")
                assignment = [list(a.broker_ids) for a in ordered]
                _check_assignment(broker, assignment)
                partitions, rf = len(assignment), len(assignment[0])
            else:
                partitions = config.get_int("num.partitions") if t.num_partitions == -1 else t.num_partitions
                rf = config.get_int("default.replication.factor") if t.replication_factor == -1 \
                    else t.replication_factor
                if partitions <= 0:
                    raise _Refused(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
                if rf <= 0:
                    raise _Refused(ErrorCode.INVALID_REPLICATION_FACTOR,
                                   "Replication factor must be larger than 0.")
                if rf > len(broker.nodes):
                    raise _Refused(ErrorCode.INVALID_REPLICATION_FACTOR,
                                   f"Unable to replicate the partition {rf} time(s): The target replication "
                                   f"factor of {rf} cannot be reached because only {len(broker.nodes)} "
                                   "broker(s) are registered.")
            try:
                topic_log_config(configs, broker.log_defaults)
            except InvalidTopicConfig as e:
                raise _Refused(ErrorCode.INVALID_CONFIG, str(e)) from None
            if validate_only:
                topic_id = None
            else:
                info = broker.create_topic(t.name, partitions, rf, configs, assignment)
                topic_id = info.topic_id
        except _Refused as e:
            # Kafka answers a refused topic with an empty config list, not null (v5+ has both)
            return TopicResult(name=t.name, error_code=e.code, error_message=str(e),
                               num_partitions=-1, replication_factor=-1, configs=[])
        defaults = broker_topic_defaults(config)
        described = [CreateTopicsResponse.CreatableTopicConfigs(
            name=k, value=configs.get(k, v), read_only=False,
            config_source=SOURCE_TOPIC if k in configs else SOURCE_DEFAULT, is_sensitive=False)
            for k, v in sorted(defaults.items())]
        result = TopicResult(name=t.name, error_code=ErrorCode.NONE, error_message=None, configs=None)
        if ctx.api_version >= 5:  # v5+ echoes the topic's settings
            result.num_partitions, result.replication_factor, result.configs = partitions, rf, described
        if topic_id is not None:
            result.topic_id = topic_id
        return result

    def too_large(records: int) -> bool:
        return records > config.get_int("max.records.per.user.op")

    async def create_topics(ctx: RequestContext, req) -> CreateTopicsResponse:
        # As Kafka's controller: one request may write at most 10,000 metadata records (a topic,
        # each of its partitions, each config); a larger one fails whole, before any work.
        default_partitions = config.get_int("num.partitions")
        records = sum(1 + (len(t.assignments) if t.assignments else
                           default_partitions if t.num_partitions == -1 else max(t.num_partitions, 0))
                      + len(t.configs) for t in req.topics)
        if too_large(records):
            return CreateTopicsResponse(throttle_time_ms=0, topics=[
                TopicResult(name=t.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=_TOO_LARGE,
                            num_partitions=-1, replication_factor=-1, configs=[]) for t in req.topics])
        seen: dict[str, int] = {}
        for t in req.topics:
            seen[t.name] = seen.get(t.name, 0) + 1
        results = []
        for t in req.topics:
            if seen[t.name] > 1:
                results.append(TopicResult(name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                                           error_message="Duplicate topic name.", configs=[]))
                continue
            results.append(create_one(ctx, t, ctx.api_version >= 1 and req.validate_only))
        return CreateTopicsResponse(throttle_time_ms=0, topics=results)

    async def delete_topics(ctx: RequestContext, req) -> DeleteTopicsResponse:
        if ctx.api_version >= 6:
            wanted = [(t.name, t.topic_id) for t in req.topics]
        else:
            wanted = [(name, None) for name in req.topic_names]
        results = []
        for name, topic_id in wanted:
            if name is None and topic_id is not None:
                info = broker.metadata.by_id.get(topic_id)
                name_resolved = info.name if info else None
            else:
                name_resolved = name
            result = DeleteTopicsResponse.DeletableTopicResult(name=name_resolved, error_code=ErrorCode.NONE)
            if topic_id is not None:
                result.topic_id = topic_id
            if name_resolved is None or name_resolved not in broker.metadata.topics:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif name_resolved in INTERNAL_TOPICS:
                result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
                result.error_message = f"Topic {name_resolved} is internal and cannot be deleted"
            elif not config.get_bool("delete.topic.enable"):
                result.error_code = ErrorCode.TOPIC_DELETION_DISABLED
            else:
                result.topic_id = broker.metadata.topics[name_resolved].topic_id
                await broker.delete_topic(name_resolved)
            results.append(result)
        return DeleteTopicsResponse(throttle_time_ms=0, responses=results)

    async def create_partitions(ctx: RequestContext, req) -> CreatePartitionsResponse:
        added = 0
        for t in req.topics:
            info = broker.metadata.topics.get(t.name)
            if info is not None:
                added += max(t.count - info.num_partitions, 0)
        if too_large(added):
            return CreatePartitionsResponse(throttle_time_ms=0, results=[
                CreatePartitionsResponse.CreatePartitionsTopicResult(
                    name=t.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=_TOO_LARGE)
                for t in req.topics])
        results = []
        for t in req.topics:
            code, message = ErrorCode.NONE, None
            info = broker.metadata.topics.get(t.name)
            try:
                if info is None:
                    raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t.name}' does not exist.")
                # KRaft Kafka's messages (ReplicationControlManager), which tools print as they are
                if t.count == info.num_partitions:
                    raise _Refused(ErrorCode.INVALID_PARTITIONS, f"Topic already has {t.count} partition(s).")
                if t.count < info.num_partitions:
                    raise _Refused(ErrorCode.INVALID_PARTITIONS,
                                   f"The topic {t.name} currently has {info.num_partitions} partition(s); "
                                   f"{t.count} would not be an increase.")
                assignment = None
                if t.assignments is not None:
                    assignment = [list(a.broker_ids) for a in t.assignments]
                    if len(assignment) != t.count - info.num_partitions:
                        raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                       f"Increasing the number of partitions by {t.count - info.num_partitions} "
                                       f"but {len(assignment)} assignments provided.")
                    _check_assignment(broker, assignment)
                if not req.validate_only:
                    broker.add_partitions(t.name, t.count, assignment)
            except _Refused as e:
                code, message = e.code, str(e)
            results.append(CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=t.name, error_code=code, error_message=message))
        return CreatePartitionsResponse(throttle_time_ms=0, results=results)

    broker.apis.register(19, create_topics)
    broker.apis.register(20, delete_topics)
    broker.apis.register(37, create_partitions)
