"""The data source's options: Spark's Kafka option names and meanings, validated with Spark's errors.

Spark hands a Python data source its options with lower-cased keys, so every
lookup here is by the lower-cased name. ``kafka.*`` options go to shoal's
client (minus the prefix); the ones Spark's Kafka connector refuses are
refused with its reasons.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.client.security import SECURITY_KEYS, SecurityConfigError, validate_security

SPARK_KAFKA_FORBIDDEN_CONSUMER = {
    "auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
                         "'startingOffsets' to 'earliest' or 'latest' to specify where to start.",
    "key.deserializer": "Kafka option 'key.deserializer' is not supported, as keys are deserialized as byte "
                        "arrays. Use DataFrame operations to explicitly deserialize the keys.",
    "value.deserializer": "Kafka option 'value.deserializer' is not supported, as values are deserialized as "
                          "byte arrays. Use DataFrame operations to explicitly deserialize the values.",
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported as offsets are tracked in the "
                          "query's checkpoint (use 'commitOffsetsToGroup' to publish them to a group).",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported as the source reads raw bytes.",
}
SPARK_KAFKA_FORBIDDEN_PRODUCER = {
    "key.serializer": "Kafka option 'key.serializer' is not supported, as keys are serialized as byte arrays. "
                      "Use DataFrame operations to explicitly serialize the keys into binary or string.",
    "value.serializer": "Kafka option 'value.serializer' is not supported, as values are serialized as byte "
                        "arrays. Use DataFrame operations to explicitly serialize the values into binary or "
                        "string.",
}
_STRATEGIES = ("subscribe", "subscribepattern", "assign")
_SPARK_NAMES = {"maxoffsetspertrigger": "maxOffsetsPerTrigger", "minoffsetspertrigger": "minOffsetsPerTrigger",
                "maxtriggerdelay": "maxTriggerDelay"}
_log = logging.getLogger(__name__)
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
EARLIEST, LATEST = -2, -1
_BASE_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
             "timestampType int")


def spark_ddl(include_headers: bool) -> str:
    """The source's schema as Spark DDL (Spark's Kafka source schema)."""
    return _BASE_DDL + (", headers array<struct<key:string,value:binary>>" if include_headers else "")


class OptionError(ValueError):
    """An option Spark's Kafka connector would refuse; the message says why."""


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"Option '{name}' must be true or false, got {raw!r}")
    return value == "true"


def _int(opts: Mapping[str, str], name: str, default: int | None, minimum: int | None = None) -> int | None:
    raw = opts.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"Option '{name}' must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise OptionError(f"Option '{name}' must be at least {minimum}, got {value}")
    return value


def duration_ms(text: str, name: str) -> int:
    """Spark's time strings: ``15m``, ``30s``, ``250ms``, ``1h``, ``2d`` (no unit: ms)."""
    m = _DURATION.match(str(text))
    if m is None:
        raise OptionError(f"Option '{name}' is not a duration (like 15m, 30s, 500ms): {text!r}")
    return int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()]


_CLIENT_PARAMS = ("request.timeout.ms", "retry.backoff.ms", "client.id", "socket.connection.setup.timeout.ms",
                  "reconnect.backoff.ms", "reconnect.backoff.max.ms", "default.api.timeout.ms")
# The kafka.* parameters format("shoal") acts on, reading and writing.
SOURCE_PARAMS = frozenset({"bootstrap.servers", *_CLIENT_PARAMS, "isolation.level", "max.partition.fetch.bytes",
                           "fetch.max.bytes"})
SINK_PARAMS = frozenset({"bootstrap.servers", *_CLIENT_PARAMS, "linger.ms", "batch.size", "buffer.memory",
                         "max.block.ms", "delivery.timeout.ms", "max.in.flight.requests.per.connection", "acks",
                         "compression.type", "transaction.timeout.ms", "partitioner.class"})


