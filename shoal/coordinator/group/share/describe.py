"""ShareGroupDescribe (API 77) and the heartbeat's assignment, as Kafka 4.4 builds them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.coordinator.group.consumer.member import Partitions
from shoal.coordinator.group.consumer.topics import TopicsView
from shoal.coordinator.group.modern import described_assignment, with_operations
from shoal.coordinator.group.records import topic_partitions
from shoal.coordinator.group.share.group import ShareGroup
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.share_group_describe_response import ShareGroupDescribeResponse
from shoal.protocol.generated.share_group_heartbeat_response import ShareGroupHeartbeatResponse

if TYPE_CHECKING:
    from shoal.coordinator.group.types import Group

D = ShareGroupDescribeResponse


def heartbeat_assignment(partitions: Partitions) -> ShareGroupHeartbeatResponse.Assignment:
    """Kafka's ShareGroupHeartbeatResponse.createAssignment."""
    cls = ShareGroupHeartbeatResponse
    return cls.Assignment(topic_partitions=topic_partitions(cls.TopicPartitions, partitions))


def describe_group(group_id: str, group: Group | None, assignor_name: str, topics: TopicsView,
                   include_authorized_operations: bool) -> D.DescribedGroup:
    """One DescribedGroup: GROUP_ID_NOT_FOUND for no group ("Group X not found.", Kafka's
    group(id)) and for a group of another type ("Group X is not a share group.")."""
    if not isinstance(group, ShareGroup) or group.state_name == "Dead":
        message = f"Group {group_id} is not a share group." if group is not None and not isinstance(
            group, ShareGroup) else f"Group {group_id} not found."
        return D.DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message)
    members = [D.Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                        client_id=m.client_id, client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        assignment=described_assignment(D, m.assigned, topics))
               for m in group.members.values()]
    return with_operations(D.DescribedGroup(
        group_id=group_id, group_state=group.state_name, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch, assignor_name=assignor_name, members=members),
        include_authorized_operations)
