"""Dynamic group configs (KIP-848): the GROUP config resource of Describe/IncrementalAlterConfigs.

A group may override some of the group coordinator's broker settings for itself, as Kafka's
GroupConfig allows: `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` (acted upon
by the consumer group type), and the share and streams group settings, which shoal keeps and reports
for the group types it does not serve yet. Each config's default is its broker synonym's value (a
`group.*` broker property). Overrides live in the cluster metadata log; a group need not exist to
have them (a share group's `share.auto.offset.reset` is set before its first member joins).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from shoal.broker.config_types import BOOLEAN, INT, LIST, STRING

# name -> (broker synonym, type, default when the broker does not know the synonym)
GROUP_CONFIGS: dict[str, tuple[str, int, str]] = {
    "consumer.assignment.interval.ms": ("group.consumer.assignment.interval.ms", INT, "1000"),
    "consumer.heartbeat.interval.ms": ("group.consumer.heartbeat.interval.ms", INT, "5000"),
    "consumer.session.timeout.ms": ("group.consumer.session.timeout.ms", INT, "45000"),
    "errors.deadletterqueue.copy.record.enable": ("errors.deadletterqueue.copy.record.enable", BOOLEAN, "false"),
    "errors.deadletterqueue.topic.name": ("errors.deadletterqueue.topic.name", STRING, ""),
    "share.assignment.interval.ms": ("group.share.assignment.interval.ms", INT, "1000"),
    "share.auto.offset.reset": ("share.auto.offset.reset", STRING, "latest"),
    "share.delivery.count.limit": ("group.share.delivery.count.limit", INT, "5"),
    "share.heartbeat.interval.ms": ("group.share.heartbeat.interval.ms", INT, "5000"),
    "share.isolation.level": ("share.isolation.level", STRING, "read_uncommitted"),
    "share.partition.max.record.locks": ("group.share.partition.max.record.locks", INT, "2000"),
    "share.record.lock.duration.ms": ("group.share.record.lock.duration.ms", INT, "30000"),
    "share.renew.acknowledge.enable": ("share.renew.acknowledge.enable", BOOLEAN, "true"),
    "share.session.timeout.ms": ("group.share.session.timeout.ms", INT, "45000"),
    "streams.assignment.interval.ms": ("group.streams.assignment.interval.ms", INT, "1000"),
    "streams.assignor.name": ("group.streams.assignors", STRING, "sticky"),
    "streams.heartbeat.interval.ms": ("group.streams.heartbeat.interval.ms", INT, "5000"),
    "streams.initial.rebalance.delay.ms": ("group.streams.initial.rebalance.delay.ms", INT, "3000"),
    "streams.num.standby.replicas": ("group.streams.num.standby.replicas", INT, "0"),
    "streams.rack.aware.assignment.tags": ("group.streams.rack.aware.assignment.tags", LIST, ""),
    "streams.session.timeout.ms": ("group.streams.session.timeout.ms", INT, "45000"),
}
# Bounds Kafka checks on a group's values: group config -> (broker properties of its lower and upper
# bounds, and their defaults).
_BOUNDS: dict[str, tuple[str, int, str, int]] = {
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms", 45000,
                                    "group.consumer.max.session.timeout.ms", 60000),
    "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms", 5000,
                                       "group.consumer.max.heartbeat.interval.ms", 15000),
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", 45000,
                                 "group.share.max.session.timeout.ms", 60000),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", 5000,
                                    "group.share.max.heartbeat.interval.ms", 15000),
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms", 15000,
                                      "group.share.max.record.lock.duration.ms", 60000),
    "share.delivery.count.limit": ("group.share.min.delivery.count.limit", 2,
                                   "group.share.max.delivery.count.limit", 10),
    "share.partition.max.record.locks": ("group.share.min.partition.max.record.locks", 100,
                                         "group.share.max.partition.max.record.locks", 4000),
}
# The least value each INT group config's definition takes (Kafka's ConfigDef Range.atLeast), checked
# as the value is parsed, before the broker's bounds above.
_AT_LEAST = {"consumer.session.timeout.ms": 1, "consumer.heartbeat.interval.ms": 1,
             "consumer.assignment.interval.ms": 0, "share.session.timeout.ms": 1, "share.heartbeat.interval.ms": 1,
             "share.record.lock.duration.ms": 1000, "share.delivery.count.limit": 2,
             "share.partition.max.record.locks": 100, "share.assignment.interval.ms": 0,
             "streams.session.timeout.ms": 1, "streams.heartbeat.interval.ms": 1}


class InvalidGroupConfig(ValueError):
    """A group config Kafka refuses (INVALID_CONFIG), with Kafka's message."""


