"""The consumer group's `__consumer_offsets` records, in Kafka's formats (GroupCoordinatorRecordHelpers).

Key = int16 key version + key struct; value = int16 value version (0) + value struct, None for a
tombstone. Key versions: 3 ConsumerGroupMetadata (group epoch), 4 ConsumerGroupPartitionMetadata
(subscribed topics' metadata), 5 ConsumerGroupMemberMetadata (a member's subscription),
6 ConsumerGroupTargetAssignmentMetadata (assignment epoch), 7 ConsumerGroupTargetAssignmentMember,
8 ConsumerGroupCurrentMemberAssignment, 16 ConsumerGroupRegularExpression (what a regex subscription
resolved to, Kafka 4.1+).
"""

from __future__ import annotations

from typing import Any

from shoal.coordinator.group.consumer.member import ClassicMeta, ConsumerMember, Partitions
from shoal.coordinator.group.consumer.topics import TopicMeta
from shoal.coordinator.group.records import TypedRecords, topic_partitions
from shoal.coordinator.result import Record
from shoal.protocol.generated.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey,
)
from shoal.protocol.generated.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue,
)
from shoal.protocol.generated.consumer_group_member_metadata_key import ConsumerGroupMemberMetadataKey
from shoal.protocol.generated.consumer_group_member_metadata_value import ConsumerGroupMemberMetadataValue
from shoal.protocol.generated.consumer_group_metadata_key import ConsumerGroupMetadataKey
from shoal.protocol.generated.consumer_group_metadata_value import ConsumerGroupMetadataValue
from shoal.protocol.generated.consumer_group_partition_metadata_key import ConsumerGroupPartitionMetadataKey
from shoal.protocol.generated.consumer_group_partition_metadata_value import (
    ConsumerGroupPartitionMetadataValue,
)
from shoal.protocol.generated.consumer_group_regular_expression_key import ConsumerGroupRegularExpressionKey
from shoal.protocol.generated.consumer_group_regular_expression_value import (
    ConsumerGroupRegularExpressionValue,
)
from shoal.protocol.generated.consumer_group_target_assignment_member_key import (
    ConsumerGroupTargetAssignmentMemberKey,
)
from shoal.protocol.generated.consumer_group_target_assignment_member_value import (
    ConsumerGroupTargetAssignmentMemberValue,
)
from shoal.protocol.generated.consumer_group_target_assignment_metadata_key import (
    ConsumerGroupTargetAssignmentMetadataKey,
)
from shoal.protocol.generated.consumer_group_target_assignment_metadata_value import (
    ConsumerGroupTargetAssignmentMetadataValue,
)

_CMM = ConsumerGroupMemberMetadataValue.ClassicMemberMetadata
_CMM_P = ConsumerGroupMemberMetadataValue.ClassicProtocol

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
KEY_VERSIONS = frozenset([*range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1), REGULAR_EXPRESSION])

TYPES = TypedRecords({
    GROUP_METADATA: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue, None),
    PARTITION_METADATA: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue, None),
    MEMBER_METADATA: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue, "member_id"),
    TARGET_ASSIGNMENT_METADATA: (ConsumerGroupTargetAssignmentMetadataKey,
                                 ConsumerGroupTargetAssignmentMetadataValue, None),
    TARGET_ASSIGNMENT_MEMBER: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue,
                               "member_id"),
    CURRENT_MEMBER_ASSIGNMENT: (ConsumerGroupCurrentMemberAssignmentKey,
                                ConsumerGroupCurrentMemberAssignmentValue, "member_id"),
    REGULAR_EXPRESSION: (ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue,
                         "regular_expression"),
})
# (key version, group id, member id or None); for a regex record the regex stands where a member id would.
decode_key = TYPES.decode_key
decode_value = TYPES.decode_value
tombstone = TYPES.tombstone


# ---------------------------------------------------------------- records
def group_epoch_record(group_id: str, epoch: int) -> Record:
    return TYPES.record(GROUP_METADATA, group_id, ConsumerGroupMetadataValue(epoch=epoch))


def group_epoch_tombstone(group_id: str) -> Record:
    return tombstone(GROUP_METADATA, group_id)


def subscription_metadata_record(group_id: str, metadata: dict[str, TopicMeta]) -> Record:
    cls = ConsumerGroupPartitionMetadataValue
    topics = [cls.TopicMetadata(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.num_partitions,
                                partition_metadata=[
                                    cls.PartitionMetadata(partition=p, racks=sorted(racks))
                                    for p, racks in sorted(t.partition_racks.items()) if racks])
              for _, t in sorted(metadata.items())]
    return TYPES.record(PARTITION_METADATA, group_id, cls(topics=topics))


def member_subscription_record(group_id: str, m: ConsumerMember) -> Record:
    value = ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
        classic_member_metadata=None if m.classic is None else _CMM(
            session_timeout_ms=m.classic.session_timeout_ms,
            supported_protocols=[_CMM_P(name=n, metadata=bytes(md)) for n, md in m.classic.protocols]))
    return TYPES.record(MEMBER_METADATA, group_id, value, m.member_id)


def target_assignment_record(group_id: str, member_id: str, partitions: Partitions) -> Record:
    cls = ConsumerGroupTargetAssignmentMemberValue
    value = cls(topic_partitions=topic_partitions(cls.TopicPartition, partitions))
    return TYPES.record(TARGET_ASSIGNMENT_MEMBER, group_id, value, member_id)


def target_epoch_record(group_id: str, epoch: int) -> Record:
    return TYPES.record(TARGET_ASSIGNMENT_METADATA, group_id,
                        ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))


def current_assignment_record(group_id: str, m: ConsumerMember) -> Record:
    cls = ConsumerGroupCurrentMemberAssignmentValue
    value = cls(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
                assigned_partitions=topic_partitions(cls.TopicPartitions, m.assigned),
                partitions_pending_revocation=topic_partitions(cls.TopicPartitions, m.pending_revocation))
    return TYPES.record(CURRENT_MEMBER_ASSIGNMENT, group_id, value, m.member_id)


def regex_record(group_id: str, regex: str, topics: frozenset[str], now_ms: int) -> Record:
    """What ``regex`` resolved to. Kafka's Version is its metadata image's offset, which shoal does not
    have: it resolves at every heartbeat, so 0 here."""
    value = ConsumerGroupRegularExpressionValue(topics=sorted(topics), version=0, timestamp=now_ms)
    return TYPES.record(REGULAR_EXPRESSION, group_id, value, regex)


def regex_tombstone(group_id: str, regex: str) -> Record:
    return tombstone(REGULAR_EXPRESSION, group_id, regex)


def remove_member_records(group_id: str, member_id: str) -> list[Record]:
    """A member's tombstones, in Kafka's order (current assignment, target assignment, subscription)."""
    return [tombstone(t, group_id, member_id)
            for t in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)]


# ---------------------------------------------------------------- decoding
def classic_meta_of(v: Any) -> ClassicMeta | None:
    """The classic metadata of a member record (None, or the codec's empty default: not classic)."""
    c = v.classic_member_metadata
    if c is None or (c.session_timeout_ms == 0 and not c.supported_protocols):
        return None
    return ClassicMeta(c.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in c.supported_protocols))
