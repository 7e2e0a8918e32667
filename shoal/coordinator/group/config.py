"""Group coordinator configuration, with Kafka's property names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

from shoal.coordinator.result import int_settings_from_properties

# Kafka's GroupCoordinator constant: a new member (no heartbeat yet) is dropped
# if its parked JoinGroup is not completed within this time.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

_INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class GroupConfig:
    """Broker-level settings of the classic group coordinator.

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

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60 * 1000

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> GroupConfig:
        """Build from Kafka-style dotted properties; unknown keys are ignored."""
        return int_settings_from_properties(cls(), props)
