"""Consumer groups seen by offsets and the admin APIs: OffsetCommit/Fetch/Delete with member epochs,
DeleteGroups, ListGroups, DescribeGroups and ConsumerGroupDescribe."""

from __future__ import annotations

from shoal.coordinator.group.consumer import records as R
from shoal.coordinator.group.records import key_version
from shoal.protocol.acl_operations import GROUP_OPERATIONS
from shoal.protocol.errors import ErrorCode as E
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.delete_groups_request import DeleteGroupsRequest
from shoal.protocol.generated.describe_groups_request import DescribeGroupsRequest
from shoal.protocol.generated.list_groups_request import ListGroupsRequest
from shoal.protocol.generated.offset_delete_request import OffsetDeleteRequest
from shoal.protocol.generated.offset_fetch_request import OffsetFetchRequest
from tests.unit.consumer_group_harness import TOPIC_IDS, CGHarness, Consumer, converge


def _group() -> tuple[CGHarness, Consumer]:
    h = CGHarness(topics={"t": 6, "u": 1})
    a = Consumer(h, "a")
    a.join()
    return h, a


def _errors(h: CGHarness, t: int) -> set[int]:
    return set(h.commit_errors(t).values())


def test_offset_commit_checks_the_member_epoch() -> None:
    h, a = _group()
    assert _errors(h, h.commit({("t", 0): 10}, generation=2, member_id="a", version=9)) == {0}
    assert _errors(h, h.commit({("t", 0): 11}, generation=0, member_id="a", version=9)) == {E.STALE_MEMBER_EPOCH}
    assert _errors(h, h.commit({("t", 0): 11}, generation=2, member_id="x", version=9)) == {E.UNKNOWN_MEMBER_ID}
    assert _errors(h, h.commit({("t", 0): 11}, generation=-1, version=9)) == {E.UNKNOWN_MEMBER_ID}
    assert _errors(h, h.commit({("t", 0): 11}, generation=2, member_id="a", version=8)) == {E.UNSUPPORTED_VERSION}
    assert h.fetch({"t": [0]})[("t", 0)][0] == 10


def test_admin_commit_to_an_empty_consumer_group() -> None:
    h, a = _group()
    a.leave()
    assert h.cgroup().state_name == "Empty"
    assert _errors(h, h.commit({("t", 0): 3}, version=9)) == {0}


def _fetch_v9(h: CGHarness, member_id: str | None, epoch: int) -> int:
    req = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id="g", member_id=member_id, member_epoch=epoch, topics=None)])
    return h.resp(h.send(ApiKey.OFFSET_FETCH, 9, req)).groups[0].error_code


def test_offset_fetch_v9_checks_member_and_epoch() -> None:
    h, a = _group()
    assert _fetch_v9(h, None, -1) == 0
    assert _fetch_v9(h, "a", 2) == 0
    assert _fetch_v9(h, "a", 7) == E.STALE_MEMBER_EPOCH
    assert _fetch_v9(h, "x", 2) == E.UNKNOWN_MEMBER_ID


def _offset_delete(h: CGHarness, topics: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    req = OffsetDeleteRequest(group_id="g", topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name=t, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
        for t, ps in topics.items()])
    r = h.resp(h.send(ApiKey.OFFSET_DELETE, 0, req))
    assert r.error_code == 0
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def test_offset_delete_refuses_subscribed_topics() -> None:
    h, a = _group()
    h.commit({("t", 0): 1, ("u", 0): 2}, generation=2, member_id="a", version=9)
    assert _offset_delete(h, {"t": [0], "u": [0]}) == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0}


def _delete_group(h: CGHarness, gid: str = "g") -> int:
    return h.resp(h.send(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[gid]))).results[0].error_code


def test_delete_groups() -> None:
    h, a = _group()
    h.commit({("t", 0): 1}, generation=2, member_id="a", version=9)
    assert _delete_group(h) == E.NON_EMPTY_GROUP
    a.leave()
    n = len(h.records)
    assert _delete_group(h) == 0
    assert "g" not in h.shard.groups
    versions = [(key_version(k), v) for k, v in h.records[n:]]
    assert versions[-3:] == [(R.TARGET_ASSIGNMENT_METADATA, None), (R.PARTITION_METADATA, None),
                             (R.GROUP_METADATA, None)]
    assert (1, None) in versions  # its offsets too
    assert _delete_group(h) == E.GROUP_ID_NOT_FOUND


def test_list_groups_by_type_and_state() -> None:
    h, a = _group()
    h.commit({("t", 0): 1}, gid="simple")

    def listed(version: int, **kw: list[str]) -> list[tuple[str, str, str, str]]:
        r = h.resp(h.send(ApiKey.LIST_GROUPS, version, ListGroupsRequest(**kw)))
        return sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in r.groups)

    assert listed(5, types_filter=["consumer"]) == [("g", "consumer", "Stable", "consumer")]
    assert listed(5, types_filter=["Classic"]) == [("simple", "", "Empty", "classic")]
    assert listed(5, states_filter=["stable"]) == [("g", "consumer", "Stable", "consumer")]
    a.leave()
    assert listed(5, states_filter=["empty"], types_filter=["consumer"]) == [("g", "consumer", "Empty", "consumer")]


def test_describe_groups_does_not_describe_consumer_groups() -> None:
    h, a = _group()
    g = h.resp(h.send(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["g"]))).groups[0]
    assert (g.error_code, g.group_state, g.members) == (0, "Dead", [])


def test_consumer_group_describe() -> None:
    h = CGHarness()
    a, b = Consumer(h, "a", instance="ia"), Consumer(h, "b")
    a.join()
    b.join()
    r = h.describe_cg("g", "nope", "", ops=True)
    g, nope, empty = r.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
        0, "Reconciling", 3, 3, "uniform")
    assert g.authorized_operations == GROUP_OPERATIONS
    ma, mb = sorted(g.members, key=lambda m: m.member_id)
    assert (ma.member_id, ma.instance_id, ma.member_epoch, ma.client_id, ma.subscribed_topic_names) == (
        "a", "ia", 2, "c", ["t"])
    tp = ma.assignment.topic_partitions[0]
    assert (tp.topic_id, tp.topic_name, tp.partitions) == (TOPIC_IDS["t"], "t", [0, 1, 2, 3, 4, 5])
    assert ma.target_assignment.topic_partitions[0].partitions == [0, 2, 4]
    assert mb.assignment.topic_partitions == [] and mb.target_assignment.topic_partitions[0].partitions == [1, 3, 5]
    assert nope.error_code == E.GROUP_ID_NOT_FOUND and empty.error_code == E.INVALID_GROUP_ID
    converge([a, b])
    g = h.describe_cg("g").groups[0]
    assert g.group_state == "Stable" and g.authorized_operations == -2147483648


def test_consumer_group_describe_of_a_classic_group() -> None:
    h = CGHarness()
    h.commit({("t", 0): 1})
    g = h.describe_cg("g").groups[0]
    assert g.error_code == E.GROUP_ID_NOT_FOUND
