"""The consumer group harness itself: its defaults and first join."""

from __future__ import annotations

from shoal.coordinator.group.config import GroupConfig
from tests.unit.consumer_group_harness import TOPIC_IDS, CGHarness


def test_harness_first_member_gets_everything() -> None:
    h = CGHarness()
    r = h.cg_join("a")
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, "a", 2, 5000)
    assert [(tp.topic_id, tp.partitions) for tp in r.assignment.topic_partitions] == [(TOPIC_IDS["t"], [0, 1, 2, 3, 4, 5])]
    assert h.cgroup().state_name == "Stable"


def test_harness_default_config_is_kafkas() -> None:
    c = GroupConfig()
    assert (c.group_consumer_session_timeout_ms, c.group_consumer_heartbeat_interval_ms) == (45000, 5000)
    assert c.group_consumer_assignors == ("uniform", "range")
    assert c.group_coordinator_rebalance_protocols == ("classic", "consumer")


def test_config_from_broker_properties_with_kafkas_names_and_bounds() -> None:
    import pytest

    from shoal.coordinator.group.config import GroupConfigError

    c = GroupConfig.from_properties({
        "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform",
        "group.coordinator.rebalance.protocols": "classic", "group.consumer.max.size": "3",
        "group.consumer.heartbeat.interval.ms": "6000"})
    assert c.group_consumer_assignors == ("range", "uniform") and c.group_consumer_max_size == 3
    assert not c.consumer_protocol_enabled and c.group_consumer_heartbeat_interval_ms == 6000
    for bad in ({"group.consumer.session.timeout.ms": "44999"}, {"group.consumer.session.timeout.ms": "60001"},
                {"group.consumer.heartbeat.interval.ms": "4999"}, {"group.consumer.heartbeat.interval.ms": "15001"},
                {"group.consumer.max.size": "0"}, {"group.coordinator.rebalance.protocols": "consumer"},
                {"group.coordinator.rebalance.protocols": "classic,bogus"},
                {"group.consumer.min.session.timeout.ms": "50000"}):
        with pytest.raises(GroupConfigError):
            GroupConfig.from_properties(bad)
