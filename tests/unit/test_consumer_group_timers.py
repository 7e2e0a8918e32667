"""Consumer group timers (session, revocation deadline) and static membership (KIP-848 rules)."""

from __future__ import annotations

from shoal.coordinator.group.consumer.member import MemberState
from shoal.protocol.errors import ErrorCode as E
from tests.unit.consumer_group_harness import TOPIC_IDS, CGHarness, Consumer, converge

T = TOPIC_IDS["t"]


def test_session_timeout_fences_a_silent_member() -> None:
    h = CGHarness()
    a, b = Consumer(h, "a"), Consumer(h, "b")
    a.join()
    b.join()
    converge([a, b])
    for _ in range(10):  # b heartbeats, a stays silent
        h.advance(5000)
        b.beat()
    assert set(h.cgroup().members) == {"b"}
    converge([b])
    assert b.partitions() == set(range(6))
    assert a.beat().error_code == E.UNKNOWN_MEMBER_ID


def test_heartbeats_keep_the_session_and_the_deadline_is_the_configured_timeout() -> None:
    h = CGHarness(group_consumer_session_timeout_ms=46000, group_consumer_max_session_timeout_ms=60000)
    a = Consumer(h, "a")
    a.join()
    h.advance(45999)
    a.beat()
    h.advance(45999)
    assert "a" in h.cgroup().members
    h.advance(1)
    assert "a" not in h.cgroup().members and h.cgroup().state_name == "Empty"


def test_revocation_deadline_fences_a_member_that_does_not_revoke() -> None:
    h = CGHarness()
    a = Consumer(h, "a", rebalance=10000)
    b = Consumer(h, "b")
    a.join()
    b.join()
    h.hb("a", 2, owned={"t": set(range(6))})  # told to revoke 1, 3, 5
    assert h.cgroup().members["a"].state == MemberState.UNREVOKED_PARTITIONS
    for _ in range(3):
        h.advance(4000)
        h.hb("a", 2, owned={"t": set(range(6))})  # keeps heartbeating, never revokes
        b.beat()
    assert "a" not in h.cgroup().members
    converge([b])
    assert b.partitions() == set(range(6))


def test_revoking_in_time_cancels_the_deadline() -> None:
    h = CGHarness()
    a, b = Consumer(h, "a", rebalance=10000), Consumer(h, "b")
    a.join()
    b.join()
    converge([a, b])
    h.advance(20000)
    assert set(h.cgroup().members) == {"a", "b"}


def test_commit_is_no_heartbeat() -> None:
    h = CGHarness()
    a = Consumer(h, "a")
    a.join()
    for _ in range(10):
        h.advance(5000)
        t = h.commit({("t", 0): 1}, generation=a.epoch, member_id="a", version=9)
        assert set(h.commit_errors(t).values()) in ({0}, {E.UNKNOWN_MEMBER_ID})
    assert "a" not in h.cgroup().members


def test_static_member_temporary_leave_keeps_partitions_until_session_expires() -> None:
    h = CGHarness()
    a, b = Consumer(h, "a", instance="ia"), Consumer(h, "b")
    a.join()
    b.join()
    converge([a, b])
    a_parts = a.partitions()
    r = a.leave(-2)
    assert (r.error_code, r.member_id, r.member_epoch) == (0, "a", -2)
    g = h.cgroup()
    assert g.members["a"].member_epoch == -2 and g.members["a"].assigned == {T: frozenset(a_parts)}
    # Nobody else gets them meanwhile.
    for _ in range(3):
        b.beat()
    assert b.partitions().isdisjoint(a_parts)
    # The instance comes back under a new member id: it takes a's place and partitions.
    a2 = Consumer(h, "a2", instance="ia")
    r = a2.join()
    assert r.error_code == 0 and a2.partitions() == a_parts
    assert set(g.members) == {"a2", "b"} and g.static_members == {"ia": "a2"}
    converge([a2, b])


def test_static_member_gone_for_good_after_session_timeout() -> None:
    h = CGHarness()
    a, b = Consumer(h, "a", instance="ia"), Consumer(h, "b")
    a.join()
    b.join()
    converge([a, b])
    a.leave(-2)
    for _ in range(10):
        h.advance(5000)
        b.beat()
    assert set(h.cgroup().members) == {"b"}
    converge([b])
    assert b.partitions() == set(range(6))


def test_static_member_errors() -> None:
    h = CGHarness()
    a = Consumer(h, "a", instance="ia")
    a.join()
    r = h.cg_join("x", instance="ia")  # the instance id is still in use
    assert r.error_code == E.UNRELEASED_INSTANCE_ID
    assert h.hb("x", 1, instance="ia", owned={}).error_code == E.FENCED_INSTANCE_ID
    assert h.hb("x", 1, instance="nope", owned={}).error_code == E.UNKNOWN_MEMBER_ID
    assert h.hb("x", -2, instance="ia").error_code == E.FENCED_INSTANCE_ID
    assert h.hb("x", -1, instance="nope").error_code == E.UNKNOWN_MEMBER_ID
    assert set(h.cgroup().members) == {"a"}


def test_static_member_leave_for_good() -> None:
    h = CGHarness()
    a = Consumer(h, "a", instance="ia")
    a.join()
    assert a.leave(-1).error_code == 0
    assert h.cgroup().members == {} and h.cgroup().static_members == {}
    assert Consumer(h, "a2", instance="ia").join().error_code == 0


def test_on_loaded_rearms_session_timers() -> None:
    from tests.unit.consumer_group_harness import replayed
    h = CGHarness()
    Consumer(h, "a").join()
    fresh = replayed(h)
    fresh.on_loaded(h.now)
    assert fresh.next_deadline() is not None
    result = fresh.poll(h.now + 45000)
    assert result.records and "a" not in fresh.groups["g"].members  # type: ignore[attr-defined]


def test_a_groups_own_session_timeout_and_heartbeat_interval_apply_to_it_alone() -> None:
    """Dynamic group configs (IncrementalAlterConfigs on GROUP resources) override the broker's for
    one group: its heartbeat responses carry its interval, its members' sessions its timeout."""
    overrides: dict[str, dict[str, str]] = {}
    h = CGHarness(group_overrides=overrides)
    a = Consumer(h, "a")
    overrides["g"] = {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "7000"}
    assert a.join().heartbeat_interval_ms == 7000
    assert h.cg_join("o", gid="other").heartbeat_interval_ms == 5000  # the broker's default
    h.advance(49999)
    assert "a" in h.cgroup().members  # the broker's 45 s would have fenced it
    h.advance(1)
    assert "a" not in h.cgroup().members
    overrides["g"] = {}  # the override deleted: the broker's settings again
    b = Consumer(h, "b")
    assert b.join().heartbeat_interval_ms == 5000
