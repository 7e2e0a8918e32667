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
from shoal.coordinator.group.records import (
    sorted_pairs,
    typed_decode_key,
    typed_decode_value,
    typed_key,
    typed_value,
)
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
VALUE_VERSION = 0

# key version -> (key class, value class, the key's field after the group id, if any)
RECORD_TYPES: dict[int, tuple[Any, Any, str | None]] = {
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
}

def _key(version: int, group_id: str, second: str | None = None) -> bytes:
    return typed_key(RECORD_TYPES, version, group_id, second)


def _value(message: Any) -> bytes:
    return typed_value(message, VALUE_VERSION)


# ---------------------------------------------------------------- records
def group_epoch_record(group_id: str, epoch: int) -> Record:
    return _key(GROUP_METADATA, group_id), _value(ConsumerGroupMetadataValue(epoch=epoch))


def group_epoch_tombstone(group_id: str) -> Record:
    return _key(GROUP_METADATA, group_id), None


def subscription_metadata_record(group_id: str, metadata: dict[str, TopicMeta]) -> Record:
    cls = ConsumerGroupPartitionMetadataValue
    topics = [cls.TopicMetadata(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.num_partitions,
                                partition_metadata=[
                                    cls.PartitionMetadata(partition=p, racks=sorted(racks))
                                    for p, racks in sorted(t.partition_racks.items()) if racks])
              for _, t in sorted(metadata.items())]
    return _key(PARTITION_METADATA, group_id), _value(cls(topics=topics))


def subscription_metadata_tombstone(group_id: str) -> Record:
    return _key(PARTITION_METADATA, group_id), None


def member_subscription_record(group_id: str, m: ConsumerMember) -> Record:
    value = ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
        classic_member_metadata=None if m.classic is None else _CMM(
            session_timeout_ms=m.classic.session_timeout_ms,
            supported_protocols=[_CMM_P(name=n, metadata=bytes(md)) for n, md in m.classic.protocols]))
    return _key(MEMBER_METADATA, group_id, m.member_id), _value(value)


def member_subscription_tombstone(group_id: str, member_id: str) -> Record:
    return _key(MEMBER_METADATA, group_id, member_id), None


def target_assignment_record(group_id: str, member_id: str, partitions: Partitions) -> Record:
    cls = ConsumerGroupTargetAssignmentMemberValue
    value = cls(topic_partitions=[cls.TopicPartition(topic_id=t, partitions=ps)
                                  for t, ps in sorted_pairs(partitions)])
    return _key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), _value(value)


def target_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return _key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None


def target_epoch_record(group_id: str, epoch: int) -> Record:
    return _key(TARGET_ASSIGNMENT_METADATA, group_id), _value(
        ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))


def target_epoch_tombstone(group_id: str) -> Record:
    return _key(TARGET_ASSIGNMENT_METADATA, group_id), None


def current_assignment_record(group_id: str, m: ConsumerMember) -> Record:
    cls = ConsumerGroupCurrentMemberAssignmentValue

    def tps(partitions: Partitions) -> list[Any]:
        return [cls.TopicPartitions(topic_id=t, partitions=ps) for t, ps in sorted_pairs(partitions)]

    value = cls(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
                assigned_partitions=tps(m.assigned), partitions_pending_revocation=tps(m.pending_revocation))
    return _key(CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id), _value(value)


def current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return _key(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None


def regex_record(group_id: str, regex: str, topics: frozenset[str], now_ms: int) -> Record:
    """What ``regex`` resolved to. Kafka's Version is its metadata image's offset, which shoal does not
    have: it resolves at every heartbeat, so 0 here."""
    value = ConsumerGroupRegularExpressionValue(topics=sorted(topics), version=0, timestamp=now_ms)
    return _key(REGULAR_EXPRESSION, group_id, regex), _value(value)


def regex_tombstone(group_id: str, regex: str) -> Record:
    return _key(REGULAR_EXPRESSION, group_id, regex), None


def remove_member_records(group_id: str, member_id: str) -> list[Record]:
    """A member's tombstones, in Kafka's order (current assignment, target assignment, subscription)."""
    return [current_assignment_tombstone(group_id, member_id), target_assignment_tombstone(group_id, member_id),
            member_subscription_tombstone(group_id, member_id)]


# ---------------------------------------------------------------- decoding
def decode_key(key: bytes | memoryview) -> tuple[int, str, str | None]:
    """(key version, group id, member id or None) of a consumer group record key; for a regex record
    the regex stands where a member id would."""
    return typed_decode_key(RECORD_TYPES, key)


def decode_value(key_version: int, value: bytes | memoryview) -> Any:
    return typed_decode_value(RECORD_TYPES, key_version, value)


def classic_meta_of(v: Any) -> ClassicMeta | None:
    """The classic metadata of a member record (None, or the codec's empty default: not classic)."""
    c = v.classic_member_metadata
    if c is None or (c.session_timeout_ms == 0 and not c.supported_protocols):
        return None
    return ClassicMeta(c.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in c.supported_protocols))


def pairs_of(topic_partitions: list[Any]) -> list[tuple[Any, list[int]]]:
    return [(tp.topic_id, list(tp.partitions)) for tp in topic_partitions]
