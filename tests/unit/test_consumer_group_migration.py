"""Online migration between classic and consumer groups (group.consumer.migration.policy), as Kafka 4.x."""

from __future__ import annotations

from typing import Any

from shoal.assignors.consumer_protocol import decode_assignment, encode_assignment, encode_subscription
from shoal.assignors.types import Assignment, Subscription, TopicPartition
from shoal.coordinator.group.group import ClassicGroup
from shoal.protocol.errors import ErrorCode as E
from tests.unit.consumer_group_harness import CGHarness, Consumer, assert_exclusive, replayed, snapshot


def sub(owned: set[int] = frozenset()) -> bytes:  # type: ignore[assignment]
    return encode_subscription(Subscription(["t"], owned_partitions=[TopicPartition("t", p) for p in sorted(owned)]),
                               1)


def classic_group(h: CGHarness, user_data: bytes | None = None) -> int:
    """a owns t-0..2, b owns t-3..5 in a Stable classic group (cooperative-sticky), their assignments
    with ``user_data``; its generation."""
    protos = [("cooperative-sticky", sub())]
    a = h.join_new(protocols=protos)
    b = h.join_new(protocols=protos)
    ta = h.join(a, protocols=protos)
    ra, rb = h.resp(ta), h.resp(h.last_join)
    gen = ra.generation_id
    leader = ra.leader
    asg = {a: encode_assignment(Assignment([TopicPartition("t", p) for p in (0, 1, 2)], user_data)),
           b: encode_assignment(Assignment([TopicPartition("t", p) for p in (3, 4, 5)], user_data))}
    for m in (a, b):
        assert h.resp(h.sync(m, gen, asg if m == leader else None)).error_code == 0
    assert rb.error_code == 0 and h.group().state_name == "Stable"
    return gen


class ClassicMember:
    """A classic cooperative consumer inside the (converted) group."""

    def __init__(self, h: CGHarness, member_id: str, gen: int, owned: set[int]) -> None:
        self.h, self.member_id, self.gen, self.owned = h, member_id, gen, set(owned)

    def rejoin(self) -> Any:
        r = self.h.resp(self.h.join(self.member_id, protocols=[("cooperative-sticky", sub(self.owned))]))
        assert r.error_code == 0, r
        self.gen = r.generation_id
        s = self.h.resp(self.h.sync(self.member_id, self.gen, ptype="consumer", pname="cooperative-sticky",
                                    version=5))
        if s.error_code == 0:
            self.owned = {p for _, p in decode_assignment(s.assignment).partitions}
        return s

    def beat(self) -> int:
        code = self.h.resp(self.h.heartbeat(self.member_id, self.gen)).error_code
        if code == E.REBALANCE_IN_PROGRESS:
            self.rejoin()
        return code


def _members(h: CGHarness) -> list[str]:
    return list(h.cgroup().members)


def test_upgrade_keeps_classic_assignment_and_never_owns_twice() -> None:
    h = CGHarness()
    gen = classic_group(h)
    a_id, b_id = list(h.group().members)
    c = Consumer(h, "c")
    r = c.join()
    assert r.error_code == 0
    g = h.cgroup()
    assert g.members[a_id].classic is not None and g.members["c"].classic is None
    assert sorted(g.members[a_id].assigned[next(iter(g.members[a_id].assigned))]) == [0, 1, 2]
    assert g.group_epoch == gen + 1 and c.partitions() == set()
    assert_exclusive(g)
    a, b = ClassicMember(h, a_id, gen, {0, 1, 2}), ClassicMember(h, b_id, gen, {3, 4, 5})
    assert h.resp(h.heartbeat(a_id, gen)).error_code == E.REBALANCE_IN_PROGRESS
    for _ in range(8):
        for m in (a, b):
            m.beat()
            assert_exclusive(h.cgroup())
        c.beat()
        assert_exclusive(h.cgroup())
        owned = [a.owned, b.owned, c.partitions()]
        assert sum(len(o) for o in owned) <= 6 and not (a.owned & b.owned or a.owned & c.partitions()
                                                         or b.owned & c.partitions())
    assert h.cgroup().state_name == "Stable"
    assert sorted(a.owned | b.owned | c.partitions()) == [0, 1, 2, 3, 4, 5] and c.partitions()
    assert snapshot(replayed(h)) == snapshot(h.shard)


