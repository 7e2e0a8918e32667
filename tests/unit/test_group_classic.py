"""Classic group protocol on the sans-IO shard: states, errors, rebalances, static members."""

from __future__ import annotations

import pytest

from shoal.coordinator.group.protocol_vote import select_protocol
from shoal.coordinator.group.state import GroupState, IllegalStateTransition, check_transition
from shoal.coordinator.partitioning import java_string_hash
from shoal.coordinator.partitioning import partition_for as group_partition
from shoal.protocol.errors import ErrorCode as E
from tests.unit.test_group_harness import Harness, subscription

S = GroupState


# ------------------------------------------------------------------ partitioning / states / vote
def test_group_partition_matches_java_hashcode() -> None:
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert group_partition("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    assert group_partition("a", 50) == 47
    # Negative hash: abs then modulo.
    h = java_string_hash("console-consumer-40652")
    assert group_partition("console-consumer-40652", 50) == abs(h) % 50
    # Characters outside the BMP count as two UTF-16 code units.
    assert java_string_hash("\U0001F600") == (0xD83D * 31 + 0xDE00)


def test_state_transitions_follow_kafka() -> None:
    check_transition("g", S.EMPTY, S.PREPARING_REBALANCE)
    check_transition("g", S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE)
    check_transition("g", S.COMPLETING_REBALANCE, S.STABLE)
    check_transition("g", S.STABLE, S.PREPARING_REBALANCE)
    check_transition("g", S.PREPARING_REBALANCE, S.EMPTY)
    check_transition("g", S.STABLE, S.DEAD)
    for bad in [(S.EMPTY, S.STABLE), (S.EMPTY, S.COMPLETING_REBALANCE), (S.STABLE, S.EMPTY),
                (S.COMPLETING_REBALANCE, S.EMPTY), (S.DEAD, S.EMPTY)]:
        with pytest.raises(IllegalStateTransition):
            check_transition("g", *bad)


def test_protocol_vote() -> None:
    # Only roundrobin is supported by all: it wins although range is preferred by two.
    assert select_protocol([["range", "roundrobin"], ["range", "roundrobin"], ["roundrobin"]]) == "roundrobin"
    # Most votes among the candidates wins.
    assert select_protocol([["range", "sticky"], ["sticky", "range"], ["sticky", "range"]]) == "sticky"
    assert select_protocol([["range", "sticky"], ["range", "sticky"], ["sticky", "range"]]) == "range"
    # A tie is broken by java.util.HashMap order (bucket of the spread hash): deterministic.
    a = select_protocol([["range", "sticky"], ["sticky", "range"]])
    b = select_protocol([["sticky", "range"], ["range", "sticky"]])
    assert a == b
    with pytest.raises(ValueError):
        select_protocol([["range"], ["sticky"]])


# ------------------------------------------------------------------ JoinGroup
def test_member_id_required_then_join_sync_stable() -> None:
    h = Harness()
    t = h.join(client_id="cli")
    r = h.resp(t)
    assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id == "cli-m1"
    assert h.group().state == S.EMPTY and "cli-m1" in h.group().pending_members
    t = h.join("cli-m1", client_id="cli")
    r = h.resp(t)
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == "cli-m1" and r.member_id == "cli-m1"
    assert r.protocol_name == "range" and r.protocol_type == "consumer"
    assert [(m.member_id, m.metadata) for m in r.members] == [("cli-m1", subscription("t"))]
    assert h.group().state == S.COMPLETING_REBALANCE
    h.records.clear()
    s = h.sync("cli-m1", 1, {"cli-m1": b"A"})
    assert h.resp(s).error_code == 0 and h.resp(s).assignment == b"A"
    assert h.group().state == S.STABLE
    assert len(h.records) == 1 and h.records[0][0][:2] == b"\x00\x02"  # GroupMetadata record persisted


def test_join_v3_needs_no_member_id_round_trip() -> None:
    h = Harness()
    r = h.resp(h.join(version=3))
    assert r.error_code == 0 and r.member_id == "c-m1" and r.generation_id == 1


def test_join_errors() -> None:
    h = Harness()
    assert h.resp(h.join("nope")).error_code == E.UNKNOWN_MEMBER_ID
    assert h.resp(h.join(session=5999)).error_code == E.INVALID_SESSION_TIMEOUT
    assert h.resp(h.join(session=1_800_001)).error_code == E.INVALID_SESSION_TIMEOUT
    assert h.resp(h.join(gid="")).error_code == E.INVALID_GROUP_ID
    assert h.resp(h.join(ptype="")).error_code == E.INCONSISTENT_GROUP_PROTOCOL  # empty group, no type
    assert h.group() is None  # rejected joins leave no group behind
    ids, _ = h.stable_group(1)
    assert h.resp(h.join(ptype="connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.resp(h.join(protocols=[("sticky", b"x")])).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.resp(h.join("c-unknown")).error_code == E.UNKNOWN_MEMBER_ID


def test_group_max_size() -> None:
    h = Harness(group_max_size=1)
    h.stable_group(1)
    r = h.resp(h.join(version=3))
    assert r.error_code == E.GROUP_MAX_SIZE_REACHED


def test_second_member_triggers_rebalance_leader_gets_members_follower_waits_for_sync() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1)
    b = h.join_new()
    assert h.group().state == S.PREPARING_REBALANCE
    assert h.resp(h.last_join) is None  # parked until a rejoins
    assert h.resp(h.heartbeat(a, gen)).error_code == E.REBALANCE_IN_PROGRESS
    ta = h.join(a)
    ra, rb_ = h.resp(ta), h.resp(h.last_join)
    assert ra.generation_id == rb_.generation_id == gen + 1
    assert ra.leader == a == rb_.leader
    assert {m.member_id for m in ra.members} == {a, b} and rb_.members == []
    assert h.group().state == S.COMPLETING_REBALANCE
    assert h.resp(h.heartbeat(b, gen + 1)).error_code == E.NONE  # CompletingRebalance heartbeat is fine
    sb = h.sync(b, gen + 1)
    assert h.resp(sb) is None  # follower waits for the leader
    sa = h.sync(a, gen + 1, {a: b"pa"})  # b's assignment missing: defaults to empty
    assert h.resp(sa).assignment == b"pa" and h.resp(sb).assignment == b""
    assert h.resp(sb).error_code == 0 and h.group().state == S.STABLE


def test_sync_errors() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    assert h.resp(h.sync(a, gen + 5)).error_code == E.ILLEGAL_GENERATION
    assert h.resp(h.sync("x", gen)).error_code == E.UNKNOWN_MEMBER_ID
    assert h.resp(h.sync(a, gen, gid="other")).error_code == E.UNKNOWN_MEMBER_ID
    assert h.resp(h.sync(a, gen, version=5, ptype="connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.resp(h.sync(a, gen, version=5, pname="sticky")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # Stable: SyncGroup returns the member's current assignment (aiokafka's late leader sync).
    r = h.resp(h.sync(b, gen, version=5, ptype="consumer", pname="range"))
    assert r.error_code == 0 and r.assignment == f"a-{b}".encode() and r.protocol_name == "range"
    h.join_new()  # a third member: PreparingRebalance
    assert h.resp(h.sync(a, gen)).error_code == E.REBALANCE_IN_PROGRESS


def test_rebalance_during_completing_rebalance_fails_parked_syncs() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1)
    b = h.join_new()
    h.join(a)
    sb = h.sync(b, gen + 1)
    assert h.resp(sb) is None
    h.join_new()  # third member arrives before the leader syncs
    assert h.resp(sb).error_code == E.REBALANCE_IN_PROGRESS
    assert h.group().state == S.PREPARING_REBALANCE


def test_heartbeat_errors_and_states() -> None:
    h = Harness()
    assert h.resp(h.heartbeat("x", 1)).error_code == E.UNKNOWN_MEMBER_ID  # no group
    (a,), gen = h.stable_group(1)
    assert h.resp(h.heartbeat(a, gen)).error_code == E.NONE
    assert h.resp(h.heartbeat(a, gen - 1)).error_code == E.ILLEGAL_GENERATION
    assert h.resp(h.heartbeat("x", gen)).error_code == E.UNKNOWN_MEMBER_ID
    h.resp(h.leave([(a, None)]))
    assert h.group().state == S.EMPTY
    assert h.resp(h.heartbeat(a, gen + 1)).error_code == E.UNKNOWN_MEMBER_ID


def test_leader_leaves_new_leader_elected() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    assert h.group().leader_id == a
    r = h.resp(h.leave([(a, None)], version=1))
    assert r.error_code == 0
    assert h.group().leader_id == b and h.group().state == S.PREPARING_REBALANCE
    t = h.join(b)
    rb_ = h.resp(t)
    assert rb_.leader == b and rb_.generation_id == gen + 1 and [m.member_id for m in rb_.members] == [b]


def test_leave_group_batch_per_member_errors() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    r = h.resp(h.leave([(a, None), ("ghost", None), ("", "no-such-instance")]))
    assert r.error_code == 0
    assert [(m.member_id, m.error_code) for m in r.members] == [
        (a, 0), ("ghost", E.UNKNOWN_MEMBER_ID), ("", E.UNKNOWN_MEMBER_ID)]
    # An unknown group, as Kafka 4: no top-level error, the member's own UNKNOWN_MEMBER_ID.
    r = h.resp(h.leave([("x", None)], gid="nogroup"))
    assert (r.error_code, [m.error_code for m in r.members]) == (0, [E.UNKNOWN_MEMBER_ID])
    assert h.resp(h.leave([("ghost", None)], version=0)).error_code == E.UNKNOWN_MEMBER_ID


def test_session_expiry_removes_member_and_rebalances() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2, session=10000)
    h.advance(6000)
    h.resp(h.heartbeat(a, gen))
    h.advance(5000)  # b silent for 11 s > session timeout
    g = h.group()
    assert b not in g.members and g.state == S.PREPARING_REBALANCE
    assert h.resp(h.heartbeat(a, gen)).error_code == E.REBALANCE_IN_PROGRESS
    r = h.resp(h.join(a))
    assert r.generation_id == gen + 1 and [m.member_id for m in r.members] == [a]


def test_last_member_expiry_makes_group_empty_and_persists_it() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1, session=10000)
    h.records.clear()
    h.advance(10001)
    g = h.group()
    assert g.state == S.EMPTY and g.generation_id == gen + 1 and not g.members
    assert g.current_state_timestamp == h.now
    assert len(h.records) == 1 and h.records[0][1] is not None


def test_pending_member_expires() -> None:
    h = Harness()
    t = h.join(session=10000)
    mid = h.resp(t).member_id
    h.advance(10001)
    assert mid not in h.group().pending_members


def test_initial_rebalance_delay_extends_while_members_join() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    ta = h.join(version=3, rebalance=10000)
    h.advance(2000)
    tb = h.join(version=3, rebalance=10000)
    h.advance(1000)  # t=3000: a new member was added during the delay -> wait another 3000
    assert h.resp(ta) is None and h.resp(tb) is None
    h.advance(2999)
    assert h.resp(ta) is None
    h.advance(1)  # t=6000
    ra, rb_ = h.resp(ta), h.resp(tb)
    assert ra.generation_id == rb_.generation_id == 1 and len(ra.members) == 2


def test_initial_rebalance_delay_bounded_by_rebalance_timeout() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    ta = h.join(version=3, rebalance=5000)
    for _ in range(5):
        h.advance(1000)
        h.join(version=3, rebalance=5000)
        if h.resp(ta) is not None:
            break
    # Delay (3000) + remaining (5000 - 3000) = 5000 at the latest.
    assert h.resp(ta) is not None and h.now - 1_000_000 <= 5000


def test_rebalance_timeout_removes_member_that_did_not_rejoin() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2, session=30000, rebalance=5000)
    c = h.join_new(session=30000, rebalance=5000)
    ta = h.join(a, session=30000, rebalance=5000)
    assert h.resp(ta) is None
    h.advance(4000)
    h.resp(h.heartbeat(b, gen))  # b is alive but never rejoins
    h.advance(1000)
    ra = h.resp(ta)
    assert ra is not None and ra.generation_id == gen + 1
    assert {m.member_id for m in ra.members} == {a, c}
    assert b not in h.group().members
    assert h.resp(h.heartbeat(b, gen)).error_code == E.UNKNOWN_MEMBER_ID


