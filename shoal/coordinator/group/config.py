"""Group coordinator configuration, with Kafka's property names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shoal.coordinator.result import int_settings_from_properties

# Kafka's GroupCoordinator constant: a new member (no heartbeat yet) is dropped
# if its parked JoinGroup is not completed within this time.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

_INT32_MAX = 2**31 - 1

# Kafka's GroupType names accepted by group.coordinator.rebalance.protocols; "share" and "streams" are
# accepted (a Kafka 4.4 server.properties starts shoal). Share groups are served by the share.version
# feature (`share_version`), as Kafka 4.2+; streams groups are not served.
REBALANCE_PROTOCOLS = ("classic", "consumer", "share", "streams")


MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


class GroupConfigError(ValueError):
    """A group coordinator setting out of its bounds (Kafka refuses to start with it)."""


def _csv(value: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in value.split(",") if s.strip())


@dataclass(slots=True)
class GroupConfig:
    """Broker-level settings of the group coordinator (classic and consumer group types).

    Field names are Kafka's property names with dots as underscores.
    """

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = _INT32_MAX
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    offsets_topic_num_partitions: int = 50
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    # KIP-848, the consumer group type (Kafka's GroupCoordinatorConfig names and defaults)
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_min_session_timeout_ms: int = 45000
    group_consumer_max_session_timeout_ms: int = 60000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_min_heartbeat_interval_ms: int = 5000
    group_consumer_max_heartbeat_interval_ms: int = 15000
    group_consumer_max_size: int = _INT32_MAX
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    group_coordinator_rebalance_protocols: tuple[str, ...] = field(default=("classic", "consumer"))
    # Kafka's ConsumerGroupMigrationPolicy: bidirectional, upgrade, downgrade or disabled.
    group_consumer_migration_policy: str = "bidirectional"
    # KIP-932, the share group type (Kafka's GroupCoordinatorConfig / ShareGroupConfig names and defaults).
    group_share_session_timeout_ms: int = 45000
    group_share_heartbeat_interval_ms: int = 5000
    group_share_max_size: int = 200
    group_share_assignors: tuple[str, ...] = ("simple",)
    # The share.version feature level (Kafka 4.2+ removed group.share.enable: share groups are served
    # when the feature is >= 1, the default of a new cluster). 0 answers the share APIs UNSUPPORTED_VERSION.
    share_version: int = 1
    # Each group's dynamic configs (IncrementalAlterConfigs on GROUP resources, validated there):
    # group id -> {"consumer.session.timeout.ms": ..., ...}; the broker keeps it up to date.
    group_overrides: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def _per_group(self, group_id: str, name: str, default: int) -> int:
        """A group's own value of the dynamic group config `name`, else the broker's `default`."""
        value = self.group_overrides.get(group_id, {}).get(name)
        return default if value is None else int(value)

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        """The session timeout of a consumer group's members."""
        return self._per_group(group_id, "consumer.session.timeout.ms", self.group_consumer_session_timeout_ms)

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        """The heartbeat interval a consumer group's members are told."""
        return self._per_group(group_id, "consumer.heartbeat.interval.ms", self.group_consumer_heartbeat_interval_ms)

    def share_session_timeout_ms(self, group_id: str) -> int:
        """The session timeout of a share group's members."""
        return self._per_group(group_id, "share.session.timeout.ms", self.group_share_session_timeout_ms)

    def share_heartbeat_interval_ms(self, group_id: str) -> int:
        """The heartbeat interval a share group's members are told."""
        return self._per_group(group_id, "share.heartbeat.interval.ms", self.group_share_heartbeat_interval_ms)

    @property
    def share_groups_enabled(self) -> bool:
        return self.share_version >= 1

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60 * 1000

    @property
    def consumer_protocol_enabled(self) -> bool:
        return "consumer" in self.group_coordinator_rebalance_protocols

    @property
    def upgrade_enabled(self) -> bool:
        """A classic group may become a consumer group (online upgrade)."""
        return self.group_consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        """A consumer group of classic members only may become a classic group (online downgrade)."""
        return self.group_consumer_migration_policy in ("bidirectional", "downgrade")

    def validate(self) -> GroupConfig:
        """Kafka's bounds of the consumer group settings (GroupCoordinatorConfig's requirements)."""
        checks = [
            (self.group_consumer_max_heartbeat_interval_ms >= self.group_consumer_min_heartbeat_interval_ms,
             "group.consumer.max.heartbeat.interval.ms must be greater than or equal to "
             "group.consumer.min.heartbeat.interval.ms"),
            (self.group_consumer_heartbeat_interval_ms >= self.group_consumer_min_heartbeat_interval_ms,
             "group.consumer.heartbeat.interval.ms must be greater than or equal to "
             "group.consumer.min.heartbeat.interval.ms"),
            (self.group_consumer_heartbeat_interval_ms <= self.group_consumer_max_heartbeat_interval_ms,
             "group.consumer.heartbeat.interval.ms must be less than or equal to "
             "group.consumer.max.heartbeat.interval.ms"),
            (self.group_consumer_max_session_timeout_ms >= self.group_consumer_min_session_timeout_ms,
             "group.consumer.max.session.timeout.ms must be greater than or equal to "
             "group.consumer.min.session.timeout.ms"),
            (self.group_consumer_session_timeout_ms >= self.group_consumer_min_session_timeout_ms,
             "group.consumer.session.timeout.ms must be greater than or equal to "
             "group.consumer.min.session.timeout.ms"),
            (self.group_consumer_session_timeout_ms <= self.group_consumer_max_session_timeout_ms,
             "group.consumer.session.timeout.ms must be less than or equal to "
             "group.consumer.max.session.timeout.ms"),
            (self.group_consumer_heartbeat_interval_ms < self.group_consumer_session_timeout_ms,
             "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
            (self.group_consumer_max_size >= 1, "group.consumer.max.size must be at least 1"),
            (1 <= self.group_share_max_size <= 1000, "group.share.max.size must be in [1, 1000]"),
            (self.group_share_heartbeat_interval_ms < self.group_share_session_timeout_ms,
             "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"),
            (len(self.group_consumer_assignors) >= 1, "group.consumer.assignors must not be empty"),
            (all(p in REBALANCE_PROTOCOLS for p in self.group_coordinator_rebalance_protocols),
             f"group.coordinator.rebalance.protocols must be a subset of {list(REBALANCE_PROTOCOLS)}"),
            (self.group_consumer_migration_policy in MIGRATION_POLICIES,
             f"group.consumer.migration.policy must be one of {list(MIGRATION_POLICIES)}"),
            ("classic" in self.group_coordinator_rebalance_protocols,
             "group.coordinator.rebalance.protocols must contain classic"),
        ]
        for ok, message in checks:
            if not ok:
                raise GroupConfigError(message)
        return self

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> GroupConfig:
        """Build from Kafka-style dotted properties; unknown keys are ignored."""
        config = int_settings_from_properties(cls(), props)
        if "group.consumer.assignors" in props:
            # Kafka accepts class names too: the last dotted part, lower-cased, without "Assignor".
            config.group_consumer_assignors = tuple(_assignor_name(n) for n in _csv(props["group.consumer.assignors"]))
        if "group.share.assignors" in props:
            config.group_share_assignors = tuple(_assignor_name(n) for n in _csv(props["group.share.assignors"]))
        if "group.coordinator.rebalance.protocols" in props:
            config.group_coordinator_rebalance_protocols = tuple(
                p.lower() for p in _csv(props["group.coordinator.rebalance.protocols"]))
        if "group.consumer.migration.policy" in props:
            config.group_consumer_migration_policy = props["group.consumer.migration.policy"].strip().lower()
        return config.validate()


def _assignor_name(name: str) -> str:
    short = name.rsplit(".", 1)[-1]
    if short.endswith("Assignor"):
        short = short[: -len("Assignor")]
    return short.lower()
