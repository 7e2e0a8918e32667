"""The differences the group scenarios found, pinned on the sans-IO shard (no broker, no Kafka).

Each test failed before its fix; the scenario diff (test_scenarios_groups.py) is the end-to-end
check against Apache Kafka.
"""

from __future__ import annotations

from shoal.protocol.errors import ErrorCode as E
from shoal.protocol.generated.delete_groups_request import DeleteGroupsRequest
from shoal.protocol.generated.describe_groups_request import DescribeGroupsRequest
from shoal.protocol.generated.leave_group_request import LeaveGroupRequest
from shoal.protocol.generated.offset_delete_request import OffsetDeleteRequest
from tests.unit.test_group_harness import Harness


def test_leave_of_an_unknown_group_names_each_member() -> None:
    """Kafka 4 (GroupCoordinatorService.leaveGroup): no top-level error, UNKNOWN_MEMBER_ID per member;
    before v3, where there is no member list, the member's error is the top-level one."""
    h = Harness()
    req = LeaveGroupRequest(group_id="nope", members=[
        LeaveGroupRequest.MemberIdentity(member_id="m-1"), LeaveGroupRequest.MemberIdentity(
            member_id="", group_instance_id="i-1")])
    r = h.resp(h.send(13, 5, req))
    assert r.error_code == E.NONE
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
        ("m-1", None, E.UNKNOWN_MEMBER_ID), ("", "i-1", E.UNKNOWN_MEMBER_ID)]
    r = h.resp(h.send(13, 2, LeaveGroupRequest(group_id="nope", member_id="m-1")))
    assert (r.error_code, r.members) == (E.UNKNOWN_MEMBER_ID, [])


def test_offset_delete_keeps_an_empty_group() -> None:
    """Kafka 4's OffsetDelete writes offset tombstones only: an Empty group left without offsets
    stays (DescribeGroups says Empty, DeleteGroups deletes it) until the retention pass removes it."""
    h = Harness()
    h.commit({("t", 0): 1}, gid="simple")
    od = OffsetDeleteRequest(group_id="simple", topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name="t", partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])])
    assert h.resp(h.send(47, 0, od)).error_code == E.NONE
    described = h.resp(h.send(15, 5, DescribeGroupsRequest(groups=["simple"]))).groups[0]
    assert described.group_state == "Empty"
    deleted = h.resp(h.send(42, 2, DeleteGroupsRequest(groups_names=["simple"]))).results[0]
    assert deleted.error_code == E.NONE
