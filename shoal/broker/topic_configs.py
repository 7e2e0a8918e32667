"""Topic configs: Kafka's names, their broker-level defaults, validation.

A topic config left unset takes the broker's value of its synonym
(`retention.ms` <- `log.retention.ms`), as in Kafka. DescribeConfigs reports
both, with Kafka's config sources.
"""

from __future__ import annotations

import re

from shoal.broker.config import PASSIVE_DYNAMIC_BROKER_DEFAULTS, BrokerConfig
from shoal.broker.config_types import BOOLEAN, DOUBLE, INT, LONG, SHORT, config_type
from shoal.storage import LogConfig

# topic config -> broker config it defaults from (None: fixed default below)
TOPIC_CONFIG_SYNONYMS: dict[str, str | None] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": None,
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    # Kafka 3.x's, removed in 4.0; shoal serves both, so it keeps them
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.format.version": "log.message.format.version",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.insync.replicas": "min.insync.replicas",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
}

# Kafka's other topic configs: accepted, kept and reported with Kafka's defaults (so tools and
# admin clients that set them work), but shoal does not act on them (one storage, no tiering,
# no throttles).
PASSIVE_TOPIC_DEFAULTS: dict[str, str] = {
    "compression.gzip.level": "-1", "compression.lz4.level": "9", "compression.zstd.level": "3",
    "file.delete.delay.ms": "60000", "follower.replication.throttled.replicas": "",
    "leader.replication.throttled.replicas": "", "local.retention.bytes": "-2", "local.retention.ms": "-2",
    "message.downconversion.enable": "true",
    "preallocate": "false", "remote.storage.enable": "false", "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0", "unclean.leader.election.enable": "false",
    # Kafka 4.x's: tiered-storage upload and deletion controls (shoal has no tiered storage, as
    # remote.storage.enable above) and the share-group dead-letter flag (no share groups yet)
    "remote.copy.lag.bytes": "-1", "remote.copy.lag.ms": "0", "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false", "errors.deadletterqueue.group.enable": "false",
}
TOPIC_CONFIG_SYNONYMS.update(dict.fromkeys(PASSIVE_TOPIC_DEFAULTS))
# Those of them (and compression.type) that default from a broker config in Kafka, listed as
# their synonym by DescribeConfigs; the broker configs are passive too (config.py).
PASSIVE_TOPIC_SYNONYMS: dict[str, str] = {
    "compression.type": "compression.type", "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level", "compression.zstd.level": "compression.zstd.level",
    "file.delete.delay.ms": "log.segment.delete.delay.ms", "local.retention.bytes": "log.local.retention.bytes",
    "local.retention.ms": "log.local.retention.ms", "preallocate": "log.preallocate",
    "remote.copy.lag.bytes": "log.remote.copy.lag.bytes", "remote.copy.lag.ms": "log.remote.copy.lag.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}
TOPIC_CONFIG_SYNONYMS.update(PASSIVE_TOPIC_SYNONYMS)

# Lower-precedence broker synonyms, consulted when the main one is unset (as Kafka's synonyms lists).
TOPIC_CONFIG_FALLBACK_SYNONYMS: dict[str, tuple[str, ...]] = {
    "retention.ms": ("log.retention.minutes", "log.retention.hours"),
    "segment.ms": ("log.roll.hours",),
}

# Broker configs that IncrementalAlterConfigs / AlterConfigs may change at runtime: as Kafka, the
# broker-side synonyms of topic configs (new defaults for topics that do not set their own).
# Kafka's replication throttles (DynamicConfig.Broker, set by kafka-reassign-partitions --throttle): dynamic
# only, with no static default that DescribeConfigs lists; kept and reported, not acted on (replicas share
# storage, nothing is copied).
THROTTLE_RATE_CONFIGS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                   "replica.alter.log.dirs.io.max.bytes.per.second"})
DYNAMIC_BROKER_CONFIGS = frozenset({*(b for b in TOPIC_CONFIG_SYNONYMS.values() if b), "producer.id.expiration.ms",
                                    *PASSIVE_DYNAMIC_BROKER_DEFAULTS, *THROTTLE_RATE_CONFIGS})
# Topic configs that are lists (APPEND / SUBTRACT apply to them).
LIST_TOPIC_CONFIGS = frozenset({"cleanup.policy"})

