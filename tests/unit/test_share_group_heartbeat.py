"""Share groups (KIP-932) on GroupCoordinatorShard: ShareGroupHeartbeat v1, ShareGroupDescribe v1, the
session timer, records and replay, and what the other group APIs answer for a share group."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

from shoal.coordinator.group.formatter import format_record
from shoal.coordinator.group.shard import GroupCoordinatorShard
from shoal.coordinator.group.share import records as R
from shoal.coordinator.group.share.group import ShareGroup
from shoal.protocol.errors import ErrorCode as E
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.delete_groups_request import DeleteGroupsRequest
from shoal.protocol.generated.describe_groups_request import DescribeGroupsRequest
from shoal.protocol.generated.list_groups_request import ListGroupsRequest
from shoal.protocol.generated.offset_delete_request import OffsetDeleteRequest
from shoal.protocol.generated.share_group_describe_request import ShareGroupDescribeRequest
from shoal.protocol.generated.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from tests.unit.consumer_group_harness import TOPIC_IDS, CGHarness

SGHB, SGD = ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE
T = TOPIC_IDS["t"]
M1, M2, M3 = (str(uuid.UUID(int=i)) for i in (101, 102, 103))


class SGHarness(CGHarness):
    def shb(self, member_id: str = M1, epoch: int = 0, *, gid: str = "g",
            topics: list[str] | None = None, rack: str | None = None, client_id: str = "c") -> Any:
        req = ShareGroupHeartbeatRequest(group_id=gid, member_id=member_id, member_epoch=epoch, rack_id=rack,
                                         subscribed_topic_names=topics)
        return self.resp(self.send(SGHB, 1, req, client_id))

    def sjoin(self, member_id: str = M1, topics: list[str] | None = None, **kw: Any) -> Any:
        return self.shb(member_id, 0, topics=topics or ["t"], **kw)

    def describe_sg(self, *gids: str, ops: bool = False) -> Any:
        return self.resp(self.send(SGD, 1, ShareGroupDescribeRequest(group_ids=list(gids),
                                                                       include_authorized_operations=ops)))

    def sgroup(self, gid: str = "g") -> ShareGroup:
        group = self.shard.groups.get(gid)
        assert isinstance(group, ShareGroup), group
        return group


def assigned(resp: Any) -> dict[uuid.UUID, set[int]]:
    assert resp.assignment is not None
    return {tp.topic_id: set(tp.partitions) for tp in resp.assignment.topic_partitions}


# ---------------------------------------------------------------- joining, heartbeats, leaving
def test_join_gets_every_partition_and_group_is_stable() -> None:
    h = SGHarness(topics={"t": 3})
    r = h.sjoin()
    assert r.error_code == 0 and r.member_id == M1
    assert r.member_epoch == 2  # a new group is at epoch 1 (Kafka's ModernGroup); the join bumps it
    assert r.heartbeat_interval_ms == 5000
    assert assigned(r) == {T: {0, 1, 2}}
    g = h.sgroup()
    assert (g.state_name, g.group_epoch, g.assignment_epoch) == ("Stable", 2, 2)
    again = h.shb(M1, 2)
    assert again.error_code == 0 and again.member_epoch == 2 and again.assignment is None


def test_request_validation_messages() -> None:
    h = SGHarness()
    r = h.shb("", 0, topics=["t"])
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "Invalid member id in the request.")
    r = h.shb(M1, 0, topics=None)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    r = h.shb(M1, -2)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "MemberEpoch is invalid.")
    r = h.shb(M1, 0, topics=["t"], rack="")
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "RackId can't be empty.")
    assert h.records == [] and "g" not in h.shard.groups


def test_unknown_member_fencing_and_previous_epoch() -> None:
    h = SGHarness(topics={"t": 2})
    h.sjoin(M1)
    r = h.shb(M2, 2)
    assert (r.error_code, r.error_message) == (E.UNKNOWN_MEMBER_ID, f"Member {M2} is not a member of group g.")
    r = h.shb(M1, 7)
    assert r.error_code == E.FENCED_MEMBER_EPOCH and "greater member epoch (7)" in r.error_message
    h.sjoin(M2)  # epoch 3; M1 is now at epoch 2 with target epoch 3
    r1 = h.shb(M1, 2)
    assert r1.error_code == 0 and r1.member_epoch == 3 and assigned(r1)  # its assignment changed
    assert h.shb(M1, 2).error_code == 0  # its previous epoch is still accepted (a lost response)
    r = h.shb(M1, 1)
    assert r.error_code == E.FENCED_MEMBER_EPOCH and "does not match the previous member epoch (2)" in r.error_message
    assert h.shb("x" * 37, 3).error_message == "Invalid member id in the request."


def test_no_group_and_groups_of_other_types() -> None:
    h = SGHarness()
    r = h.shb(M1, 3)
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Share group g not found.")
    assert h.cg_join("c1", gid="cg").error_code == 0
    r = h.sjoin(M1, gid="cg")
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")
    r = h.shb(M1, -1, gid="cg")
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")
    r = h.shb(M1, -1, gid="nope")
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")


def test_leave_bumps_epoch_and_reassigns() -> None:
    h = SGHarness(topics={"t": 2})
    h.sjoin(M1)
    h.sjoin(M2)
    r = h.shb(M2, -1)
    assert (r.error_code, r.member_id, r.member_epoch) == (0, M2, -1)
    g = h.sgroup()
    assert set(g.members) == {M1} and g.group_epoch == 4
    r = h.shb(M1, 2)  # M1 has not heartbeated since M2 joined: still at epoch 2, owning both partitions
    assert r.member_epoch == 4 and r.assignment is None  # its assignment did not change: none sent
    assert h.sgroup().members[M1].assigned == {T: frozenset({0, 1})}
    assert h.shb(M2, -1).error_code == E.UNKNOWN_MEMBER_ID
    assert h.shb(M1, -1).error_code == 0
    g = h.sgroup()
    assert g.state_name == "Empty" and g.group_epoch == g.assignment_epoch == 5


def test_session_expiry_fences_the_member() -> None:
    h = SGHarness(topics={"t": 2}, group_share_session_timeout_ms=45000)
    h.sjoin(M1)
    h.sjoin(M2)
    h.advance(30000)
    assert h.shb(M1, 2).member_epoch == 3
    h.advance(20000)  # M2 silent for 50s
    g = h.sgroup()
    assert set(g.members) == {M1} and g.group_epoch == 4
    assert h.shb(M2, 3).error_code == E.UNKNOWN_MEMBER_ID
    h.advance(50000)
    assert h.sgroup().state_name == "Empty"


def test_group_session_timeout_override() -> None:
    h = SGHarness(group_overrides={"g": {"share.session.timeout.ms": "50000", "share.heartbeat.interval.ms": "6000"}})
    assert h.sjoin(M1).heartbeat_interval_ms == 6000
    h.advance(46000)
    assert M1 in h.sgroup().members
    h.advance(5000)
    assert M1 not in h.sgroup().members


def test_max_size() -> None:
    h = SGHarness(group_share_max_size=2)
    h.sjoin(M1)
    h.sjoin(M2)
    r = h.sjoin(M3)
    assert (r.error_code, r.error_message) == (
        E.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum capacity of 2 members.")
    assert h.shb(M1, 2).error_code == 0


def test_three_members_share_two_partitions() -> None:
    h = SGHarness(topics={"t": 2})
    for m in (M1, M2, M3):
        h.sjoin(m)
    got = {m: assigned(h.shb(m, 0, topics=["t"]))[T] for m in (M1, M2, M3)}
    assert all(got.values())
    assert Counter(p for ps in got.values() for p in ps) == Counter({0: 2, 1: 2})
    g = h.sgroup()
    assert all(m.member_epoch == g.assignment_epoch == g.group_epoch for m in g.members.values())


def test_topic_growth_bumps_epoch() -> None:
    h = SGHarness(topics={"t": 1})
    h.sjoin(M1)
    h.set_topic("t", 3)
    r = h.shb(M1, 2)
    assert r.member_epoch == 3 and assigned(r) == {T: {0, 1, 2}}
    state = h.sgroup().initialized
    assert state[T].partitions == frozenset({0, 1, 2})


def test_subscription_change_and_unknown_topic() -> None:
    h = SGHarness(topics={"t": 2, "u": 1})
    h.sjoin(M1, ["zzz"])
    assert h.sgroup().members[M1].assigned == {}
    r = h.shb(M1, 2, topics=["t", "u"])
    assert r.member_epoch == 3 and assigned(r) == {T: {0, 1}, TOPIC_IDS["u"]: {0}}


def test_share_group_member_query() -> None:
    h = SGHarness()
    h.sjoin(M1)
    assert h.shard.share_group_member("g", M1)
    assert not h.shard.share_group_member("g", M2)
    assert not h.shard.share_group_member("other", M1)


# ---------------------------------------------------------------- records and replay
def test_records_are_kafkas_and_replay_gives_the_same_group() -> None:
    h = SGHarness(topics={"t": 2})
    h.sjoin(M1, rack="r1")
    h.sjoin(M2)
    h.shb(M1, 2)
    versions = [R.decode_key(k)[0] for k, _ in h.records]
    assert versions[:7] == [R.MEMBER_METADATA, R.GROUP_METADATA, R.TARGET_ASSIGNMENT_MEMBER,
                            R.TARGET_ASSIGNMENT_METADATA, R.CURRENT_MEMBER_ASSIGNMENT, R.STATE_PARTITION_METADATA,
                            R.MEMBER_METADATA]
    fresh = GroupCoordinatorShard(0, h.config, topics=h.topics)
    for key, value in h.records:
        fresh.replay(key, value)
    a, b = h.sgroup(), fresh.groups["g"]
    assert isinstance(b, ShareGroup)
    assert vars(a) == vars(b)
    result = fresh.on_loaded(h.now)
    assert result.records == []
    fresh.poll(h.now + 46000)
    assert fresh.groups["g"].state_name == "Empty"  # the session timers were re-armed on load


def test_formatter_prints_share_records() -> None:
    h = SGHarness()
    h.sjoin(M1)
    lines = [json.loads(format_record(k, v) or "null") for k, v in h.records]
    assert lines[0]["key"] == {"type": 10, "data": {"groupId": "g", "memberId": M1}}
    assert lines[0]["value"]["data"]["subscribedTopicNames"] == ["t"]
    assert lines[1]["key"]["type"] == 11 and lines[1]["value"]["data"]["epoch"] == 2


# ---------------------------------------------------------------- describe, list, delete, other APIs
def test_describe() -> None:
    h = SGHarness(topics={"t": 2})
    h.sjoin(M1, rack="r1", client_id="cli")
    h.cg_join("c1", gid="cg")
    resp = h.describe_sg("g", "cg", "nope", ops=True)
    g, cg, nope = resp.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
        0, "Stable", 2, 2, "simple")
    m = g.members[0]
    assert (m.member_id, m.rack_id, m.member_epoch, m.client_id, m.subscribed_topic_names) == (M1, "r1", 2, "cli", ["t"])
    assert [(tp.topic_id, tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions] == [(T, "t", [0, 1])]
    assert g.authorized_operations != -2147483648
    assert (cg.error_code, cg.error_message) == (E.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")
    assert (nope.error_code, nope.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")


def test_list_groups_reports_share_type() -> None:
    h = SGHarness()
    h.sjoin(M1)
    h.cg_join("c1", gid="cg")
    resp = h.resp(h.send(ApiKey.LIST_GROUPS, 5, ListGroupsRequest(states_filter=[], types_filter=["share"])))
    assert [(g.group_id, g.group_type, g.group_state, g.protocol_type) for g in resp.groups] == [
        ("g", "share", "Stable", "share")]
    resp = h.resp(h.send(ApiKey.LIST_GROUPS, 5, ListGroupsRequest(states_filter=["empty"], types_filter=[])))
    assert resp.groups == []


def test_delete_group_empty_and_non_empty() -> None:
    h = SGHarness()
    h.sjoin(M1)
    resp = h.resp(h.send(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=["g"])))
    assert resp.results[0].error_code == E.NON_EMPTY_GROUP
    h.shb(M1, -1)
    before = len(h.records)
    resp = h.resp(h.send(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=["g"])))
    assert resp.results[0].error_code == 0
    assert "g" not in h.shard.groups
    tombstones = h.records[before:]
    assert all(v is None for _, v in tombstones)
    assert [R.decode_key(k)[0] for k, _ in tombstones] == [
        R.TARGET_ASSIGNMENT_METADATA, R.STATE_PARTITION_METADATA, R.GROUP_METADATA]


def test_other_apis_on_a_share_group() -> None:
    h = SGHarness()
    h.sjoin(M1)
    desc = h.resp(h.send(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["g"])))
    assert (desc.groups[0].error_code, desc.groups[0].group_state) == (0, "Dead")
    assert h.commit_errors(h.commit({("t", 0): 5}, generation=-1)) == {("t", 0): E.GROUP_ID_NOT_FOUND}
    delete = h.resp(h.send(ApiKey.OFFSET_DELETE, 0, OffsetDeleteRequest(group_id="g", topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name="t", partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])])))
    assert delete.error_code == E.GROUP_ID_NOT_FOUND
    assert h.resp(h.heartbeat(M1, 1)).error_code == E.UNKNOWN_MEMBER_ID
    assert h.resp(h.join("")).error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_share_groups_off() -> None:
    h = SGHarness(share_version=0)
    assert h.sjoin(M1).error_code == E.UNSUPPORTED_VERSION
    assert h.describe_sg("g").groups[0].error_code == E.UNSUPPORTED_VERSION
