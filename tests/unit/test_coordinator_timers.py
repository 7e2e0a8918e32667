"""The coordinators' keyed timers: deadlines given on the wall clock, fired on the monotonic one."""

from __future__ import annotations

from shoal.coordinator.timers import Timers


def test_unanchored_timers_run_on_the_one_clock_they_are_given() -> None:
    t = Timers()
    fired: list[int] = []
    t.schedule("a", 1_000, fired.append)
    t.schedule("b", 500, fired.append)
    t.schedule("a", 2_000, fired.append)  # replaces the first
    assert t.next_deadline() == 500
    assert t.pop_due(499) is None
    key, cb = t.pop_due(500)  # type: ignore[misc]
    assert key == "b"
    assert t.pop_due(1_999) is None and t.pop_due(2_000) is not None and t.next_deadline() is None


def test_a_wall_clock_step_moves_no_deadline() -> None:
    t = Timers()
    t.anchor(now_ms=1_700_000_000_000, monotonic_ms=50)  # the step a session was armed in
    t.schedule("session", 1_700_000_000_000 + 45_000, lambda _now: None)
    assert t.next_deadline() == 45_050  # monotonic
    # The wall clock jumps ten minutes forward; one second of monotonic time has passed.
    t.anchor(now_ms=1_700_000_601_000, monotonic_ms=1_050)
    assert t.pop_due(1_700_000_601_000) is None
    # Forty-five seconds after it was armed (whatever the wall clock says), it fires.
    t.anchor(now_ms=1_700_000_645_000, monotonic_ms=45_050)
    due = t.pop_due(1_700_000_645_000)
    assert due is not None and due[0] == "session"


def test_a_wall_clock_step_back_delays_no_deadline() -> None:
    t = Timers()
    t.anchor(now_ms=10_000_000, monotonic_ms=0)
    t.schedule("rebalance", 10_000_000 + 5_000, lambda _now: None)
    t.anchor(now_ms=9_000_000 + 5_000, monotonic_ms=5_000)  # the wall clock went back 1,000 s
    assert t.pop_due(9_005_000) is not None