_FIXED_DEFAULTS = {"compression.type": "producer", **PASSIVE_TOPIC_DEFAULTS}
# Topic configs the log itself does not use.
_NOT_LOG_CONFIGS = {*_FIXED_DEFAULTS, "min.insync.replicas", "message.format.version"}
_COMPRESSION_TYPES = {"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}


class InvalidTopicConfig(ValueError):
    """A topic config name or value Kafka would reject (INVALID_CONFIG)."""


class InvalidBrokerConfig(ValueError):
    """A dynamic broker config change Kafka would reject (INVALID_REQUEST, as Kafka answers)."""


def valid_message_format_version(value: str) -> bool:
    """Kafka 3.x's check of message.format.version (MetadataVersion.fromVersionString): a
    release it knows, "0.x.y" or "x.y", optionally with its "-IVn" suffix and further parts.
    Since 3.0 the value is ignored (every batch is v2) but still checked."""
    return re.fullmatch(r"(0\.(8\.[0-2]|9\.0|10\.[0-2]|11\.0)|1\.[01]|2\.[0-8]|3\.[0-9])(-IV\d+)?(\.\d+)*",
                        value.strip()) is not None


def valid_passive_value(name: str, value: str) -> bool:
    """Whether ``value`` parses as the type Kafka gives config ``name`` (for the configs shoal
    keeps without acting on them)."""
    kind = config_type(name)
    try:
        if kind in (INT, LONG):
            int(value)
        elif kind == SHORT:
            return -32768 <= int(value) <= 32767
        elif kind == DOUBLE:
            float(value)
        elif kind == BOOLEAN:
            return value.lower() in ("true", "false")
    except ValueError:
        return False
    return True


def broker_topic_defaults(config: BrokerConfig) -> dict[str, str]:
    """The value every topic config takes when the topic does not set it."""
    out: dict[str, str] = {}
    for name, synonym in TOPIC_CONFIG_SYNONYMS.items():
        if synonym is None:
            out[name] = _FIXED_DEFAULTS[name]
        elif name == "retention.ms":
            out[name] = str(config.retention_ms)
        elif name == "segment.ms":
            out[name] = str(config.segment_ms)
        elif name == "flush.ms":
            value = config.get(synonym).strip()
            out[name] = value or "9223372036854775807"
        else:
            out[name] = config.get(synonym)
    return out


def log_config_defaults(config: BrokerConfig) -> LogConfig:
    base = LogConfig(producer_id_expiration_ms=config.get_int("producer.id.expiration.ms"))
    return LogConfig.from_topic_configs(broker_topic_defaults(config), base)


def _check_min_insync(name: str, value: str) -> None:
    """Kafka's ConfigDef checks for an INT at least 1, with its messages (a Java int: overflow is "Not a number")."""
    try:
        n = int(value.strip())
        if not -(1 << 31) <= n < 1 << 31:
            raise ValueError
    except ValueError:
        raise InvalidTopicConfig(f"Invalid value {value} for configuration {name}: Not a number of type INT") from None
    if n < 1:
        raise InvalidTopicConfig(f"Invalid value {value} for configuration {name}: Value must be at least 1")


def topic_log_config(configs: dict[str, str], defaults: LogConfig) -> LogConfig:
    """Validate a topic's configs and build its LogConfig."""
    for name, value in configs.items():
        if name not in TOPIC_CONFIG_SYNONYMS:
            raise InvalidTopicConfig(f"Unknown topic config name: {name}")
        if name == "compression.type" and value not in _COMPRESSION_TYPES:
            raise InvalidTopicConfig(f"Invalid value {value} for configuration compression.type")
        if name == "min.insync.replicas":
            _check_min_insync(name, value)
        if name == "message.format.version" and not valid_message_format_version(value):
            raise InvalidTopicConfig(f"Invalid value {value} for configuration {name}: "
                                     f"Version {value} is not a valid version")
        if name in PASSIVE_TOPIC_DEFAULTS and not valid_passive_value(name, value):
            raise InvalidTopicConfig(f"Invalid value {value} for configuration {name}")
    try:
        return LogConfig.from_topic_configs(
            {k: v for k, v in configs.items() if k not in _NOT_LOG_CONFIGS}, defaults)
    except ValueError as e:
        raise InvalidTopicConfig(str(e)) from None
