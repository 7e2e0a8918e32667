"""The consumer group type (KIP-848): the new consumer rebalance protocol, served beside the classic one.

`heartbeat.ConsumerGroupManager` is the shard plug-in (ConsumerGroupHeartbeat, ConsumerGroupDescribe,
the records of key versions 3-8); `group.ConsumerGroup` is the group (a `types.Group`);
`reconciliation` moves a member towards its target assignment (Kafka's CurrentAssignmentBuilder);
`target` computes target assignments with the server-side assignors.
"""

from shoal.coordinator.group.consumer.group import ConsumerGroup, ConsumerGroupState
from shoal.coordinator.group.consumer.member import ConsumerMember, MemberState
from shoal.coordinator.group.consumer.topics import TopicMeta, TopicsView

__all__ = ["ConsumerGroup", "ConsumerGroupState", "ConsumerMember", "MemberState", "TopicMeta", "TopicsView"]
