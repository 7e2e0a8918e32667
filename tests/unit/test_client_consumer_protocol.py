"""The consumer-protocol (KIP-848) member of shoal's client against a scripted fake coordinator:
heartbeat fields, reconciliation order and callbacks, fencing, leave epochs, errors, offsets."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from shoal.client.cluster import ClusterMetadata, TopicInfo
from shoal.client.config import CONSUMER_DEFAULTS, make_config
from shoal.client.consumer import AIOConsumer
from shoal.client.consumer_member import ConsumerMember, MemberState
from shoal.client.errors import CommitFailedError
from shoal.client.member_offsets import MemberIdentity, build_offset_fetch
from shoal.client.protocol import SPECS
from shoal.client.structs import OffsetAndMetadata, TopicPartition
from shoal.client.subscription import SubscriptionState
from shoal.protocol.errors import ErrorCode, KafkaError
from shoal.protocol.generated.api_keys import ApiKey

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
HB = SPECS[ApiKey.CONSUMER_GROUP_HEARTBEAT]


def hb_response(epoch: int, assignment: dict[uuid.UUID, list[int]] | None = None, error: int = 0,
                member_id: str | None = None, interval: int = 5000) -> Any:
    r = HB.response
    assign = None
    if assignment is not None:
        assign = r.Assignment(topic_partitions=[r.TopicPartitions(topic_id=t, partitions=ps)
                                                for t, ps in assignment.items()])
    return r(error_code=error, member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=interval,
             assignment=assign)


class FakeConn:
    """Answers each request with the next scripted answer for its API (a callable gets the request)."""

    def __init__(self, script: dict[int, list[Any]], versions: dict[int, int]) -> None:
        self.script = script
        self.versions = versions
        self.sent: list[tuple[Any, int | None]] = []

    def version_up_to(self, api_key: int, highest: int) -> int:
        v = self.versions.get(api_key, -1)
        return min(v, highest) if v >= 0 else -1

    async def send(self, request: Any, version: int | None = None, timeout_ms: int | None = None) -> Any:
        self.sent.append((request, version))
        answers = self.script.get(type(request).API_KEY) or []
        if not answers:
            raise AssertionError(f"unscripted {type(request).__name__}")
        answer = answers.pop(0)
        return answer(request) if callable(answer) else answer


class FakeClient:
    def __init__(self, conn: FakeConn) -> None:
        self.conn_ = conn
        self.cluster = ClusterMetadata()
        self.cluster.topics = {"a": TopicInfo("a", topic_id=T1, leaders={0: 0, 1: 0, 2: 0}),
                               "b": TopicInfo("b", topic_id=T2, leaders={0: 0})}
        self.refreshes = 0
        self.closed_purposes: list[tuple[int, str]] = []

    async def find_coordinator(self, key: str, key_type: int, deadline_ms: int) -> int:
        return 7

    async def conn(self, node: int, *, purpose: str = "") -> FakeConn:
        return self.conn_

    def close_node_purpose(self, node: int, purpose: str) -> None:
        self.closed_purposes.append((node, purpose))

    async def refresh_metadata(self, topics: list[str] | None = None) -> None:
        self.refreshes += 1


def make_member(script: dict[int, list[Any]] | None = None, *, versions: dict[int, int] | None = None,
                topics: list[str] | None = None, pattern: str | None = None, events: list | None = None,
                **cfg: Any) -> tuple[ConsumerMember, FakeConn, list]:
    config = make_config(CONSUMER_DEFAULTS, {"group.id": "g", "group.protocol": "consumer",
                                             "enable.auto.commit": False, **cfg})
    conn = FakeConn(script or {}, versions if versions is not None else {ApiKey.CONSUMER_GROUP_HEARTBEAT: 1, ApiKey.OFFSET_FETCH: 9,
                                               ApiKey.OFFSET_COMMIT: 9})
    subs = SubscriptionState("earliest")
    if pattern is not None:
        subs.subscribe_pattern(pattern)
    else:
        subs.subscribe(topics or ["a"])
    calls: list = [] if events is None else events

    async def listener(method: str, parts: list[TopicPartition]) -> None:
        calls.append((method, list(parts)))

    member = ConsumerMember(FakeClient(conn), subs, config, listener)  # type: ignore[arg-type]
    return member, conn, calls


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def tps(topic: str, *ps: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in ps]


# -- heartbeat fields ------------------------------------------------------------------------


def test_join_heartbeat_sends_every_field_then_only_what_changed() -> None:
    m, _conn, _ = make_member(**{"group.instance.id": "i1", "client.rack": "r1",
                                 "group.remote.assignor": "range", "max.poll.interval.ms": 12345})
    m.state = MemberState.JOINING
    first = m.build_heartbeat(1)
    assert first.member_epoch == 0 and first.member_id == m.member_id and len(m.member_id) == 22
    assert (first.instance_id, first.rack_id, first.server_assignor) == ("i1", "r1", "range")
    assert first.rebalance_timeout_ms == 12345
    assert first.subscribed_topic_names == ["a"] and first.subscribed_topic_regex is None
    assert first.topic_partitions == []  # joining: nothing owned
    m.on_heartbeat_success(hb_response(3, {}), True)
    assert m.state is MemberState.STABLE and m.member_epoch == 3
    later = m.build_heartbeat(1)
    assert later.member_epoch == 3 and later.instance_id == "i1"  # instance id always
    assert later.rebalance_timeout_ms == -1 and later.subscribed_topic_names is None
    assert later.server_assignor is None and later.topic_partitions is None and later.rack_id is None
    m.subs.subscribe(["a", "b"])
    assert m.build_heartbeat(1).subscribed_topic_names == ["a", "b"]
    # a failed heartbeat forgets what was sent: the next one carries everything again
    m.on_heartbeat_error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None)
    again = m.build_heartbeat(1)
    assert again.subscribed_topic_names == ["a", "b"] and again.rebalance_timeout_ms == 12345


def test_pattern_goes_to_the_broker_as_regex_on_v1_and_as_matched_names_on_v0() -> None:
    m, _, _ = make_member(pattern="orders-.*")
    m.state = MemberState.JOINING
    req = m.build_heartbeat(1)
    assert req.subscribed_topic_regex == "orders-.*" and req.subscribed_topic_names is None
    m.subs.match_pattern(["orders-1", "x"])
    m.sent.reset()
    req0 = m.build_heartbeat(0)
    assert req0.subscribed_topic_names == ["orders-1"]


def test_member_id_from_the_response_is_kept() -> None:
    m, _, _ = make_member()
    m.state = MemberState.JOINING
    m.on_heartbeat_success(hb_response(1, {}, member_id="server-id"), True)
    assert m.member_id == "server-id" and m.group_generation == (1, "server-id")


# -- reconciliation --------------------------------------------------------------------------


def test_reconcile_commits_then_revokes_then_assigns_then_acknowledges() -> None:
    events: list = []
    commit_resp = SPECS[ApiKey.OFFSET_COMMIT].response

    def commit(req: Any) -> Any:
        events.append(("commit", req.generation_id_or_member_epoch, req.member_id,
                       sorted((t.name, p.partition_index, p.committed_offset) for t in req.topics for p in t.partitions)))
        return commit_resp(topics=[commit_resp.OffsetCommitResponseTopic(name=t.name, partitions=[
            commit_resp.OffsetCommitResponsePartition(partition_index=p.partition_index) for p in t.partitions])
            for t in req.topics])

    m, _conn, _ = make_member({ApiKey.OFFSET_COMMIT: [commit]}, events=events, **{"enable.auto.commit": True})
    m.state = MemberState.JOINING
    m.on_heartbeat_success(hb_response(1, {T1: [0, 1]}), True)
    assert m.state is MemberState.RECONCILING
    run(m.reconcile())
    assert events == [("on_partitions_assigned", tps("a", 0, 1))]
    assert m.state is MemberState.ACKNOWLEDGING and m.subs.assigned() == tps("a", 0, 1)
    ack = m.build_heartbeat(1)
    assert [(t.topic_id, t.partitions) for t in ack.topic_partitions] == [(T1, [0, 1])]
    m.on_heartbeat_success(hb_response(1), True)
    assert m.state is MemberState.STABLE
    m.subs.seek(TopicPartition("a", 0), 10)
    m.subs.seek(TopicPartition("a", 1), 20)
    events.clear()
    # epoch 2: a-0 moves away, a-2 and b-0 come
    m.on_heartbeat_success(hb_response(2, {T1: [1, 2], T2: [0]}), False)
    run(m.reconcile())
    assert events == [
        ("commit", 2, m.member_id, [("a", 0, 10), ("a", 1, 20)]),
        ("on_partitions_revoked", tps("a", 0)),
        ("on_partitions_assigned", [TopicPartition("a", 2), TopicPartition("b", 0)]),
    ]
    assert sorted(m.subs.assigned()) == [TopicPartition("a", 1), TopicPartition("a", 2), TopicPartition("b", 0)]
    assert m.subs.state(TopicPartition("a", 1)).position == 20  # a kept partition keeps its position
    ack = m.build_heartbeat(1)
    assert sorted((t.topic_id.int, t.partitions) for t in ack.topic_partitions) == [(1, [1, 2]), (2, [0])]


def test_unknown_topic_id_refreshes_metadata_and_waits() -> None:
    m, _, calls = make_member()
    m.state = MemberState.JOINING
    unknown = uuid.UUID(int=99)
    m.on_heartbeat_success(hb_response(1, {unknown: [0]}), True)
    run(m.reconcile())
    assert m.client.refreshes == 1 and calls == [] and m.state is MemberState.RECONCILING
    m.client.cluster.topics["late"] = TopicInfo("late", topic_id=unknown, leaders={0: 0})
    m._last_metadata_ms = 0
    run(m.reconcile())
    assert calls == [("on_partitions_assigned", tps("late", 0))] and m.state is MemberState.ACKNOWLEDGING


def test_a_newer_assignment_during_acknowledging_reconciles_again() -> None:
    m, _, calls = make_member()
    m.state = MemberState.JOINING
    m.on_heartbeat_success(hb_response(1, {T1: [0]}), True)
    run(m.reconcile())
    m.on_heartbeat_success(hb_response(2, {T1: [0, 1]}), False)  # the answer to an earlier heartbeat
    assert m.state is MemberState.RECONCILING
    run(m.reconcile())
    assert calls[-1] == ("on_partitions_assigned", tps("a", 1))


# -- fencing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_fenced_member_loses_its_partitions_then_rejoins_with_epoch_0(code: int) -> None:
    m, _, calls = make_member()
    m.state = MemberState.JOINING
    m.on_heartbeat_success(hb_response(4, {T1: [0, 2]}), True)
    run(m.reconcile())
    m.on_heartbeat_success(hb_response(4), True)
    member_id = m.member_id
    m.on_heartbeat_error(code, "fenced")
    assert m.state is MemberState.FENCED and m.member_epoch == 0 and m.group_generation == (-1, "")

    async def go() -> None:
        await m.poll(0)
        await m.close(leave=False)

    run(go())
    assert calls[-1] == ("on_partitions_lost", tps("a", 0, 2))
    assert m.subs.assigned() == [] and m.current == {}
    m.state = MemberState.JOINING  # close() ended it; the state poll left is checked through a new one
    rejoin = m.build_heartbeat(1)
    assert rejoin.member_epoch == 0 and rejoin.member_id == member_id and rejoin.topic_partitions == []
    assert rejoin.subscribed_topic_names == ["a"] and rejoin.rebalance_timeout_ms > 0


def test_fencing_during_reconciliation_stops_it() -> None:
    m, _, calls = make_member()
    m.state = MemberState.JOINING
    m.on_heartbeat_success(hb_response(1, {T1: [0]}), True)

    async def listener(method: str, parts: list[TopicPartition]) -> None:
        calls.append((method, parts))
        m.transition_to_fenced()  # the heartbeat answered FENCED_MEMBER_EPOCH while the callback ran

    m.invoke_listener = listener
    run(m.reconcile())
    assert m.state is MemberState.FENCED and m.current == {}  # not acknowledged


# -- leaving ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("instance", "epoch"), [(None, -1), ("static-1", -2)])
def test_close_revokes_then_leaves_with_the_right_epoch(instance: str | None, epoch: int) -> None:
    events: list = []

    def leave(req: Any) -> Any:
        events.append(("leave", req.member_epoch, req.instance_id, req.member_id))
        return hb_response(req.member_epoch)

    m, conn, _ = make_member({ApiKey.CONSUMER_GROUP_HEARTBEAT: [leave]}, events=events,
                             **{"group.instance.id": instance})
    m.state = MemberState.JOINING
    m.heartbeats_sent = 1
    m.on_heartbeat_success(hb_response(5, {T1: [1]}), True)
    run(m.reconcile())
    m.on_heartbeat_success(hb_response(5), True)
    run(m.close())
    assert events[-2:] == [("on_partitions_revoked", tps("a", 1)), ("leave", epoch, instance, m.member_id)]
    assert m.subs.assigned() == [] and m.state is MemberState.UNSUBSCRIBED


def test_close_of_a_member_that_never_joined_sends_nothing() -> None:
    m, conn, _ = make_member()
    run(m.close())
    assert conn.sent == []


# -- errors ----------------------------------------------------------------------------------


def test_unsupported_version_is_a_clear_error() -> None:
    m, _, _ = make_member(versions={})
    m.state = MemberState.JOINING
    run(m.heartbeat_once())
    assert m.state is MemberState.FATAL
    with pytest.raises(KafkaError, match="does not support group.protocol=consumer"):
        run(m.poll(0))


@pytest.mark.parametrize("code", [ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.UNSUPPORTED_ASSIGNOR,
                                  ErrorCode.INVALID_REGULAR_EXPRESSION, ErrorCode.UNSUPPORTED_VERSION])
def test_fatal_heartbeat_errors_reach_the_application(code: int) -> None:
    m, _, _ = make_member({ApiKey.CONSUMER_GROUP_HEARTBEAT: [hb_response(0, error=code)]})
    m.state = MemberState.JOINING
    run(m.heartbeat_once())
    assert m.state is MemberState.FATAL
    with pytest.raises(KafkaError) as info:
        run(m.poll(0))
    assert info.value.code == code


def test_coordinator_errors_rediscover_and_load_in_progress_backs_off() -> None:
    m, _, _ = make_member({ApiKey.CONSUMER_GROUP_HEARTBEAT: [
        hb_response(0, error=ErrorCode.NOT_COORDINATOR),
        hb_response(0, error=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
        hb_response(1, {})]})
    m.state = MemberState.JOINING
    run(m.heartbeat_once())
    assert m.coordinator_id is None and m.client.closed_purposes == [(7, "group")]
    assert m.state is MemberState.JOINING and m.failures == 1
    run(m.heartbeat_once())
    assert m.state is MemberState.JOINING and m.fatal is None and m.failures == 2
    run(m.heartbeat_once())
    assert m.state is MemberState.STABLE and m.member_epoch == 1 and m.failures == 0


def test_unreleased_instance_id_fails_as_in_java_4() -> None:
    m, _, _ = make_member({ApiKey.CONSUMER_GROUP_HEARTBEAT: [
        hb_response(0, error=ErrorCode.UNRELEASED_INSTANCE_ID)]}, **{"group.instance.id": "s"})
    m.state = MemberState.JOINING
    run(m.heartbeat_once())
    with pytest.raises(KafkaError, match="UNRELEASED_INSTANCE_ID"):
        run(m.poll(0))


# -- offsets and configuration ---------------------------------------------------------------


def test_offset_commit_carries_the_member_epoch_and_stale_epoch_is_retried() -> None:
    cr = SPECS[ApiKey.OFFSET_COMMIT].response
    seen: list = []

    def answer(code: int) -> Callable[[Any], Any]:
        def f(req: Any) -> Any:
            seen.append((req.generation_id_or_member_epoch, req.member_id))
            return cr(topics=[cr.OffsetCommitResponseTopic(name="a", partitions=[
                cr.OffsetCommitResponsePartition(partition_index=0, error_code=code)])])
        return f

    m, _, _ = make_member({ApiKey.OFFSET_COMMIT: [answer(ErrorCode.STALE_MEMBER_EPOCH), answer(0)]},
                          **{"retry.backoff.ms": 1})
    m.state = MemberState.JOINING
    m.on_heartbeat_success(hb_response(6, {}, member_id="mid"), True)
    run(m.commit({TopicPartition("a", 0): OffsetAndMetadata(5)}))
    assert seen == [(6, "mid"), (6, "mid")]


def test_offset_fetch_v9_names_the_member_and_v7_keeps_the_old_shape() -> None:
    me = MemberIdentity(3, "mid", None)
    v9 = build_offset_fetch(9, "g", tps("a", 0, 1), me, True)
    g = v9.groups[0]
    assert (g.group_id, g.member_id, g.member_epoch) == ("g", "mid", 3)
    assert [(t.name, t.partition_indexes) for t in g.topics] == [("a", [0, 1])]
    v9.encode(9)
    outsider = build_offset_fetch(9, "g", tps("a", 0), MemberIdentity(-1, "", None), False).groups[0]
    assert (outsider.member_id, outsider.member_epoch) == (None, -1)
    v7 = build_offset_fetch(7, "g", tps("a", 0), me, True)
    assert v7.group_id == "g" and v7.require_stable
    v7.encode(7)


@pytest.mark.parametrize("setting", ["partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"])
def test_classic_only_settings_are_refused_with_the_consumer_protocol(setting: str) -> None:
    value = "range" if setting == "partition.assignment.strategy" else 10000
    with pytest.raises(ValueError, match=f"{re.escape(setting)} cannot be set when group.protocol=consumer"):
        AIOConsumer({"group.id": "g", "group.protocol": "consumer", setting: value})


def test_remote_assignor_is_refused_with_classic_and_bad_protocols_too() -> None:
    with pytest.raises(ValueError, match="group.remote.assignor cannot be set when group.protocol=classic"):
        AIOConsumer(group_id="g", group_remote_assignor="uniform")
    with pytest.raises(ValueError, match="invalid group.protocol"):
        AIOConsumer(group_id="g", group_protocol="share")
    c = AIOConsumer(group_id="g", group_protocol="CONSUMER", group_remote_assignor="uniform")
    assert c.group_protocol == "consumer"


# -- the heartbeat loop, driven by poll --------------------------------------------------------


def test_poll_drives_join_reconcile_and_an_immediate_acknowledgement() -> None:
    sent: list = []

    def answer(resp: Any) -> Callable[[Any], Any]:
        def f(req: Any) -> Any:
            sent.append((req.member_epoch, None if req.topic_partitions is None else
                         [(t.topic_id.int, t.partitions) for t in req.topic_partitions]))
            return resp
        return f

    m, _, calls = make_member({ApiKey.CONSUMER_GROUP_HEARTBEAT: [
        answer(hb_response(1, {T1: [0, 1]}, interval=60000)),
        answer(hb_response(1, interval=60000)),
        answer(hb_response(-1)),
    ]})

    async def go() -> None:
        await m.poll(0)
        for _ in range(50):
            await asyncio.sleep(0.01)
            await m.poll(0)
            if m.state is MemberState.STABLE:
                break
        await m.close()

    run(go())
    assert calls[0] == ("on_partitions_assigned", tps("a", 0, 1))
    assert sent[:2] == [(0, []), (1, [(1, [0, 1])])]  # join, then the acknowledgement at once
    assert sent[2] == (-1, None)  # close: leave
    assert calls[1] == ("on_partitions_revoked", tps("a", 0, 1))


def test_poll_timeout_leaves_then_the_next_poll_loses_the_partitions_and_rejoins() -> None:
    leaves: list = []

    def leave(req: Any) -> Any:
        leaves.append(req.member_epoch)
        return hb_response(req.member_epoch)

    m, _, calls = make_member({ApiKey.CONSUMER_GROUP_HEARTBEAT: [leave]}, **{"group.instance.id": "s"})
    m.state = MemberState.JOINING
    m.heartbeats_sent = 1
    m.on_heartbeat_success(hb_response(2, {T1: [0]}), True)
    run(m.reconcile())
    m.on_heartbeat_success(hb_response(2), True)
    run(m._leave_for_poll_timeout())
    assert leaves == [-2] and m.state is MemberState.STALE
    with pytest.raises(CommitFailedError):
        run(m.commit({TopicPartition("a", 0): OffsetAndMetadata(1)}))

    run(m._lose_partitions())  # what the next poll does first
    assert calls[-1] == ("on_partitions_lost", tps("a", 0))
    assert m.state is MemberState.JOINING and m.member_epoch == 0


def test_an_assignment_equal_to_what_is_owned_is_acknowledged_once() -> None:
    m, _, calls = make_member()
    m.state = MemberState.JOINING
    m.on_heartbeat_success(hb_response(1, {T1: [0]}), True)
    run(m.reconcile())
    m.build_heartbeat(1)
    m.on_heartbeat_success(hb_response(1), True)
    m.state = MemberState.RECONCILING  # e.g. the same assignment again
    run(m.reconcile())
    assert m.state is MemberState.ACKNOWLEDGING and len(calls) == 1
    ack = m.build_heartbeat(1)
    assert ack.topic_partitions is not None
    m.on_heartbeat_success(hb_response(1), False)  # the answer to a heartbeat sent before the ack
    assert m.state is MemberState.STABLE  # the ack went out already: no heartbeat storm
