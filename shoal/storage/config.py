"""Per-log configuration with Kafka's defaults and topic-config names."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from shoal.storage.errors import InvalidConfigError

# Kafka's "never" for flush.messages / flush.ms is Long.MAX_VALUE.
_LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    """How one partition log is segmented, flushed, retained and cleaned.

    Durability of the flush settings (see docs/durability.md):

    - ``flush_interval_messages=1``: every append is fsynced before ``append``
      returns, so an acknowledged write survives ``kill -9`` and power loss.
    - ``flush_interval_messages=N`` / ``flush_interval_ms=T``: fsync after N
      messages / when T ms passed since the last fsync (checked on append and
      by ``LogManager.run_periodic``); a machine crash may lose the writes
      since the last fsync.
    - default (both None, Kafka's Long.MAX): never fsync on the write path;
      acknowledged data is in the OS page cache, so it survives ``kill -9`` of
      the process (the kernel still writes it out) but not a machine crash or
      power loss. ``close()`` always fsyncs.
    """

    segment_bytes: int = 1073741824
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 604800000  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    flush_interval_messages: int | None = None  # None: never (OS page cache only)
    flush_interval_ms: int | None = None
    cleanup_policy: str = "delete"  # "delete" | "compact" | "compact,delete"
    max_message_bytes: int = 1048588  # whole batch incl. 12-byte log overhead
    index_interval_bytes: int = 4096
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    min_compaction_lag_ms: int = 0
    delete_retention_ms: int = 86400000
    segment_index_bytes: int = 10 * 1024 * 1024
    # How far a CreateTime record's timestamp may lie before / after the broker's clock at produce
    # (Long.MAX: unbounded); difference.max.ms is Kafka 3.x's older form of both, used where they
    # are left unbounded, as Kafka 3.6+ does.
    message_timestamp_before_max_ms: int = _LONG_MAX
    message_timestamp_after_max_ms: int = _LONG_MAX
    message_timestamp_difference_max_ms: int = _LONG_MAX
    # The cleaner compacts a log when its dirty bytes reach this share of its closed segments, or
    # when a dirty segment has waited max_compaction_lag_ms.
    min_cleanable_dirty_ratio: float = 0.5
    max_compaction_lag_ms: int = _LONG_MAX
    # Broker-wide (producer.id.expiration.ms), carried here because the log's producer state applies it.
    producer_id_expiration_ms: int = 86400000

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def timestamp_range(self, now_ms: int) -> tuple[int, int] | None:
        """The CreateTime timestamps a record produced at ``now_ms`` may carry, or None when every
        timestamp is accepted (LogAppendTime topics, or no bound set)."""
        before = self.message_timestamp_before_max_ms
        after = self.message_timestamp_after_max_ms
        if before == _LONG_MAX:
            before = self.message_timestamp_difference_max_ms
        if after == _LONG_MAX:
            after = self.message_timestamp_difference_max_ms
        if self.log_append_time or (before == _LONG_MAX and after == _LONG_MAX):
            return None
        return now_ms - before, now_ms + after

    def replace(self, **changes: object) -> LogConfig:
        """A copy with some fields changed (validated)."""
        cfg = dataclasses.replace(self, **changes)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Raise InvalidConfigError when a value is outside what Kafka accepts."""

        def need(cond: bool, name: str, value: object, rule: str) -> None:
            if not cond:
                raise InvalidConfigError(f"invalid value {value!r} for configuration {name}: {rule}")

        def at_least(name: str, value: float | None, least: int) -> None:
            need(value is None or value >= least, name, value, f"must be at least {least}")

        # Kafka allows segment.bytes down to 14 (a legacy record's overhead).
        at_least("segment.bytes", self.segment_bytes, 14)
        at_least("segment.ms", self.segment_ms, 1)
        at_least("retention.ms", self.retention_ms, -1)
        at_least("flush.messages", self.flush_interval_messages, 1)  # None: never
        at_least("flush.ms", self.flush_interval_ms, 0)
        # An empty list is valid, as in Kafka (ConfigDef.ValidList): neither deleted nor compacted.
        policies = [p.strip() for p in self.cleanup_policy.split(",") if p.strip()]
        need(
            all(p in ("delete", "compact") for p in policies),
            "cleanup.policy",
            self.cleanup_policy,
            "must be a list of 'delete' and/or 'compact'",
        )
        at_least("max.message.bytes", self.max_message_bytes, 0)
        at_least("index.interval.bytes", self.index_interval_bytes, 0)
        need(
            self.message_timestamp_type in ("CreateTime", "LogAppendTime"),
            "message.timestamp.type",
            self.message_timestamp_type,
            "must be CreateTime or LogAppendTime",
        )
        at_least("min.compaction.lag.ms", self.min_compaction_lag_ms, 0)
        at_least("delete.retention.ms", self.delete_retention_ms, 0)
        at_least("message.timestamp.before.max.ms", self.message_timestamp_before_max_ms, 0)
        at_least("message.timestamp.after.max.ms", self.message_timestamp_after_max_ms, 0)
        at_least("message.timestamp.difference.max.ms", self.message_timestamp_difference_max_ms, 0)
        need(0 <= self.min_cleanable_dirty_ratio <= 1, "min.cleanable.dirty.ratio", self.min_cleanable_dirty_ratio,
             "must be between 0 and 1")
        at_least("max.compaction.lag.ms", self.max_compaction_lag_ms, 1)
        at_least("segment.index.bytes", self.segment_index_bytes, 4)

    @classmethod
    def from_topic_configs(
        cls, configs: dict[str, str | None], defaults: LogConfig | None = None
    ) -> LogConfig:
        """Overlay Kafka topic configs (``segment.bytes``, ``retention.ms``, ...) on ``defaults``.

        Names this layer does not own (``compression.type``,
        ``min.insync.replicas``, ...) are ignored; a None value means "use the
        default". Bad values raise InvalidConfigError.
        """
        base = defaults if defaults is not None else cls()
        changes: dict[str, object] = {}
        for name, raw in configs.items():
            spec = _TOPIC_CONFIGS.get(name)
            if spec is None or raw is None:
                continue
            field, kind = spec
            changes[field] = _parse(name, raw, kind)
        cfg = dataclasses.replace(base, **changes)
        cfg.validate()
        return cfg


_TOPIC_CONFIGS: dict[str, tuple[str, str]] = {
    "segment.bytes": ("segment_bytes", "int"),
    "segment.ms": ("segment_ms", "long"),
    "retention.ms": ("retention_ms", "long"),
    "retention.bytes": ("retention_bytes", "long"),
    "flush.messages": ("flush_interval_messages", "never_long"),
    "flush.ms": ("flush_interval_ms", "never_long"),
    "cleanup.policy": ("cleanup_policy", "policy"),
    "max.message.bytes": ("max_message_bytes", "int"),
    "index.interval.bytes": ("index_interval_bytes", "int"),
    "message.timestamp.type": ("message_timestamp_type", "str"),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", "long"),
    "delete.retention.ms": ("delete_retention_ms", "long"),
    "segment.index.bytes": ("segment_index_bytes", "int"),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", "long"),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", "long"),
    "message.timestamp.difference.max.ms": ("message_timestamp_difference_max_ms", "long"),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", "double"),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", "long"),
}

