"""confluent-kafka consumer groups against shoal: assignment, leave, crash, static membership.

Each member is a librdkafka consumer in its own process (see group_helpers),
so a crash is a real SIGKILL: no LeaveGroup, only missing heartbeats.
"""

from __future__ import annotations

import time

import pytest

from tests.interop.group_helpers import (
    SESSION_MS,
    Member,
    assert_partitioned,
    create_topic,
    describe_group,
    is_partitioned,
    kafka_conf,
    members,  # noqa: F401 - fixture
    wait_until,
)

TOPIC_PARTS = 6


def _assignments(ms: list[Member]) -> dict[str, set[tuple[str, int]]]:
    return {m.name: m.assignment for m in ms}


def _settled(bootstrap: str, group: str, ms: list[Member], expected: set[tuple[str, int]]) -> bool:
    """Clients and DescribeGroups agree, every partition has exactly one owner."""
    if not is_partitioned(_assignments(ms), expected):
        return False
    view = describe_group(bootstrap, group)
    return (view.state == "STABLE" and set(view.members) == {m.name for m in ms}
            and all(view.members[m.name] == m.assignment for m in ms))


def _wait_settled(bootstrap: str, group: str, ms: list[Member], expected: set[tuple[str, int]],
                  timeout: float) -> None:
    wait_until(lambda: _settled(bootstrap, group, ms, expected), timeout,
               f"group {group} settled over {[m.name for m in ms]}")
    assert_partitioned(_assignments(ms), expected)


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_confluent_group_assigns_rebalances_on_close_and_crash(shoal, members, strategy):  # noqa: F811
    bs, topic, group = shoal.bootstrap, f"ck-grp-{strategy}", f"g-{strategy}"
    create_topic(bs, topic, TOPIC_PARTS)
    everything = {(topic, p) for p in range(TOPIC_PARTS)}
    ms = [members.start(f"m{i}", "confluent", bs, group, [topic], kafka_conf("confluent", strategy))
          for i in range(3)]
    _wait_settled(bs, group, ms, everything, 30)
    assert all(len(m.assignment) == 2 for m in ms), _assignments(ms)
    view = describe_group(bs, group)
    assert view.assignor == strategy

    # A member that closes leaves the group: its partitions move at once (no session wait).
    t0 = time.monotonic()
    ms[0].close()
    rest = ms[1:]
    _wait_settled(bs, group, rest, everything, 15)
    assert time.monotonic() - t0 < SESSION_MS / 1000, "close did not leave the group"
    assert all(len(m.assignment) == 3 for m in rest), _assignments(rest)

    # A crashed member is noticed after its session timeout.
    t0 = time.monotonic()
    rest[0].kill9()
    _wait_settled(bs, group, rest[1:], everything, SESSION_MS / 1000 + 15)
    took = time.monotonic() - t0
    assert took > SESSION_MS / 1000 - 1.5, f"crashed member removed after {took:.1f}s, before its session timeout"


def test_confluent_static_members_rejoin_without_rebalance_and_are_fenced(shoal, members):  # noqa: F811
    bs, topic, group = shoal.bootstrap, "ck-grp-static", "g-static"
    create_topic(bs, topic, TOPIC_PARTS)
    everything = {(topic, p) for p in range(TOPIC_PARTS)}

    def start(i: int) -> Member:
        return members.start(f"s{i}", "confluent", bs, group, [topic],
                             kafka_conf("confluent", "range", instance_id=f"inst-{i}"))

    ms = [start(i) for i in range(3)]
    _wait_settled(bs, group, ms, everything, 30)
    view = describe_group(bs, group)
    assert view.instance_ids == {f"s{i}": f"inst-{i}" for i in range(3)}
    before = {m.name: m.assignment for m in ms}

    # A static member that crashes and comes back within its session timeout
    # gets its old partitions back; nobody else is rebalanced.
    time.sleep(1)  # let the last assignment callbacks run
    callbacks = {m.name: m.callbacks for m in ms[1:]}
    ms[0].kill9()
    again = start(0)
    wait_until(lambda: again.assignment == before["s0"], SESSION_MS / 1000,
               "restarted static member gets its partitions back within the session timeout")
    ms = [again, *ms[1:]]
    _wait_settled(bs, group, ms, everything, 10)
    time.sleep(2 * 1.5)  # a rebalance would reach the others within two heartbeats
    assert {m.name: m.callbacks for m in ms[1:]} == callbacks, "other static members were rebalanced"
    assert {m.name: m.assignment for m in ms} == before

    # A second process with the same group.instance.id fences the first one.
    dup = start(1)
    wait_until(lambda: any(e["name"] == "_FATAL" and "FENCED" in e["text"].upper()
                           for e in ms[1].of("error")), 20, "old s1 fenced (FENCED_INSTANCE_ID)")
    wait_until(lambda: dup.assignment == before["s1"], 20, "new s1 takes over its partitions")
    assert not dup.of("error"), dup.of("error")

    # A static member that closes does not leave: its partitions move after the session timeout.
    t0 = time.monotonic()
    ms[2].close()
    ms = [again, dup]
    _wait_settled(bs, group, ms, everything, SESSION_MS / 1000 + 15)
    took = time.monotonic() - t0
    assert took > SESSION_MS / 1000 - 1.5, f"closed static member removed after {took:.1f}s"