def test_member_not_syncing_is_removed_after_rebalance_timeout() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1, rebalance=5000)
    b = h.join_new(rebalance=5000)
    h.join(a, rebalance=5000)
    h.sync(a, gen + 1, {a: b"x", b: b"y"})
    assert h.group().state == S.STABLE
    h.advance(5000)  # b never sent SyncGroup
    assert b not in h.group().members and h.group().state == S.PREPARING_REBALANCE


def test_dynamic_leader_rejoin_in_stable_triggers_rebalance_follower_rejoin_does_not() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    r = h.resp(h.join(b))
    assert r.error_code == 0 and r.generation_id == gen and r.members == []
    assert h.group().state == S.STABLE
    assert h.resp(h.join(a)) is None
    assert h.group().state == S.PREPARING_REBALANCE


# ------------------------------------------------------------------ static membership (KIP-345)
def _static_group(h: Harness) -> tuple[str, str, int]:
    t1 = h.join(instance="i1", version=5)
    a = h.resp(t1).member_id  # static members need no MEMBER_ID_REQUIRED round trip
    assert a == "i1-m1"
    s = h.sync(a, 1, {a: b"A"})
    assert h.resp(s).error_code == 0
    t2 = h.join(instance="i2", version=5)
    assert h.resp(t2) is None
    ra = h.resp(h.join(a, instance="i1", version=5))
    b = h.resp(t2).member_id
    gen = ra.generation_id
    h.sync(b, gen, instance="i2")
    h.sync(a, gen, {a: b"A", b: b"B"}, instance="i1")
    assert h.group().state == S.STABLE
    return a, b, gen