TOPIC_CONFIG_NAMES = frozenset(_TOPIC_CONFIGS)


def _parse(name: str, raw: str, kind: str) -> object:
    text = str(raw).strip()
    if kind in ("int", "long", "never_long"):
        # Kafka's ConfigDef message: a value that does not parse, or overflows the type, is
        # "Not a number of type INT|LONG" (Java's parseInt/parseLong fail the same way for both).
        bad = InvalidConfigError(f"Invalid value {text} for configuration {name}: Not a number of type "
                                 f"{'INT' if kind == 'int' else 'LONG'}")
        try:
            value = int(text)
        except ValueError:
            raise bad from None
        limit = (1 << 31) - 1 if kind == "int" else _LONG_MAX
        if not -(limit + 1) <= value <= limit:
            raise bad
        if kind == "never_long" and value == _LONG_MAX:
            return None
        return value
    if kind == "double":
        try:
            return float(text)
        except ValueError:
            raise InvalidConfigError(f"Invalid value {text} for configuration {name}: Not a number of type DOUBLE"
                                     ) from None
    if kind == "policy":
        parts = [p.strip().lower() for p in text.split(",") if p.strip()]
        return (
            ",".join(sorted(set(parts), key=("compact", "delete").index))
            if all(p in ("compact", "delete") for p in parts) and parts
            else text
        )
    return text