def default_value(name: str, broker: Mapping[str, str]) -> str:
    """A group config's value when the group does not override it: its broker synonym's."""
    synonym, _, default = GROUP_CONFIGS[name]
    value = broker.get(synonym)
    return default if value is None or value == "" and default else value


def effective(overrides: Mapping[str, str], broker: Mapping[str, str]) -> dict[str, str]:
    """Every group config's value for a group with these overrides."""
    return {name: overrides.get(name, default_value(name, broker)) for name in GROUP_CONFIGS}


def _bound(broker: Mapping[str, str], key: str, default: int) -> int:
    try:
        return int(broker.get(key) or default)
    except ValueError:
        return default


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def duration_ms(iso: str) -> int | None:
    """An ISO-8601 duration of days, hours, minutes and seconds (Java's Duration.parse, as
    share.auto.offset.reset's by_duration takes it) in ms; None when it is not one."""
    text = iso.strip().upper()
    m = _DURATION.match(text)
    if m is None or text in ("P", "PT") or text.endswith("T"):
        return None
    days, hours, minutes, seconds = m.groups()
    total = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * 1000
    return total + int(float(seconds or 0) * 1000)


def _check_strings(values: Mapping[str, str]) -> None:
    """The string-valued share configs' validators (Kafka's ShareGroupAutoOffsetResetStrategy and
    the isolation level's ValidString)."""
    reset = values["share.auto.offset.reset"]
    low = reset.strip().lower()
    if not (low in ("earliest", "latest") or low.startswith("by_duration:")
            and duration_ms(reset.strip()[len("by_duration:"):]) is not None):
        raise InvalidGroupConfig(
            f"Invalid value {reset} for configuration share.auto.offset.reset: Invalid value `{reset}` for "
            "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the "
            "format 'by_duration:<PnDTnHnMn.nS>'.")
    level = values["share.isolation.level"]
    if level not in ("read_committed", "read_uncommitted"):
        raise InvalidGroupConfig(f"Invalid value {level} for configuration share.isolation.level: String must be "
                                 "one of: read_committed, read_uncommitted")


def validate(overrides: Mapping[str, str], broker: Mapping[str, str]) -> None:
    """Raise InvalidGroupConfig as Kafka's GroupConfig.validate does (names, types, then bounds)."""
    for name in overrides:
        if name not in GROUP_CONFIGS:
            raise InvalidGroupConfig(f"Unknown group config name: {name}")
    values = effective(overrides, broker)
    ints: dict[str, int] = {}
    for name, value in values.items():
        kind = GROUP_CONFIGS[name][1]
        if kind == INT:
            try:
                ints[name] = int(value.strip())
            except ValueError:
                raise InvalidGroupConfig(f"Invalid value {value} for configuration {name}: "
                                         "Not a number of type INT") from None
            least = _AT_LEAST.get(name)
            if least is not None and ints[name] < least:
                raise InvalidGroupConfig(f"Invalid value {value} for configuration {name}: Value must be at least "
                                         f"{least}")
        elif kind == BOOLEAN and value.strip().lower() not in ("true", "false"):
            raise InvalidGroupConfig(f"Invalid value {value} for configuration {name}: Expected value to be "
                                     "either true or false")
    _check_strings(values)
    for name, (low_key, low, high_key, high) in _BOUNDS.items():
        low, high = _bound(broker, low_key, low), _bound(broker, high_key, high)
        if not low <= ints[name] <= high:
            raise InvalidGroupConfig(f"{name} must be in the range {low} to {high} inclusive.")
    for kind in ("consumer", "share"):
        if ints[f"{kind}.session.timeout.ms"] <= ints[f"{kind}.heartbeat.interval.ms"]:
            raise InvalidGroupConfig(f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms")


def broker_values(get: Callable[[str], str]) -> dict[str, str]:
    """The broker properties group configs depend on (synonyms and bounds) that are set."""
    keys = {synonym for synonym, _, _ in GROUP_CONFIGS.values()}
    keys |= {key for low_key, _, high_key, _ in _BOUNDS.values() for key in (low_key, high_key)}
    return {k: v for k in keys if (v := get(k)) != ""}