def kafka_params(opts: Mapping[str, str], forbidden: Mapping[str, str],
                 honoured: frozenset[str] = SOURCE_PARAMS) -> dict[str, str]:
    """The ``kafka.*`` options, prefix removed, for shoal's client.

    None is dropped silently: what Spark's connector refuses is refused with its message; security
    settings (TLS, SASL: Kafka's names) go to shoal's client, and one it cannot use fails the query
    naming it; the rest, which tune the Java client's internals, are named in a warning.
    """
    out = {}
    for key, value in opts.items():
        if key.startswith("kafka."):
            name = key[len("kafka."):]
            if name in forbidden:
                raise OptionError(forbidden[name])
            out[name] = value
    if not out.get("bootstrap.servers"):
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
    try:  # a security setting shoal's client cannot use fails the query, as Kafka's client would
        validate_security({k: v for k, v in out.items() if k in SECURITY_KEYS})
    except SecurityConfigError as e:
        raise OptionError(f"Kafka option {e}") from None
    ignored = sorted(k for k in out if k not in honoured and k not in SECURITY_KEYS)
    if ignored:
        _log.warning("Kafka options ignored by format(\"shoal\"), which does not run Kafka's Java client "
                     "they tune: %s", ", ".join(ignored))
    return out


def client_config(params: Mapping[str, str]) -> dict[str, Any]:
    """Client settings shoal's client understands, from Kafka parameters."""
    cfg: dict[str, Any] = {"bootstrap.servers": params["bootstrap.servers"], "client.id": "shoal-spark"}
    for name in _CLIENT_PARAMS:
        if name in params:
            cfg[name] = int(params[name]) if params[name].isdigit() else params[name]
    cfg.update({k: v for k, v in params.items() if k in SECURITY_KEYS})
    return cfg


def parse_offsets_json(text: str, name: str) -> dict[str, dict[int, int]]:
    """``{"topic": {"0": 23, "1": -2}}`` -> ``{"topic": {0: 23, 1: -2}}``."""
    try:
        raw = json.loads(text)
        return {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f"Option '{name}' must be 'earliest', 'latest' or JSON like "
                          f"{{\"topicA\":{{\"0\":23,\"1\":-1}}}}, got {text!r}") from None


