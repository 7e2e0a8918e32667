"""ConsumerGroupDescribe (API 69) and the heartbeat's assignment, as Kafka builds them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.coordinator.group.consumer.group import ConsumerGroup
from shoal.coordinator.group.consumer.member import ConsumerMember
from shoal.coordinator.group.consumer.topics import TopicsView
from shoal.coordinator.group.modern import described_assignment, with_operations
from shoal.coordinator.group.records import topic_partitions
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from shoal.protocol.generated.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse

if TYPE_CHECKING:
    from shoal.coordinator.group.types import Group

D = ConsumerGroupDescribeResponse


def heartbeat_assignment(member: ConsumerMember) -> ConsumerGroupHeartbeatResponse.Assignment:
    """The member's assigned partitions (not those it still has to revoke)."""
    cls = ConsumerGroupHeartbeatResponse
    return cls.Assignment(topic_partitions=topic_partitions(cls.TopicPartitions, member.assigned))


def describe_group(group_id: str, group: Group | None, default_assignor: str, topics: TopicsView,
                   include_authorized_operations: bool) -> D.DescribedGroup:
    """One DescribedGroup: GROUP_ID_NOT_FOUND for no group, or a group of another type."""
    if not group_id:
        return D.DescribedGroup(group_id=group_id, error_code=ErrorCode.INVALID_GROUP_ID)
    if not isinstance(group, ConsumerGroup) or group.state_name == "Dead":
        return D.DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                error_message=f"Group {group_id} not found." if group is None
                                else f"Group {group_id} is not a consumer group.")
    members = [D.Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                        member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=described_assignment(D, m.assigned, topics),
                        target_assignment=described_assignment(D, group.target.get(m.member_id, {}), topics))
               for m in group.members.values()]
    return with_operations(D.DescribedGroup(
        group_id=group_id, group_state=group.state_name, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch, assignor_name=group.preferred_assignor() or default_assignor,
        members=members), include_authorized_operations)
