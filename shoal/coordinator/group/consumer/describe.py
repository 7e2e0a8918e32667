"""ConsumerGroupDescribe (API 69) and the heartbeat's assignment, as Kafka builds them."""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from shoal.coordinator.group.consumer.group import ConsumerGroup
from shoal.coordinator.group.consumer.member import ConsumerMember, Partitions
from shoal.coordinator.group.consumer.topics import TopicsView
from shoal.protocol.acl_operations import GROUP_OPERATIONS
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from shoal.protocol.generated.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse

if TYPE_CHECKING:
    from shoal.coordinator.group.types import Group

D = ConsumerGroupDescribeResponse


def _sorted(partitions: Partitions) -> list[tuple[UUID, list[int]]]:
    return [(t, sorted(ps)) for t, ps in sorted(partitions.items(), key=lambda kv: str(kv[0])) if ps]


def heartbeat_assignment(member: ConsumerMember) -> ConsumerGroupHeartbeatResponse.Assignment:
    """The member's assigned partitions (not those it still has to revoke)."""
    cls = ConsumerGroupHeartbeatResponse
    return cls.Assignment(topic_partitions=[cls.TopicPartitions(topic_id=t, partitions=ps)
                                            for t, ps in _sorted(member.assigned)])


def _assignment(partitions: Partitions, topics: TopicsView) -> D.Assignment:
    out = []
    for topic_id, ps in _sorted(partitions):
        meta = topics.by_id(topic_id)
        if meta is not None:  # a deleted topic is left out (Kafka: not in the metadata image)
            out.append(D.TopicPartitions(topic_id=topic_id, topic_name=meta.name, partitions=ps))
    return D.Assignment(topic_partitions=out)


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
                        assignment=_assignment(m.assigned, topics),
                        target_assignment=_assignment(group.target.get(m.member_id, {}), topics))
               for m in group.members.values()]
    described = D.DescribedGroup(group_id=group_id, group_state=group.state_name, group_epoch=group.group_epoch,
                                 assignment_epoch=group.assignment_epoch,
                                 assignor_name=group.preferred_assignor() or default_assignor, members=members)
    if include_authorized_operations:
        described.authorized_operations = GROUP_OPERATIONS  # every operation, as Kafka without an authorizer
    return described
