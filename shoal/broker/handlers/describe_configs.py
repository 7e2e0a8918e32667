"""DescribeConfigs for topics (resource type 2) and brokers (type 4), with Kafka's config sources:
a topic's own value, then its broker synonym's dynamic (per node, cluster default), static and
default values."""

from __future__ import annotations

from itertools import dropwhile
from typing import TYPE_CHECKING

from shoal.broker.config import DEFAULTS, BrokerConfig
from shoal.broker.config_types import config_type
from shoal.broker.handlers.topic_admin import SOURCE_DEFAULT, SOURCE_STATIC_BROKER, SOURCE_TOPIC
from shoal.broker.topic_configs import (
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIG_FALLBACK_SYNONYMS,
    TOPIC_CONFIG_SYNONYMS,
    broker_topic_defaults,
)
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.describe_configs_response import DescribeConfigsResponse

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext

TOPIC = 2
BROKER = 4
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


def broker_layers(config: BrokerConfig, key: str) -> list[tuple[str, int]]:
    """Where a broker config's value comes from, highest precedence first: (value, source)."""
    out = []
    if key in config.dynamic_node:
        out.append((config.dynamic_node[key], SOURCE_DYNAMIC_BROKER))
    if key in config.dynamic_default:
        out.append((config.dynamic_default[key], SOURCE_DYNAMIC_DEFAULT_BROKER))
    static = config.props.get(key)
    if static is not None and (key in config.explicit or static != DEFAULTS.get(key)):
        out.append((static, SOURCE_STATIC_BROKER))
    if DEFAULTS.get(key):  # an empty default means "unset": a lower synonym decides
        out.append((DEFAULTS[key], SOURCE_DEFAULT))
    return out


def broker_synonym_layers(config: BrokerConfig, key: str, cluster_default: bool) -> list[tuple[str, int]]:
    """A broker config's layers as DescribeConfigs lists them: for the cluster-wide default resource
    (name "") only its dynamic default, as Kafka (ConfigHelper: perBrokerConfig or that source)."""
    layers = broker_layers(config, key)
    if cluster_default:
        return [la for la in layers if la[1] == SOURCE_DYNAMIC_DEFAULT_BROKER]
    return layers


def topic_synonym_layers(config: BrokerConfig, topic_key: str) -> list[tuple[str, str, int]]:
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


def register(broker: Broker) -> None:
    config = broker.config

    def topic_entries(name: str, include_synonyms: bool) -> list[Entry]:
        info = broker.metadata.topics[name]
        defaults = broker_topic_defaults(config)
        out = []
        for key, default in sorted(defaults.items()):
            synonyms = []
            layers = topic_synonym_layers(config, key)
            if key in info.configs:
                value, source = info.configs[key], SOURCE_TOPIC
                synonyms.append(Synonym(name=key, value=value, source=SOURCE_TOPIC))
            else:
                value = default
                source = layers[0][2] if layers else SOURCE_DEFAULT
            if include_synonyms:
                synonyms += [Synonym(name=k, value=v, source=src) for k, v, src in layers]
            out.append(Entry(name=key, value=value, read_only=False, is_default=source == SOURCE_DEFAULT,
                             config_source=source, is_sensitive=False, config_type=config_type(key),
                             synonyms=synonyms if include_synonyms else []))
        return out

    def broker_entries(resource: str, include_synonyms: bool) -> list[Entry]:
        if resource == "":  # the cluster-wide default resource: its dynamic configs only, as Kafka
            keys = sorted(config.dynamic_default)
        else:
            keys = sorted({*config.props, *config.dynamic_default, *config.dynamic_node})
        out = []
        for k in keys:
            layers = broker_synonym_layers(config, k, cluster_default=resource == "")
            value, source = layers[0] if layers else (None, SOURCE_DEFAULT)  # unset, no default: null
            out.append(Entry(name=k, value=value, read_only=k not in DYNAMIC_BROKER_CONFIGS,
                             is_default=source == SOURCE_DEFAULT, config_source=source, is_sensitive=False,
                             config_type=config_type(k),
                             synonyms=[Synonym(name=k, value=v, source=src) for v, src in layers]
                             if include_synonyms else []))
        return out

    async def describe_configs(ctx: RequestContext, req) -> DescribeConfigsResponse:
        results = []
        for res in req.resources:
            result = DescribeConfigsResponse.DescribeConfigsResult(
                error_code=ErrorCode.NONE, error_message=None, resource_type=res.resource_type,
                resource_name=res.resource_name, configs=[])
            if res.resource_type == TOPIC:
                if res.resource_name not in broker.metadata.topics:
                    result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    result.error_message = f"Topic {res.resource_name} does not exist"
                else:
                    result.configs = topic_entries(res.resource_name, ctx.api_version >= 1 and req.include_synonyms)
            elif res.resource_type == BROKER:
                if res.resource_name not in ("", *map(str, broker.nodes)):
                    result.error_code = ErrorCode.INVALID_REQUEST
                    result.error_message = f"Unknown broker {res.resource_name}"
                else:
                    result.configs = broker_entries(res.resource_name,
                                                    ctx.api_version >= 1 and req.include_synonyms)
            else:
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = f"Unsupported resource type {res.resource_type}"
            if res.configuration_keys and result.configs:  # null or empty: every config, as Kafka
                keys = set(res.configuration_keys)
                result.configs = [c for c in result.configs if c.name in keys]
            if ctx.api_version >= 1:  # IsDefault is a v0 field; ConfigSource replaced it
                for c in result.configs:
                    c.is_default = False
            results.append(result)
        return DescribeConfigsResponse(throttle_time_ms=0, results=results)

    broker.apis.register(32, describe_configs)