def test_downgrade_when_last_consumer_member_leaves() -> None:
    h = CGHarness()
    classic_group(h)
    a_id, b_id = list(h.group().members)
    c = Consumer(h, "c")
    c.join()
    assert c.leave().error_code == 0
    g = h.group()
    assert isinstance(g, ClassicGroup) and g.state_name == "PreparingRebalance"
    assert set(g.members) == {a_id, b_id}
    fresh = replayed(h).groups["g"]
    assert isinstance(fresh, ClassicGroup) and set(fresh.members) == {a_id, b_id}
    assert fresh.generation_id == g.generation_id


def test_policy_refusals() -> None:
    for policy in ("disabled", "downgrade"):
        h = CGHarness(group_consumer_migration_policy=policy)
        classic_group(h)
        r = h.cg_join("c")
        assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")
    h = CGHarness(group_consumer_migration_policy="upgrade")
    classic_group(h)
    c = Consumer(h, "c")
    assert c.join().error_code == 0
    c.leave()
    g = h.cgroup()  # no downgrade: still a consumer group of classic members
    assert len(g.members) == 2 and all(m.classic is not None for m in g.members.values())


def test_classic_requests_of_unknown_or_consumer_members() -> None:
    h = CGHarness()
    gen = classic_group(h)
    Consumer(h, "c").join()
    assert h.resp(h.heartbeat("c", 1)).error_code == E.UNKNOWN_MEMBER_ID
    assert h.resp(h.heartbeat("nobody", gen)).error_code == E.UNKNOWN_MEMBER_ID
    a_id = next(m for m in h.cgroup().members if m != "c")
    assert h.resp(h.heartbeat(a_id, gen + 7)).error_code == E.ILLEGAL_GENERATION
    r = h.resp(h.leave([(a_id, None)]))
    assert r.members[0].error_code == 0 and a_id not in h.cgroup().members


def test_classic_member_session_expires_in_consumer_group() -> None:
    h = CGHarness()
    classic_group(h)
    c = Consumer(h, "c")
    c.join()
    h.advance(10_001)  # the classic members' session timeout (10s), not the consumer one (45s)
    assert _members(h) == ["c"]


def test_an_upgrade_whose_heartbeat_fails_leaves_the_classic_group_as_it_was() -> None:
    # Kafka writes the conversion with the heartbeat's own records and rolls both back when the
    # heartbeat fails: here an invalid regex, found after the group was converted for the new member.
    h = CGHarness()
    gen = classic_group(h)
    before = snapshot(h.shard)
    written = len(h.records)
    r = h.hb("c", 0, regex="(?=t)t", owned={}, rebalance=1000)
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION
    assert len(h.records) == written and snapshot(h.shard) == before
    g = h.group()
    assert isinstance(g, ClassicGroup) and g.state_name == "Stable" and g.generation_id == gen
    a_id = next(iter(g.members))
    assert h.resp(h.heartbeat(a_id, gen)).error_code == 0  # its members' sessions go on
    assert Consumer(h, "c").join().error_code == 0  # and a valid heartbeat upgrades it
    assert snapshot(replayed(h)) == snapshot(h.shard)


def test_assignor_user_data_refuses_the_upgrade_as_kafka() -> None:
    # An assignor that gives its members user data in their assignments: Kafka refuses to convert such a
    # group (the consumer group would lose it), and so does shoal.
    h = CGHarness()
    classic_group(h, user_data=b"\x00\x00\x00\x00\x00\x00\x00\x02")
    written = len(h.records)
    r = h.cg_join("c")
    assert (r.error_code, r.error_message) == (
        E.GROUP_ID_NOT_FOUND, "Cannot upgrade classic group g to consumer group because an unsupported custom "
        "assignor is in use. Please refer to the documentation or switch to a default assignor before "
        "re-attempting the upgrade.")
    assert len(h.records) == written and isinstance(h.group(), ClassicGroup)