@dataclass
class OffsetSpec:
    """Where reading starts or ends: earliest/latest everywhere, per-partition offsets, or times."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    timestamp: int = -1


@dataclass
class SourceOptions:
    bootstrap: str
    params: dict[str, str]
    strategy: str  # subscribe | subscribepattern | assign
    topics: list[str]
    pattern: str | None
    assign: dict[str, list[int]]
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: str
    fail_on_data_loss: bool
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    include_headers: bool
    read_committed: bool
    poll_timeout_ms: int
    max_bytes: int
    commit_group: str | None
    max_records_per_partition: int | None = None
    fetch_offset_attempts: int = 3
    fetch_offset_retry_interval_ms: int = 1000

    @property
    def client(self) -> dict[str, Any]:
        return client_config(self.params)


def _offset_spec(opts: Mapping[str, str], prefix: str, default: str, streaming: bool) -> OffsetSpec:
    ts = opts.get(f"{prefix}timestamp")
    if ts is not None:
        return OffsetSpec("timestamp", timestamp=_int(opts, f"{prefix}timestamp", -1, minimum=0) or 0)
    by_ts = opts.get(f"{prefix}offsetsbytimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", parse_offsets_json(by_ts, f"{prefix}OffsetsByTimestamp"))
    text = opts.get(f"{prefix}offsets", default).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())
    return OffsetSpec("offsets", parse_offsets_json(text, f"{prefix}Offsets"))


def _strategy(opts: Mapping[str, str]) -> tuple[str, list[str], str | None, dict[str, list[int]]]:
    """Which of subscribe, subscribePattern and assign is given (exactly one must be), and its value:
    (strategy, topics, pattern, assigned partitions)."""
    given = [s for s in _STRATEGIES if s in opts]
    if not given:
        raise OptionError("One of the following options must be specified for Kafka source: subscribe, "
                          "subscribePattern, assign. See the docs for more details.")
    if len(given) > 1:
        raise OptionError("Only one of the following options can be specified for Kafka source: subscribe, "
                          "subscribePattern, assign. See the docs for more details.")
    strategy = given[0]
    if strategy == "subscribe":
        return strategy, _subscribed_topics(opts["subscribe"]), None, {}
    if strategy == "subscribepattern":
        return strategy, [], _subscribed_pattern(opts["subscribepattern"]), {}
    return strategy, [], None, _assigned_partitions(opts["assign"])


def _subscribed_topics(text: str) -> list[str]:
    topics = [t.strip() for t in text.split(",") if t.strip()]
    if not topics:
        raise OptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{text}'")
    return topics


def _subscribed_pattern(text: str) -> str:
    pattern = text.strip()
    if not pattern:
        raise OptionError("Pattern to subscribe is empty as specified value for option 'subscribePattern' "
                          f"is '{text}'")
    try:
        re.compile(pattern)
    except re.error as e:
        raise OptionError(f"Option 'subscribePattern' is not a valid regular expression: {e}") from None
    return pattern


def _assigned_partitions(text: str) -> dict[str, list[int]]:
    try:
        raw = json.loads(text)
        assign = {str(t): [int(p) for p in ps] for t, ps in raw.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError("Option 'assign' must be JSON like {\"topicA\":[0,1],\"topicB\":[2,4]}, got "
                          f"{text!r}") from None
    if not assign:
        raise OptionError(f"No topic partitions to assign as specified value for option 'assign' is '{text}'")
    return assign


def _check_offset_range(opts: Mapping[str, str], starting: OffsetSpec, ending: OffsetSpec, streaming: bool) -> None:
    """Spark's rules: no ending offsets in streaming queries; a batch starts before latest and ends
    after earliest."""
    if streaming:
        for name in ("endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"):
            if name in opts:
                raise OptionError(f"Option '{name}' is not supported in streaming queries (ending offsets "
                                  "belong to batch queries)")
        return
    if starting.kind == "latest":
        raise OptionError("Starting offset can't be latest for batch queries on Kafka")
    if ending.kind == "earliest":
        raise OptionError("Ending offset can't be earliest for batch queries on Kafka")
    if ending.kind == "offsets" and any(o == EARLIEST for ps in ending.offsets.values() for o in ps.values()):
        raise OptionError("Ending offset for a partition can't be earliest (-2) for batch queries on Kafka")
    if starting.kind == "offsets" and any(o == LATEST for ps in starting.offsets.values() for o in ps.values()):
        raise OptionError("Starting offset for a partition can't be latest (-1) for batch queries on Kafka")


def _trigger_limits(opts: Mapping[str, str], streaming: bool) -> tuple[int | None, int | None]:
    """maxOffsetsPerTrigger and minOffsetsPerTrigger (batch queries ignore them, with a warning)."""
    max_rows = _int(opts, "maxoffsetspertrigger", None, minimum=1)
    min_rows = _int(opts, "minoffsetspertrigger", None, minimum=1)
    if min_rows is not None and max_rows is not None and min_rows > max_rows:
        raise OptionError(f"The value of minOffsetPerTrigger({min_rows}) is higher than the "
                          f"maxOffsetsPerTrigger({max_rows}).")
    if not streaming:
        for name in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
            if name in opts:  # as Spark's connector: a warning, and the batch reads everything
                _log.warning("%s option ignored in batch queries", _SPARK_NAMES.get(name, name))
    return max_rows, min_rows


def source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = {k.lower(): str(v) for k, v in options.items()}
    params = kafka_params(opts, SPARK_KAFKA_FORBIDDEN_CONSUMER)
    strategy, topics, pattern, assign = _strategy(opts)
    starting = _offset_spec(opts, "starting", "latest" if streaming else "earliest", streaming)
    ending = _offset_spec(opts, "ending", "latest", streaming)
    _check_offset_range(opts, starting, ending, streaming)
    strategy_ts = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy_ts not in ("error", "latest"):
        raise OptionError("Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got "
                          f"{strategy_ts!r}")
    isolation = params.get("isolation.level", "read_uncommitted")
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"Option 'kafka.isolation.level' must be read_uncommitted or read_committed, got "
                          f"{isolation!r}")
    max_rows, min_rows = _trigger_limits(opts, streaming)
    return SourceOptions(
        bootstrap=params["bootstrap.servers"], params=params, strategy=strategy, topics=topics, pattern=pattern,
        assign=assign, starting=starting, ending=ending, timestamp_strategy=strategy_ts,
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        max_offsets_per_trigger=max_rows, min_offsets_per_trigger=min_rows,
        max_trigger_delay_ms=duration_ms(opts.get("maxtriggerdelay", "15m"), "maxTriggerDelay"),
        min_partitions=_int(opts, "minpartitions", None, minimum=1),
        include_headers=_bool(opts, "includeheaders", False),
        read_committed=isolation == "read_committed",
        poll_timeout_ms=_int(opts, "kafkaconsumer.polltimeoutms", 120_000, minimum=1) or 120_000,
        max_bytes=int(params.get("max.partition.fetch.bytes", params.get("fetch.max.bytes", 4 * 1024 * 1024))),
        commit_group=opts.get("commitoffsetstogroup") or None,
        max_records_per_partition=_int(opts, "maxrecordsperpartition", None, minimum=1),
        fetch_offset_attempts=_int(opts, "fetchoffset.numretries", 3, minimum=1) or 3,
        fetch_offset_retry_interval_ms=_int(opts, "fetchoffset.retryintervalms", 1000, minimum=0) or 0,
    )


@dataclass
class SinkOptions:
    bootstrap: str
    params: dict[str, str]
    topic: str | None
    exactly_once: bool
    transactional_id_prefix: str
    transaction_timeout_ms: int
    compression: str
    partitioner: str  # default | round_robin | uniform_sticky: for rows without a partition

    @property
    def client(self) -> dict[str, Any]:
        return client_config(self.params)


# Kafka's own partitioners that the sink follows; a custom Java class cannot run here.
_PARTITIONERS = {
    "org.apache.kafka.clients.producer.internals.DefaultPartitioner": "default",
    "org.apache.kafka.clients.producer.RoundRobinPartitioner": "round_robin",
    "org.apache.kafka.clients.producer.UniformStickyPartitioner": "uniform_sticky",
}


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = {k.lower(): str(v) for k, v in options.items()}
    params = kafka_params(opts, SPARK_KAFKA_FORBIDDEN_PRODUCER, SINK_PARAMS)
    guarantee = opts.get("deliveryguarantee", "exactly_once").strip().lower()
    if guarantee not in ("exactly_once", "at_least_once"):
        raise OptionError(f"Option 'deliveryGuarantee' must be 'exactly_once' or 'at_least_once', got {guarantee!r}")
    if "transactional.id" in params:
        raise OptionError("Kafka option 'transactional.id' is not supported: the sink names its transactions "
                          "itself (set 'transactionalIdPrefix')")
    compression = params.get("compression.type", "none").lower()
    if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise OptionError(f"Kafka option 'compression.type' has an unknown codec {compression!r}")
    return SinkOptions(
        bootstrap=params["bootstrap.servers"], params=params, topic=opts.get("topic") or None,
        exactly_once=guarantee == "exactly_once",
        transactional_id_prefix=opts.get("transactionalidprefix", "shoal-spark"),
        transaction_timeout_ms=_int({"t": params.get("transaction.timeout.ms", "60000")}, "t", 60000,
                                    minimum=1) or 60000,
        compression=compression, partitioner=_partitioner(params.get("partitioner.class")))


def _partitioner(name: str | None) -> str:
    if name is None:
        return "default"
    kind = _PARTITIONERS.get(name.strip())
    if kind is None:
        raise OptionError(f"Kafka option 'partitioner.class' = {name} cannot be honoured by format(\"shoal\"): "
                          f"it follows Kafka's own partitioners only ({', '.join(_PARTITIONERS)})")
    return kind
