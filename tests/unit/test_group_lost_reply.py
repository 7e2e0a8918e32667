"""Every parked JoinGroup/SyncGroup gets exactly one answer, on every path.

The invariant, checked after each `handle`/`poll`:
  * every unanswered JoinGroup/SyncGroup token is held by exactly one
    member's `join_waiter`/`sync_waiter` of a live group (else nobody will
    ever answer it), and no waiter holds a token already answered;
  * join waiters only exist while the group is PreparingRebalance and a
    join timer is armed; sync waiters only while CompletingRebalance and a
    sync timer is armed (so time alone moves every parked request on).
A seeded random scenario of 2-4 clients (dynamic and static, joins, syncs,
heartbeats, leaves, crashes, reconnects re-sending a request while the old
one is parked, long pauses) asserts it throughout and that, once the clients
go quiet and all timers have fired, no token is left unanswered.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.runtime import GroupCoordinatorRuntime
from shoal.coordinator.group.state import GroupState
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.join_group_request import JoinGroupRequest
from shoal.storage.config import LogConfig
from shoal.storage.manager import LogManager
from tests.unit.test_group_harness import JOIN, SYNC, Harness

E = ErrorCode
S = GroupState


class CheckedHarness(Harness):
    """A Harness that checks the no-lost-reply invariant after every step."""

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.parkable: set[int] = set()

    def send(self, api_key: int, version: int, request: Any, client_id: str = "c") -> int:
        token = super().send(api_key, version, request, client_id)
        if api_key in (JOIN, SYNC):
            self.parkable.add(token)
        check_invariant(self)
        return token

    def advance(self, ms: int) -> None:
        super().advance(ms)
        check_invariant(self)

    def unanswered(self) -> set[int]:
        return {t for t in self.parkable if t not in self.responses}


def check_invariant(h: CheckedHarness) -> None:
    held: list[int] = []
    timers = h.shard.timers
    for gid, g in h.shard.groups.items():
        for m in g.members.values():
            if m.join_waiter is not None:
                held.append(m.join_waiter.token)
                assert g.state == S.PREPARING_REBALANCE, (gid, m.member_id, g.state)
                assert ("join", gid) in timers, f"{gid}: parked join with no join timer"
            if m.sync_waiter is not None:
                held.append(m.sync_waiter.token)
                assert g.state == S.COMPLETING_REBALANCE, (gid, m.member_id, g.state)
                assert ("sync", gid) in timers, f"{gid}: parked sync with no sync timer"
        if g.state == S.PREPARING_REBALANCE:
            assert ("join", gid) in timers, f"{gid}: PreparingRebalance with no join timer"
    assert len(held) == len(set(held)), f"a token is parked twice: {held}"
    answered = [t for t in held if t in h.responses]
    assert not answered, f"waiters hold tokens already answered: {answered}"
    lost = h.unanswered() - set(held)
    assert not lost, f"unanswered tokens nobody holds (lost replies): {sorted(lost)}"


# ---------------------------------------------------------------- paths, one by one

def test_second_join_while_one_is_parked_answers_the_first() -> None:
    h = CheckedHarness()
    (a, b), gen = h.stable_group(2)
    t1 = h.join(a)  # leader rejoins: rebalance, parked waiting for b
    assert h.resp(t1) is None
    t2 = h.join(a)  # the client re-sent it (reconnect): the first gets an answer
    assert h.resp(t1).error_code == E.REBALANCE_IN_PROGRESS
    assert h.resp(t2) is None
    h.join(b)
    assert h.resp(t2).error_code == 0
    assert not h.unanswered() - {t for t in h.parkable if t > t2}


def test_new_member_parked_join_expires_with_unknown_member_id() -> None:
    h = CheckedHarness(new_member_join_timeout_ms=20_000)
    (a,), gen = h.stable_group(1, session=60_000)
    b = h.join_new(session=60_000)
    parked_b = h.last_join
    assert h.resp(parked_b) is None
    # a never rejoins; b is new, so its own new-member timeout (20 s) comes before the
    # rebalance timeout (30 s): b is removed and told so.
    h.advance(20_000)
    assert h.resp(parked_b).error_code == E.UNKNOWN_MEMBER_ID
    assert b not in h.group().members
    h.advance(10_000)
    assert not h.unanswered()


def test_member_removed_by_leave_while_its_join_is_parked() -> None:
    h = CheckedHarness()
    (a, b), gen = h.stable_group(2)
    ta = h.join(a)
    # b's LeaveGroup came on another connection (or an admin removed it by id).
    h.leave([(b, None)])
    assert h.resp(ta).error_code == 0  # the rebalance completes with a alone
    tb = h.join(b)
    h.leave([(a, None)])
    assert h.resp(tb).error_code == E.UNKNOWN_MEMBER_ID
    assert not h.unanswered() - {t for t in h.parkable if h.resp(t) is None and t > tb}


def test_leave_of_member_with_parked_join_answers_it() -> None:
    h = CheckedHarness()
    (a, b), gen = h.stable_group(2)
    ta = h.join(a)
    assert h.resp(ta) is None
    h.leave([(a, None)])  # e.g. an admin RemoveMembers, or the client's other connection
    assert h.resp(ta).error_code == E.UNKNOWN_MEMBER_ID


def test_rebalance_restart_answers_parked_syncs() -> None:
    h = CheckedHarness()
    (a, b), gen = h.stable_group(2)
    ta, _ = h.join(a), h.join(b)
    gen2 = h.resp(ta).generation_id
    sb = h.sync(b, gen2)  # follower parked in CompletingRebalance
    assert h.resp(sb) is None
    c = h.join_new()  # a newcomer restarts the rebalance
    assert h.resp(sb).error_code == E.REBALANCE_IN_PROGRESS
    assert h.resp(h.last_join) is None
    h.join(a), h.join(b)
    assert h.resp(h.last_join) is not None and c in h.group().members


def test_static_replacement_fences_parked_join_and_sync() -> None:
    h = CheckedHarness()
    ta = h.join(instance="i1", session=120_000)  # static: outlives the rebalance timeout
    a = h.resp(ta).member_id
    h.sync(a, 1, {a: b"A"})
    tb = h.join(instance="i2")  # parked: a must rejoin
    b_id = h.group().static_members["i2"]
    tb2 = h.join(instance="i2")  # i2 restarts while its first join is parked
    assert h.resp(tb).error_code == E.FENCED_INSTANCE_ID
    assert h.resp(tb2) is None and b_id not in h.group().members
    h.join(a, instance="i1")
    assert h.resp(tb2).error_code == 0


def test_pending_member_expiry_completes_the_join_of_the_others() -> None:
    h = CheckedHarness()
    (a, b), gen = h.stable_group(2)
    ta, tb = h.join(a), h.join(b)
    assert h.resp(ta) is not None  # all joined: completes at once
    gen2 = h.resp(ta).generation_id
    h.sync(b, gen2), h.sync(a, gen2, {a: b"A", b: b"B"})
    # A newcomer takes the MEMBER_ID_REQUIRED step, then never comes back.
    first = h.join()
    assert h.resp(first).error_code == E.MEMBER_ID_REQUIRED
    ta = h.join(a)  # leader rejoin: rebalance, waits for b (and the pending newcomer)
    tb = h.join(b)
    assert h.resp(ta) is None and h.resp(tb) is None  # still waiting for the pending member
    h.advance(10_000)  # its session timeout: dropped, the others complete right away
    assert h.resp(ta).error_code == 0 and h.resp(tb).error_code == 0
    assert h.group().state == S.COMPLETING_REBALANCE


def test_join_queued_behind_another_request_arrives_after_the_rebalance_completed() -> None:
    h = CheckedHarness()
    (a, b), gen = h.stable_group(2)
    ta = h.join(a)
    h.advance(30_000)  # b's JoinGroup was stuck behind another request: rebalance timeout
    assert h.resp(ta).error_code == 0 and b not in h.group().members
    tb = h.join(b)  # finally processed: b is no longer a member
    assert h.resp(tb).error_code == E.UNKNOWN_MEMBER_ID


def test_unload_answers_every_parked_request() -> None:
    h = CheckedHarness()
    (a, b), gen = h.stable_group(2)
    ta, _ = h.join(a), h.join(b)
    gen2 = h.resp(ta).generation_id
    sb = h.sync(b, gen2)
    h.join_new(gid="other")
    parked_other = h.last_join
    res = h.shard.unload()
    h._collect(res)
    assert h.resp(sb).error_code == E.NOT_COORDINATOR
    assert h.resp(parked_other) is not None
    assert not h.unanswered()


def test_static_leader_that_does_not_rejoin_hands_leadership_to_a_joined_member() -> None:
    # Kafka's maybeElectNewJoinedLeader: a static leader that did not rejoin stays a
    # member, but a member that did rejoin leads, so somebody sends the assignment.
    h = CheckedHarness()
    ta = h.join(instance="i1", session=120_000)  # static: outlives the rebalance timeout
    a = h.resp(ta).member_id
    h.sync(a, 1, {a: b"A"}, instance="i1")
    tb = h.join(instance="i2")
    b = h.group().static_members["i2"]
    h.advance(30_000)  # a (the leader) never rejoins: the rebalance timeout completes the join
    rb = h.resp(tb)
    assert rb.error_code == 0
    assert rb.leader == b, "the leader did not rejoin: a member that did must lead"
    assert {m.member_id for m in rb.members} == {a, b}
    sb = h.sync(b, rb.generation_id, {a: b"A", b: b"B"}, instance="i2")
    assert h.resp(sb).error_code == 0 and h.group().state == S.STABLE


def test_no_static_member_rejoined_postpones_completion() -> None:
    h = CheckedHarness()
    ta = h.join(instance="i1", session=120_000)  # static: outlives the rebalance timeout
    a = h.resp(ta).member_id
    h.sync(a, 1, {a: b"A"}, instance="i1")
    tb = h.join(instance="i2")
    b = h.group().static_members["i2"]
    h.leave([("", "i2")])  # b removed by instance id: its parked join is answered
    assert h.resp(tb).error_code == E.UNKNOWN_MEMBER_ID
    gen_before = h.group().generation_id
    h.advance(30_000)
    # Nobody rejoined: Kafka waits another rebalance timeout instead of a leaderless generation.
    assert h.group().state == S.PREPARING_REBALANCE and h.group().generation_id == gen_before
    tr = h.join(a, instance="i1")
    assert h.resp(tr).error_code == 0 and h.resp(tr).leader == a
    assert b not in h.group().members


# ---------------------------------------------------------------- seeded random scenarios

class Client:
    """A caricature of a consumer: one request at a time per connection, like the broker."""

    def __init__(self, name: str, instance: str | None) -> None:
        self.name = name
        self.instance = instance
        self.member_id = ""
        self.generation = -1
        self.leader = False
        self.members: list[str] = []
        self.inflight: tuple[str, int] | None = None  # ("join" | "sync", token)
        self.stable = False
        self.crashed = False


def _step(h: CheckedHarness, rng: random.Random, clients: list[Client]) -> None:
    c = rng.choice(clients)
    if c.crashed:
        if rng.random() < 0.1:  # restart: a new process, same instance id if static
            c.__init__(c.name, c.instance)  # type: ignore[misc]
        else:
            h.advance(rng.choice([1, 100, 1000, 3000]))
        return
    # Collect the answer to the in-flight request, if any.
    if c.inflight is not None:
        kind, tok = c.inflight
        r = h.resp(tok)
        if r is None:
            roll = rng.random()
            if roll < 0.05:
                # The connection dropped: the client re-sends on a new one.
                c.inflight = None
                _send_join(h, c) if kind == "join" else _send_sync(h, c)
            elif roll < 0.08:
                c.crashed = True
            else:
                h.advance(rng.choice([1, 50, 500, 2000, 7000]))
            return
        c.inflight = None
        if kind == "join":
            if r.error_code == 0:
                c.member_id, c.generation = r.member_id, r.generation_id
                c.leader = r.leader == r.member_id
                c.members = [m.member_id for m in r.members]
                if rng.random() < 0.9:
                    _send_sync(h, c)
            elif r.error_code == E.MEMBER_ID_REQUIRED:
                c.member_id = r.member_id
                if rng.random() < 0.9:
                    _send_join(h, c)
            elif r.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
                c.member_id, c.stable = "", False
        else:
            c.stable = r.error_code == 0
            if r.error_code in (E.UNKNOWN_MEMBER_ID,):
                c.member_id = ""
        return
    roll = rng.random()
    if roll < 0.35:
        _send_join(h, c)
    elif roll < 0.6 and c.member_id:
        r = h.resp(h.heartbeat(c.member_id, c.generation, instance=c.instance))
        if r.error_code == E.REBALANCE_IN_PROGRESS or r.error_code == E.ILLEGAL_GENERATION:
            _send_join(h, c)
        elif r.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            c.member_id = ""
    elif roll < 0.65 and c.member_id:
        h.leave([(c.member_id, c.instance)])
        c.member_id, c.stable = "", False
    elif roll < 0.68:
        c.crashed = True
    elif roll < 0.72 and c.member_id and c.generation > 0:
        _send_sync(h, c)  # a stray or stale SyncGroup
    else:
        h.advance(rng.choice([1, 100, 1000, 3000, 8000]))


def _send_join(h: CheckedHarness, c: Client) -> None:
    tok = h.join(c.member_id, instance=c.instance, session=6000, rebalance=15000, client_id=c.name)
    c.inflight, c.stable = ("join", tok), False


def _send_sync(h: CheckedHarness, c: Client) -> None:
    assignments = {m: f"{m}@{c.generation}".encode() for m in c.members} if c.leader else None
    tok = h.sync(c.member_id, c.generation, assignments, instance=c.instance)
    c.inflight = ("sync", tok)


@pytest.mark.parametrize("seed", range(60))
def test_random_scenarios_leave_no_request_unanswered(seed: int) -> None:
    rng = random.Random(seed)
    h = CheckedHarness(group_initial_rebalance_delay_ms=rng.choice([0, 0, 3000]),
                       new_member_join_timeout_ms=rng.choice([20_000, 300_000]))
    n = rng.randint(2, 4)
    clients = [Client(f"c{i}", f"i{i}" if rng.random() < 0.3 else None) for i in range(n)]
    for _ in range(400):
        _step(h, rng, clients)
    # The clients go quiet: time alone must answer every parked request.
    for _ in range(40):
        h.advance(30_000)
    assert not h.unanswered(), f"seed {seed}: never answered: {sorted(h.unanswered())}"
    if seed % 3 == 0:
        h._collect(h.shard.unload())
        assert not h.unanswered()


# ---------------------------------------------------------------- runtime: the timer loop survives

def test_timer_loop_survives_a_failing_timer_and_still_answers_parked_joins(tmp_path) -> None:
    """A timer callback that raises must not stop the partition's later timers."""

    def join(member_id: str) -> JoinGroupRequest:
        return JoinGroupRequest(
            group_id="g", session_timeout_ms=5000, rebalance_timeout_ms=300, member_id=member_id,
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")])

    async def scenario() -> None:
        cfg = GroupConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=10,
                          offsets_topic_num_partitions=1)
        lm = LogManager([tmp_path], LogConfig())
        rt = GroupCoordinatorRuntime(1, lm, cfg)
        try:
            await rt.load_partition(0)
            a = await rt.handle(JOIN, 3, join(""))
            assert a.error_code == 0
            shard = rt.shard(0)
            assert shard is not None

            def boom(now_ms: int) -> None:
                raise RuntimeError("injected timer failure")

            shard.timers.schedule(("boom",), int(time.time() * 1000) + 20, boom)
            rt._partitions[0].wake.set()
            await asyncio.sleep(0.1)  # the failing timer has fired in the loop
            # b joins: the group waits for a (who never rejoins) until the rebalance
            # timeout, which only the timer loop can fire: nothing else comes in.
            b = await asyncio.wait_for(rt.handle(JOIN, 3, join("")), 5)
            assert b.error_code == 0 and b.leader == b.member_id
        finally:
            await rt.close()
            lm.close()

    asyncio.run(scenario())
