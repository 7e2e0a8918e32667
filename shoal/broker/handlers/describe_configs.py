"""DescribeConfigs for topics and brokers (ConfigResource.Type TOPIC, BROKER), with Kafka's
config sources: a topic's own value, then its broker synonym's dynamic (per node, cluster
default), static and default values."""

from __future__ import annotations

from itertools import dropwhile
from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import DENIED_MESSAGES, config_denied
from shoal.broker.config import (
    DEFAULTS,
    EMPTY_STRING_DEFAULTS,
    BrokerConfig,
    ConfigResourceType,
    ConfigSource,
)
from shoal.broker.config_types import config_type, is_sensitive
from shoal.broker.group_configs import GROUP_CONFIGS, broker_values, default_value
from shoal.broker.topic_configs import (
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIG_FALLBACK_SYNONYMS,
    TOPIC_CONFIG_SYNONYMS,
    broker_topic_defaults,
)
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_configs_response import DescribeConfigsResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.broker.services import BrokerServices
    from shoal.protocol.generated.describe_configs_request import DescribeConfigsRequest

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


def broker_layers(config: BrokerConfig, key: str) -> list[tuple[str, ConfigSource]]:
    """Where a broker config's value comes from, highest precedence first: (value, source)."""
    out = []
    if key in config.dynamic_node:
        out.append((config.dynamic_node[key], ConfigSource.DYNAMIC_BROKER_CONFIG))
    if key in config.dynamic_default:
        out.append((config.dynamic_default[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    static = config.props.get(key)
    if static is not None and (key in config.explicit or static != DEFAULTS.get(key)):
        out.append((static, ConfigSource.STATIC_BROKER_CONFIG))
    if DEFAULTS.get(key) or key in EMPTY_STRING_DEFAULTS:  # else an empty default means "unset"
        out.append((DEFAULTS[key], ConfigSource.DEFAULT_CONFIG))
    return out


def broker_synonym_layers(config: BrokerConfig, key: str, cluster_default: bool) -> list[tuple[str, ConfigSource]]:
    """A broker config's layers as DescribeConfigs lists them: for the cluster-wide default resource
    (name "") only its dynamic default, as Kafka (ConfigHelper: perBrokerConfig or that source)."""
    layers = broker_layers(config, key)
    if cluster_default:
        return [la for la in layers if la[1] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    return layers


def topic_synonym_layers(config: BrokerConfig, topic_key: str) -> list[tuple[str, str, ConfigSource]]:
    """A topic config's broker synonyms as Kafka lists them (ConfigHelper.configSynonyms): by
    source, highest precedence first, then in synonym order; every entry before the first of the
    main synonym is dropped (retention.ms lists log.retention.hours only under a log.retention.ms)."""
    broker_key = TOPIC_CONFIG_SYNONYMS[topic_key]
    if broker_key is None:
        return []
    layers = [(k, v, src) for k in (broker_key, *TOPIC_CONFIG_FALLBACK_SYNONYMS.get(topic_key, ()))
              for v, src in broker_layers(config, k)]
    layers.sort(key=lambda layer: layer[2])  # stable: synonym order kept within a source
    return list(dropwhile(lambda layer: layer[0] != broker_key, layers))


def topic_entries(broker: BrokerServices, name: str, include_synonyms: bool) -> list[Entry]:
    config = broker.config
    info = broker.metadata.topics[name]
    out = []
    for key, default in sorted(broker_topic_defaults(config).items()):
        synonyms = []
        layers = topic_synonym_layers(config, key)
        if key in info.configs:
            value, source = info.configs[key], ConfigSource.TOPIC_CONFIG
            synonyms.append(Synonym(name=key, value=value, source=ConfigSource.TOPIC_CONFIG))
        else:
            value = default
            source = layers[0][2] if layers else ConfigSource.DEFAULT_CONFIG
        if include_synonyms:
            synonyms += [Synonym(name=k, value=v, source=src) for k, v, src in layers]
        out.append(Entry(name=key, value=value, read_only=False, is_default=source == ConfigSource.DEFAULT_CONFIG,
                         config_source=source, is_sensitive=False, config_type=config_type(key),
                         synonyms=synonyms if include_synonyms else []))
    return out


def broker_entries(config: BrokerConfig, resource: str, include_synonyms: bool) -> list[Entry]:
    if resource == "":  # the cluster-wide default resource: its dynamic configs only, as Kafka
        keys = sorted(config.dynamic_default)
    else:
        keys = sorted({*config.props, *config.dynamic_default, *config.dynamic_node})
    out = []
    for k in keys:
        layers = broker_synonym_layers(config, k, cluster_default=resource == "")
        value, source = layers[0] if layers else (None, ConfigSource.DEFAULT_CONFIG)  # unset, no default: null
        secret = is_sensitive(k)  # a secret's value never leaves the broker, as Kafka
        out.append(Entry(name=k, value=None if secret else value, read_only=k not in DYNAMIC_BROKER_CONFIGS,
                         is_default=source == ConfigSource.DEFAULT_CONFIG, config_source=source,
                         is_sensitive=secret, config_type=config_type(k),
                         synonyms=[Synonym(name=k, value=None if secret else v, source=src) for v, src in layers]
                         if include_synonyms else []))
    return out


def _describe_resource(broker: BrokerServices, res: DescribeConfigsRequest.DescribeConfigsResource,
                       include_synonyms: bool) -> Result:
    """One resource's configs, or Kafka's error for a resource that does not exist."""
    result = Result(error_code=ErrorCode.NONE, error_message=None, resource_type=res.resource_type,
                    resource_name=res.resource_name, configs=[])
    if res.resource_type == ConfigResourceType.TOPIC:
        if res.resource_name not in broker.metadata.topics:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = f"Topic {res.resource_name} does not exist"
        else:
            result.configs = topic_entries(broker, res.resource_name, include_synonyms)
    elif res.resource_type == ConfigResourceType.BROKER:
        if res.resource_name not in ("", *map(str, broker.nodes)):
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"Unknown broker {res.resource_name}"
        else:
            result.configs = broker_entries(broker.config, res.resource_name, include_synonyms)
    elif res.resource_type == ConfigResourceType.GROUP:
        result.configs = group_entries(broker, res.resource_name, include_synonyms)
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = f"Unsupported resource type {res.resource_type}"
    return result


def group_entries(broker: BrokerServices, name: str, include_synonyms: bool) -> list[Entry]:
    """A group's configs (KIP-848): its overrides (GROUP_CONFIG), else its broker synonyms' values."""
    overrides = broker.metadata.group_configs.get(name, {})
    values = broker_values(broker.config.get)
    out = []
    for key, (synonym, kind, _) in sorted(GROUP_CONFIGS.items()):
        fallback = default_value(key, values)
        layers = [(synonym, fallback, ConfigSource.DEFAULT_CONFIG)]
        if key in overrides:
            layers.insert(0, (key, overrides[key], ConfigSource.GROUP_CONFIG))
        out.append(Entry(name=key, value=layers[0][1], read_only=False, is_default=False,
                         config_source=layers[0][2], is_sensitive=False, config_type=kind,
                         synonyms=[Synonym(name=n, value=v, source=src) for n, v, src in layers]
                         if include_synonyms else []))
    return out


@handles(ApiKey.DESCRIBE_CONFIGS, access=(Access(ResourceType.TOPIC, AclOperation.DESCRIBE_CONFIGS),
                                          Access(ResourceType.CLUSTER, AclOperation.DESCRIBE_CONFIGS)))
async def describe_configs(ctx: RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    include_synonyms = ctx.api_version >= 1 and req.include_synonyms
    results = []
    for res in req.resources:
        denied = config_denied(ctx, res.resource_type, res.resource_name, AclOperation.DESCRIBE_CONFIGS)
        if denied is not None:
            results.append(Result(error_code=denied, error_message=DENIED_MESSAGES[denied],
                                  resource_type=res.resource_type, resource_name=res.resource_name, configs=[]))
            continue
        result = _describe_resource(ctx.broker, res, include_synonyms)
        if res.configuration_keys and result.configs:  # null or empty: every config, as Kafka
            keys = set(res.configuration_keys)
            result.configs = [c for c in result.configs if c.name in keys]
        if ctx.api_version >= 1:  # IsDefault is a v0 field; ConfigSource replaced it
            for c in result.configs:
                c.is_default = False
        results.append(result)
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
