"""IncrementalAlterConfigs and AlterConfigs: topic configs, dynamic broker configs and group configs.

A topic's configs are applied to its partitions at once and kept in the
cluster metadata, so they survive restarts. Broker resources are the
cluster-wide default (name "") or a node of this process; only the dynamic
ones (the ``log.*`` synonyms of topic configs and ``producer.id.expiration.ms``)
may change, as in Kafka. Errors are Kafka's: INVALID_REQUEST for a malformed
change (duplicate names, a null value, an unknown operation, a broker config
that is not dynamic), INVALID_CONFIG for a topic config Kafka would refuse,
UNKNOWN_TOPIC_OR_PARTITION for a missing topic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import DENIED_MESSAGES, config_denied
from shoal.broker.config import AlterConfigOpType, ConfigResourceType
from shoal.broker.group_configs import InvalidGroupConfig, broker_values
from shoal.broker.group_configs import validate as validate_group_configs
from shoal.broker.topic_configs import (
    LIST_TOPIC_CONFIGS,
    InvalidBrokerConfig,
    InvalidTopicConfig,
    broker_topic_defaults,
)
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode, Refusal
from shoal.protocol.generated.alter_configs_response import AlterConfigsResponse
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.incremental_alter_configs_response import IncrementalAlterConfigsResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.broker.services import BrokerServices
    from shoal.protocol.generated.alter_configs_request import AlterConfigsRequest
    from shoal.protocol.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest

SET, DELETE, APPEND, SUBTRACT = AlterConfigOpType
# ALTER_CONFIGS on the topic or on the cluster, as the resource is a topic or a broker
_ACCESS = (Access(ResourceType.TOPIC, AclOperation.ALTER_CONFIGS),
           Access(ResourceType.CLUSTER, AclOperation.ALTER_CONFIGS))
# an incremental change: (name, operation, value)
Op = tuple[str, int, str | None]


def apply_ops(current: dict[str, str], ops: list[Op], list_configs: frozenset[str],
              defaults: dict[str, str]) -> dict[str, str]:
    """Kafka's incremental operations on a resource's configs: the new full set."""
    names = [name for name, _, _ in ops]
    if len(set(names)) != len(names):
        raise Refusal(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [name for name, op, value in ops if op != DELETE and value is None]
    if nulls:
        raise Refusal(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    out = dict(current)
    for name, op, value in ops:
        if op == SET:
            out[name] = value or ""
        elif op == DELETE:
            out.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            if name not in list_configs:
                verb = "append" if op == APPEND else "subtract"
                raise Refusal(ErrorCode.INVALID_CONFIG,
                                        f"Config value {verb} is not allowed for config key: {name}")
            old = [v for v in out.get(name, defaults.get(name, "")).split(",") if v]
            given = [v for v in (value or "").split(",") if v]
            new = old + [v for v in given if v not in old] if op == APPEND else [v for v in old if v not in given]
            out[name] = ",".join(new)
        else:
            raise Refusal(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op}")
    return out


def _broker_resource(broker: BrokerServices, name: str) -> str:
    """The broker resource a name gives: "" (the cluster default) or the id of a node of this process."""
    if name == "":
        return name
    try:
        node_id = int(name)
    except ValueError:
        raise Refusal(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
    if node_id not in broker.nodes:
        raise Refusal(ErrorCode.INVALID_REQUEST,
                                f"Unexpected broker id, expected one of {sorted(broker.nodes)}, but received {name}")
    return str(node_id)


def _change_topic(broker: BrokerServices, name: str, ops: list[Op] | None, replace: dict[str, str | None] | None,
                  validate_only: bool) -> None:
    info = broker.metadata.topics.get(name)
    if info is None:
        raise Refusal(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    if replace is not None:
        new = {k: v or "" for k, v in replace.items()}
    else:
        new = apply_ops(info.configs, ops or [], LIST_TOPIC_CONFIGS, broker_topic_defaults(broker.config))
    try:
        broker.alter_topic_configs(name, new, validate_only)
    except InvalidTopicConfig as e:
        raise Refusal(ErrorCode.INVALID_CONFIG, str(e)) from None


def _change_broker(broker: BrokerServices, name: str, ops: list[Op] | None, replace: dict[str, str | None] | None,
                   validate_only: bool) -> None:
    resource = _broker_resource(broker, name)
    current = broker.metadata.broker_configs.get(resource, {})
    new = ({k: v or "" for k, v in replace.items()} if replace is not None
           else apply_ops(current, ops or [], frozenset({"log.cleanup.policy"}), {}))
    try:
        broker.alter_broker_configs(resource, new, validate_only)
    except InvalidBrokerConfig as e:
        raise Refusal(ErrorCode.INVALID_REQUEST, str(e)) from None


def _change_group(broker: BrokerServices, name: str, ops: list[Op], validate_only: bool) -> None:
    if not name:
        raise Refusal(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    new = apply_ops(broker.metadata.group_configs.get(name, {}), ops, frozenset({"streams.rack.aware.assignment.tags"}),
                    {})
    try:
        validate_group_configs(new, broker_values(broker.config.get))
    except InvalidGroupConfig as e:
        raise Refusal(ErrorCode.INVALID_CONFIG, str(e)) from None
    if not validate_only:
        broker.metadata.set_group_configs(name, new)


def change(broker: BrokerServices, resource_type: int, name: str, ops: list[Op] | None,
           replace: dict[str, str | None] | None, validate_only: bool) -> None:
    """One resource: ``ops`` (incremental) or ``replace`` (the legacy full set)."""
    if replace is not None:
        nulls = [k for k, v in replace.items() if v is None]
        if nulls:
            raise Refusal(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    if resource_type == ConfigResourceType.TOPIC:
        _change_topic(broker, name, ops, replace, validate_only)
    elif resource_type == ConfigResourceType.BROKER:
        _change_broker(broker, name, ops, replace, validate_only)
    elif resource_type == ConfigResourceType.GROUP and ops is not None:  # Kafka: incremental only
        _change_group(broker, name, ops, validate_only)
    else:
        raise Refusal(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource_type}")


def _each_resource(resources: list[Any], run: Callable[[Any], None]) -> list[tuple[ErrorCode, str | None, int, str]]:
    """Run ``run`` on each resource named once: (error code, message, type, name) of each."""
    seen: dict[tuple[int, str], int] = {}
    for res in resources:
        key = (res.resource_type, res.resource_name)
        seen[key] = seen.get(key, 0) + 1
    out = []
    for res in resources:
        code, message = ErrorCode.NONE, None
        try:
            if seen[(res.resource_type, res.resource_name)] > 1:
                raise Refusal(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            run(res)
        except Refusal as e:
            code, message = e.code, str(e)
        out.append((code, message, res.resource_type, res.resource_name))
    return out


def _may_alter(ctx: RequestContext, res: Any) -> None:
    """Refuse a resource whose configs the principal may not ALTER_CONFIGS (Kafka's authorization error)."""
    denied = config_denied(ctx, res.resource_type, res.resource_name, AclOperation.ALTER_CONFIGS)
    if denied is not None:
        raise Refusal(denied, DENIED_MESSAGES[denied])


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, access=_ACCESS)
async def incremental_alter_configs(ctx: RequestContext,
                                    req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    def run(res: Any) -> None:
        _may_alter(ctx, res)
        change(ctx.broker, res.resource_type, res.resource_name,
               [(c.name, c.config_operation, c.value) for c in res.configs], None, req.validate_only)

    results = _each_resource(req.resources, run)
    cls = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[
        cls(error_code=c, error_message=m, resource_type=t, resource_name=n) for c, m, t, n in results])


@handles(ApiKey.ALTER_CONFIGS, access=_ACCESS)
async def alter_configs(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    def run(res: Any) -> None:
        _may_alter(ctx, res)
        change(ctx.broker, res.resource_type, res.resource_name, None, {c.name: c.value for c in res.configs},
               req.validate_only)

    results = _each_resource(req.resources, run)
    cls = AlterConfigsResponse.AlterConfigsResourceResponse
    return AlterConfigsResponse(throttle_time_ms=0, responses=[
        cls(error_code=c, error_message=m, resource_type=t, resource_name=n) for c, m, t, n in results])
