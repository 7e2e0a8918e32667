"""The classic group scenarios diffed between shoal and Apache Kafka (run by test_scenarios_groups.py).

Each function takes a bootstrap address, a fresh group and topic names, and returns
a `Transcript`. Sleeps are bounded by the 6 s session timeout the scenarios ask for.
"""

from __future__ import annotations

import time

from tests.reference.scenarios import SESSION_MS, Transcript, WireMember, err, in_thread, wait_for

Parts = list[tuple[str, int]]


def _await_rebalance(observer: WireMember) -> None:
    """Until the group is rebalancing (a join on another thread reached the coordinator)."""
    wait_for(lambda: observer.describe()["state"] == "PreparingRebalance", 10, "the rebalance to start")


def dynamic_members(bootstrap: str, group: str, topic: str) -> Transcript:
    """Join, sync, heartbeat, commit and fetch with their errors; a second member; leave; expiry."""
    t = Transcript()
    a = WireMember(bootstrap, group, t, "client-a")
    b = WireMember(bootstrap, group, t, "client-b")
    try:
        _first_member(t, a, topic)
        _second_member(t, a, b, topic)
        _leave_and_expire(t, a, b, topic)
    finally:
        a.close()
        b.close()
    return t


def _first_member(t: Transcript, a: WireMember, topic: str) -> None:
    t.add("a join without member id", **a.join_observed(a.join([topic])))
    t.add("a join", **a.join_observed(a.join([topic])))
    every: Parts = [(topic, p) for p in range(4)]
    t.add("a sync wrong generation", result=a.sync({a.member_id: every}, generation=a.generation + 1))
    t.add("a sync unknown member", result=a.sync({"bogus": every}, member_id="bogus"))
    t.add("a sync", result=a.sync({a.member_id: every}))
    t.add("a heartbeat", error=a.heartbeat())
    t.add("a heartbeat wrong generation", error=a.heartbeat(generation=a.generation + 5))
    t.add("a heartbeat unknown member", error=a.heartbeat(member_id="bogus"))
    t.add("a commit", result=a.commit({(topic, 0): 5, (topic, 1): 7}))
    t.add("a commit wrong generation", result=a.commit({(topic, 0): 6}, generation=a.generation + 1))
    t.add("a commit unknown member", result=a.commit({(topic, 0): 6}, member_id="bogus"))
    t.add("a commit as admin on a live group", result=a.commit({(topic, 0): 6}, generation=-1, member_id=""))
    t.add("a commit unknown topic", result=a.commit({("no-such-topic-xyz", 0): 1}))
    t.add("fetch", result=a.fetch(topic, 4))
    t.add("describe stable", **a.describe())


def _second_member(t: Transcript, a: WireMember, b: WireMember, topic: str) -> None:
    t.add("b join without member id", **b.join_observed(b.join([topic])))
    b_join = in_thread(lambda: b.join([topic]))
    # The coordinator must see b's join before a's heartbeat; b's join blocks until a rejoins.
    _await_rebalance(a)
    t.add("a heartbeat during rebalance", error=a.heartbeat())
    t.add("a commit during rebalance", result=a.commit({(topic, 0): 8}))
    t.add("describe preparing", state=a.describe()["state"])
    a_resp = a.join([topic])
    b_resp = b_join(REJOIN_TIMEOUT)
    t.add("a rejoin", **a.join_observed(a_resp))
    t.add("b join", **b.join_observed(b_resp))
    t.add("b heartbeat awaiting sync", error=b.heartbeat())
    b_sync = in_thread(lambda: b.sync())
    time.sleep(0.3)
    plan = {a.member_id: [(topic, 0), (topic, 1)], b.member_id: [(topic, 2), (topic, 3)]}
    t.add("a sync (leader)", result=a.sync(plan))
    t.add("b sync (follower)", result=b_sync(REJOIN_TIMEOUT))
    t.add("b commit old generation", result=b.commit({(topic, 2): 3}, generation=b.generation - 1))
    t.add("b commit", result=b.commit({(topic, 2): 3}))
    t.add("describe two members", **a.describe())