def test_static_member_restart_keeps_assignment_without_rebalance_and_fences_old_id() -> None:
    h = Harness()
    a, b, gen = _static_group(h)
    h.records.clear()
    r = h.resp(h.join(instance="i2", version=5))
    assert r.error_code == 0 and r.generation_id == gen and r.member_id != b and r.members == []
    new_b = r.member_id
    g = h.group()
    assert g.state == S.STABLE and g.generation_id == gen and b not in g.members
    assert g.members[new_b].assignment == b"B"
    assert len(h.records) == 1  # the new member id is persisted
    assert h.resp(h.heartbeat(b, gen, instance="i2")).error_code == E.FENCED_INSTANCE_ID
    assert h.resp(h.sync(b, gen, instance="i2")).error_code == E.FENCED_INSTANCE_ID
    assert h.resp(h.commit({("t", 0): 1}, generation=gen, member_id=b, instance="i2")) is not None
    assert h.resp(h.sync(new_b, gen, instance="i2")).assignment == b"B"


def test_static_leader_restart() -> None:
    h = Harness()
    a, b, gen = _static_group(h)
    r9 = h.resp(h.join(instance="i1", version=9))
    assert r9.error_code == 0 and r9.skip_assignment and r9.leader == r9.member_id
    assert {m.member_id for m in r9.members} == set(h.group().members)
    assert h.group().state == S.STABLE and h.group().generation_id == gen
    leader_now = r9.member_id
    r5 = h.resp(h.join(instance="i1", version=5))
    # Old clients are told the previous leader id, so they do not assign in a Stable group.
    assert r5.leader == leader_now and r5.member_id != leader_now and r5.members == []


def test_static_member_rejoin_with_other_protocol_triggers_rebalance() -> None:
    h = Harness()
    a, b, gen = _static_group(h)
    t = h.join(instance="i2", version=5, protocols=[("roundrobin", b"x"), ("range", b"y")])
    # range still wins the vote (a only has range): no protocol change -> no rebalance
    assert h.resp(t).error_code == 0 and h.group().state == S.STABLE


def test_static_member_leave_by_instance_id() -> None:
    h = Harness()
    a, b, gen = _static_group(h)
    r = h.resp(h.leave([("", "i2")]))
    assert r.members[0].error_code == 0 and b not in h.group().members
    r = h.resp(h.leave([("wrong-id", "i1")]))
    assert r.members[0].error_code == E.FENCED_INSTANCE_ID


def test_unload_answers_parked_requests_not_coordinator() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1)
    h.join_new()
    parked = h.last_join
    res = h.shard.unload()
    assert [(tok, r.error_code) for tok, r in res.responses] == [(parked, E.NOT_COORDINATOR)]
    assert h.shard.groups == {}
