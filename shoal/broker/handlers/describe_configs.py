"""DescribeConfigs for topics (resource type 2) and brokers (type 4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.config import DEFAULTS
from shoal.broker.handlers.topic_admin import SOURCE_DEFAULT, SOURCE_STATIC_BROKER, SOURCE_TOPIC
from shoal.broker.topic_configs import TOPIC_CONFIG_SYNONYMS, broker_topic_defaults
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.describe_configs_response import DescribeConfigsResponse

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext

TOPIC = 2
BROKER = 4
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


def register(broker: Broker) -> None:
    config = broker.config

    def topic_entries(name: str, include_synonyms: bool) -> list[Entry]:
        info = broker.metadata.topics[name]
        defaults = broker_topic_defaults(config)
        out = []
        for key, default in sorted(defaults.items()):
            synonyms = []
            if key in info.configs:
                value, source = info.configs[key], SOURCE_TOPIC
                synonyms.append(Synonym(name=key, value=value, source=SOURCE_TOPIC))
            else:
                value = default
                broker_key = TOPIC_CONFIG_SYNONYMS[key]
                set_by_user = broker_key is not None and config.get(broker_key) != DEFAULTS.get(broker_key)
                source = SOURCE_STATIC_BROKER if set_by_user else SOURCE_DEFAULT
            if include_synonyms and TOPIC_CONFIG_SYNONYMS[key]:
                synonyms.append(Synonym(name=TOPIC_CONFIG_SYNONYMS[key], value=default, source=SOURCE_DEFAULT))
            out.append(Entry(name=key, value=value, read_only=False, is_default=source == SOURCE_DEFAULT,
                             config_source=source, is_sensitive=False,
                             synonyms=synonyms if include_synonyms else []))
        return out

    def broker_entries() -> list[Entry]:
        return [Entry(name=k, value=v, read_only=True, is_default=DEFAULTS.get(k) == v,
                      config_source=SOURCE_DEFAULT if DEFAULTS.get(k) == v else SOURCE_STATIC_BROKER,
                      is_sensitive=False, synonyms=[])
                for k, v in sorted(config.props.items())]

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
                    result.configs = broker_entries()
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