def _leave_and_expire(t: Transcript, a: WireMember, b: WireMember, topic: str) -> None:
    t.add("leave unknown member", result=a.leave(member_id="bogus"))
    t.add("b leave", result=b.leave())
    t.add("b heartbeat after leave", error=b.heartbeat())
    t.add("a heartbeat after b left", error=a.heartbeat())
    t.add("a rejoin alone", **a.join_observed(a.join([topic])))
    t.add("a sync alone", result=a.sync({a.member_id: [(topic, p) for p in range(4)]}))
    # a stops heartbeating: after its session timeout the coordinator removes it and the group empties.
    wait_for(lambda: a.describe()["state"] == "Empty", SESSION_MS / 1000 + 10, "the group to empty")
    t.add("describe after expiry", **a.describe())
    t.add("a heartbeat after expiry", error=a.heartbeat())
    t.add("a commit after expiry", result=a.commit({(topic, 0): 9}))
    t.add("admin commit on empty group", result=a.commit({(topic, 0): 10}, generation=-1, member_id=""))
    t.add("fetch after expiry", result=a.fetch(topic, 4))
    t.add("a join with expired id", **a.join_observed(a.join([topic])))


REJOIN_TIMEOUT = 20.0


def static_members(bootstrap: str, group: str, topic: str) -> Transcript:
    """group.instance.id: a restart keeps the assignment without a rebalance; the old id is fenced."""
    t = Transcript()
    s1 = WireMember(bootstrap, group, t, "client-s1", instance_id="inst-1")
    s1b = WireMember(bootstrap, group, t, "client-s1", instance_id="inst-1")  # the same instance, restarted
    s2 = WireMember(bootstrap, group, t, "client-s2", instance_id="inst-2")
    try:
        t.add("s1 join", **s1.join_observed(s1.join([topic])))
        every: Parts = [(topic, p) for p in range(4)]
        t.add("s1 sync", result=s1.sync({s1.member_id: every}))
        t.add("s1 commit", result=s1.commit({(topic, 0): 4}))
        # The restarted process knows only its instance id.
        t.add("s1 restarted join", **s1b.join_observed(s1b.join([topic])))
        s1b.generation = s1.generation if s1b.generation < 0 else s1b.generation
        t.add("s1 restarted sync", result=s1b.sync())
        t.add("old s1 heartbeat", error=s1.heartbeat())
        t.add("old s1 sync", result=s1.sync())
        t.add("old s1 commit", result=s1.commit({(topic, 0): 5}))
        t.add("old s1 join", **s1.join_observed(s1.join([topic])))
        t.add("old s1 leave", result=s1.leave())
        t.add("s1 restarted heartbeat", error=s1b.heartbeat())
        t.add("describe after restart", **s1b.describe())
        t.add("s1 restarted commit", result=s1b.commit({(topic, 0): 6}))
        t.add("fetch", result=s1b.fetch(topic, 4))
        # A second static member joins: a rebalance both take part in.
        s2_join = in_thread(lambda: s2.join([topic]))
        _await_rebalance(s1b)
        t.add("s1 heartbeat during rebalance", error=s1b.heartbeat())
        s1_resp = s1b.join([topic])
        t.add("s1 rejoin", **s1b.join_observed(s1_resp))
        t.add("s2 join", **s2.join_observed(s2_join(REJOIN_TIMEOUT)))
        s2_sync = in_thread(lambda: s2.sync())
        time.sleep(0.3)
        t.add("s1 sync (leader)", result=s1b.sync({s1b.member_id: every[:2], s2.member_id: every[2:]}))
        t.add("s2 sync", result=s2_sync(REJOIN_TIMEOUT))
        t.add("s2 leave", result=s2.leave())
        t.add("describe after s2 left", state=s1b.describe()["state"])
        t.add("s1 leave", result=s1b.leave())
        t.add("describe after both left", **s1b.describe())
    finally:
        for m in (s1, s1b, s2):
            m.close()
    return t


