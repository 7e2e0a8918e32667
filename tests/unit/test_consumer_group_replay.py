"""State is the replay of records: a fresh shard fed the records a consumer group wrote holds the
same state, through joins, reconciliation, static replacement, leaves, fencing and deletion."""

from __future__ import annotations

import uuid

from shoal.coordinator.group.consumer import records as R
from shoal.coordinator.group.consumer.member import ConsumerMember, MemberState
from shoal.coordinator.group.consumer.reconciliation import reconcile
from shoal.coordinator.group.formatter import format_record
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.delete_groups_request import DeleteGroupsRequest
from tests.unit.consumer_group_harness import CGHarness, Consumer, converge, replayed, snapshot

T = uuid.UUID(int=1)


def _check(h: CGHarness) -> None:
    assert snapshot(replayed(h)) == snapshot(h.shard)


def test_replay_gives_the_same_state_at_every_step() -> None:
    h = CGHarness(topics={"t": 6, "u": 2})
    a, b, c = Consumer(h, "a"), Consumer(h, "b", ["t", "u"]), Consumer(h, "c", instance="ic")
    a.join()
    _check(h)
    b.join()
    _check(h)
    a._apply(h.hb("a", 2, owned={"t": set(range(6))}))  # revoking
    _check(h)
    c.join()
    converge([a, b, c])
    _check(h)
    c.leave(-2)
    _check(h)
    Consumer(h, "c2", instance="ic").join()
    _check(h)
    h.set_topic("t", 8)
    b.beat()
    _check(h)
    a.leave()
    _check(h)
    h.advance(60000)  # everyone else times out
    assert h.cgroup().state_name == "Empty"
    _check(h)
    assert h.resp(h.send(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=["g"]))).results[0].error_code == 0
    assert "g" not in replayed(h).groups


def test_consumer_records_replace_a_simple_group_on_load() -> None:
    h = CGHarness()
    h.commit({("t", 0): 1})  # offsets first in the log, then the consumer group's records
    Consumer(h, "a").join()
    fresh = replayed(h)
    assert fresh.groups["g"].type.value == "consumer"
    assert snapshot(fresh) == snapshot(h.shard)


def test_record_round_trip() -> None:
    m = ConsumerMember("m", member_epoch=3, previous_member_epoch=2, state=MemberState.UNREVOKED_PARTITIONS,
                       instance_id="i", rack_id="r", rebalance_timeout_ms=5, client_id="c", client_host="/h",
                       subscribed_topic_names=("t",), server_assignor="range",
                       assigned={T: frozenset({0})}, pending_revocation={T: frozenset({1})})
    key, value = R.current_assignment_record("g", m)
    assert R.decode_key(key) == (R.CURRENT_MEMBER_ASSIGNMENT, "g", "m")
    v = R.decode_value(R.CURRENT_MEMBER_ASSIGNMENT, value)
    assert (v.member_epoch, v.previous_member_epoch, v.state) == (3, 2, 1)
    assert value[:2] == b"\x00\x00" and key[:2] == b"\x00\x08"


def test_formatter_prints_consumer_group_records() -> None:
    line = format_record(*R.group_epoch_record("g", 4))
    assert line == '{"key":{"type":3,"data":{"groupId":"g"}},"value":{"version":0,"data":{"epoch":4}}}'
    assert format_record(*R.group_epoch_tombstone("g")) == '{"key":{"type":3,"data":{"groupId":"g"}},"value":null}'
    line = format_record(*R.target_assignment_record("g", "m", {T: frozenset({1, 0})}))
    assert line is not None and '"memberId":"m"' in line and '"partitions":[0,1]' in line


# ---------------------------------------------------------------- reconciliation, pure

def _free(topic_id: uuid.UUID, p: int) -> int:
    return -1


def test_reconcile_stable_member_to_a_new_target() -> None:
    m = ConsumerMember("m", member_epoch=1, assigned={T: frozenset({0, 1})})
    # Gains only: straight to the target epoch.
    r = reconcile(m, 2, {T: frozenset({0, 1, 2})}, _free, [(T, [0, 1])])
    assert (r.member_epoch, r.previous_member_epoch, r.state, r.assigned) == (2, 1, MemberState.STABLE,
                                                                            {T: frozenset({0, 1, 2})})
    # Loses one it still owns: stays in its epoch, revoking.
    r = reconcile(m, 2, {T: frozenset({0})}, _free, [(T, [0, 1])])
    assert (r.member_epoch, r.state, r.assigned, r.pending_revocation) == (
        1, MemberState.UNREVOKED_PARTITIONS, {T: frozenset({0})}, {T: frozenset({1})})
    # Reported as already gone: no need to wait.
    r = reconcile(m, 2, {T: frozenset({0})}, _free, [(T, [0])])
    assert (r.member_epoch, r.state) == (2, MemberState.STABLE)


def test_reconcile_unreleased_partitions_wait_for_their_owner() -> None:
    m = ConsumerMember("m", member_epoch=1)
    owned_elsewhere = {(T, 1)}

    def epoch(topic_id: uuid.UUID, p: int) -> int:
        return 4 if (topic_id, p) in owned_elsewhere else -1

    r = reconcile(m, 2, {T: frozenset({0, 1})}, epoch, [])
    assert (r.member_epoch, r.state, r.assigned) == (2, MemberState.UNRELEASED_PARTITIONS, {T: frozenset({0})})
    owned_elsewhere.clear()
    r = reconcile(r, 2, {T: frozenset({0, 1})}, epoch, [(T, [0])])
    assert (r.member_epoch, r.state, r.assigned) == (2, MemberState.STABLE, {T: frozenset({0, 1})})


def test_reconcile_unrevoked_member_moves_on_once_revoked() -> None:
    m = ConsumerMember("m", member_epoch=1, state=MemberState.UNREVOKED_PARTITIONS,
                       assigned={T: frozenset({0})}, pending_revocation={T: frozenset({1})})
    assert reconcile(m, 2, {T: frozenset({0})}, _free, [(T, [0, 1])]) is m
    assert reconcile(m, 2, {T: frozenset({0})}, _free, None) is m  # no report: still owned
    r = reconcile(m, 2, {T: frozenset({0})}, _free, [(T, [0])])
    assert (r.member_epoch, r.state, r.pending_revocation) == (2, MemberState.STABLE, {})