def edge_errors(bootstrap: str, group: str, topic: str) -> Transcript:
    """The errors of malformed or mismatched requests: session bounds, protocol mismatches, metadata
    size, old JoinGroup versions, unknown groups, DeleteGroups and OffsetDelete on live groups."""
    from shoal.protocol.generated.delete_groups_request import DeleteGroupsRequest
    from shoal.protocol.generated.offset_delete_request import OffsetDeleteRequest

    t = Transcript()
    a = WireMember(bootstrap, group, t, "client-a")
    b = WireMember(bootstrap, group, t, "client-b")
    other = WireMember(bootstrap, group + "-unknown", t, "client-o")
    try:
        t.add("join session below min", **a.join_observed(a.join([topic], session_ms=5999, member_id="")))
        t.add("join session above max", **a.join_observed(a.join([topic], session_ms=1_800_001, member_id="")))
        t.add("join no protocols", **a.join_observed(a.join([topic], protocols=(), member_id="")))
        t.add("join v3 without member id", **a.join_observed(a.join([topic], version=3)))
        t.add("a sync", result=a.sync({a.member_id: [(topic, 0)]}))
        t.add("b join other protocol type", **b.join_observed(b.join([topic], protocol_type="connect")))
        b.member_id = ""
        t.add("b join no common protocol", **b.join_observed(b.join([topic], protocols=("roundrobin",), version=3)))
        t.add("commit metadata too large", result=a.commit({(topic, 0): 1}, metadata="x" * 5000))
        t.add("commit", result=a.commit({(topic, 0): 2}))
        delete = DeleteGroupsRequest(groups_names=[group, group + "-never-seen"])
        t.add("delete live and unknown groups", result=sorted(
            (r.group_id.replace(group, "G"), err(r.error_code)) for r in a.conn.send(delete, 2).results))
        od = OffsetDeleteRequest(group_id=group, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name=topic, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])])
        resp = a.conn.send(od, 0)
        t.add("offset delete subscribed topic", error=err(resp.error_code),
              partitions=[err(p.error_code) for tp in resp.topics for p in tp.partitions])
        t.add("unknown group heartbeat", error=other.heartbeat(generation=1, member_id="bogus"))
        t.add("unknown group sync", result=other.sync(generation=1, member_id="bogus"))
        t.add("unknown group leave", result=other.leave(member_id="bogus"))
        t.add("unknown group commit with member", result=other.commit({(topic, 0): 1}, generation=1, member_id="bogus"))
        t.add("unknown group fetch", result=other.fetch(topic, 2))
        t.add("unknown group describe", **other.describe())
        t.add("a leave", result=a.leave())
        resp = a.conn.send(od, 0)
        t.add("offset delete on empty group", error=err(resp.error_code),
              partitions=[err(p.error_code) for tp in resp.topics for p in tp.partitions])
        t.add("fetch after offset delete", result=a.fetch(topic, 2))
        t.add("delete empty group", result=[err(r.error_code) for r in a.conn.send(
            DeleteGroupsRequest(groups_names=[group]), 2).results])
        t.add("describe deleted group", **a.describe())
    finally:
        for m in (a, b, other):
            m.close()
    return t


def expiry_during_rebalance(bootstrap: str, group: str, topic: str) -> Transcript:
    """a and b stable; b goes silent; c joins: the rebalance waits for b until its session expires,
    then completes with a and c; b's old id is unknown from then on."""
    t = Transcript()
    a = WireMember(bootstrap, group, t, "client-a")
    b = WireMember(bootstrap, group, t, "client-b")
    c = WireMember(bootstrap, group, t, "client-c")
    try:
        a.join([topic])
        a.join([topic])
        a.sync({a.member_id: [(topic, p) for p in range(4)]})
        b.join([topic])
        b_join = in_thread(lambda: b.join([topic]))
        _await_rebalance(a)
        a_join = in_thread(lambda: a.join([topic]))
        b_join(REJOIN_TIMEOUT)
        a_join(REJOIN_TIMEOUT)
        b_sync = in_thread(lambda: b.sync())
        time.sleep(0.3)
        t.add("a sync gen 2", result=a.sync({a.member_id: [(topic, 0), (topic, 1)], b.member_id: [(topic, 2), (topic, 3)]}))
        t.add("b sync gen 2", result=b_sync(REJOIN_TIMEOUT))
        # From here b sends nothing. c joins; a rejoins and waits for b, whose session runs out.
        t.add("c join without member id", **c.join_observed(c.join([topic])))
        c_join = in_thread(lambda: c.join([topic]))
        _await_rebalance(a)
        t.add("a heartbeat", error=a.heartbeat())
        started = time.monotonic()
        a_resp = a.join([topic])
        t.add("a rejoin", **a.join_observed(a_resp))
        t.add("c join", **c.join_observed(c_join(REJOIN_TIMEOUT)))
        # The join completed when b expired: not at once (b was awaited), within its session timeout.
        t.add("join waited for b's expiry", waited=0.5 < time.monotonic() - started < SESSION_MS / 1000 + 3)
        c_sync = in_thread(lambda: c.sync())
        time.sleep(0.3)
        t.add("a sync gen 3", result=a.sync({a.member_id: [(topic, 0), (topic, 1)], c.member_id: [(topic, 2), (topic, 3)]}))
        t.add("c sync gen 3", result=c_sync(REJOIN_TIMEOUT))
        t.add("b heartbeat after expiry", error=b.heartbeat())
        t.add("b commit after expiry", result=b.commit({(topic, 2): 1}))
        t.add("b sync after expiry", result=b.sync())
        t.add("describe", **a.describe())
    finally:
        for m in (a, b, c):
            m.close()
    return t
