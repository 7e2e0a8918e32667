"""The share group's `__consumer_offsets` records, in Kafka 4.4's formats (GroupCoordinatorRecordHelpers).

Key = int16 key version + key struct; value = int16 value version (0) + value struct, None for a
tombstone. Key versions (Kafka 4.4's CoordinatorRecordType): 10 ShareGroupMemberMetadata,
11 ShareGroupMetadata (group epoch, metadata hash), 12 ShareGroupTargetAssignmentMetadata,
13 ShareGroupTargetAssignmentMember, 14 ShareGroupCurrentMemberAssignment,
15 ShareGroupStatePartitionMetadata. Key version 9 (ShareGroupPartitionMetadata) was dropped
before Kafka 4.0 and is not replayed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from uuid import UUID

from shoal.coordinator.group.consumer.member import Partitions
from shoal.coordinator.group.records import TypedRecords, topic_partitions
from shoal.coordinator.result import Record
from shoal.protocol.generated.share_group_current_member_assignment_key import (
    ShareGroupCurrentMemberAssignmentKey,
)
from shoal.protocol.generated.share_group_current_member_assignment_value import (
    ShareGroupCurrentMemberAssignmentValue,
)
from shoal.protocol.generated.share_group_member_metadata_key import ShareGroupMemberMetadataKey
from shoal.protocol.generated.share_group_member_metadata_value import ShareGroupMemberMetadataValue
from shoal.protocol.generated.share_group_metadata_key import ShareGroupMetadataKey
from shoal.protocol.generated.share_group_metadata_value import ShareGroupMetadataValue
from shoal.protocol.generated.share_group_state_partition_metadata_key import (
    ShareGroupStatePartitionMetadataKey,
)
from shoal.protocol.generated.share_group_state_partition_metadata_value import (
    ShareGroupStatePartitionMetadataValue,
)
from shoal.protocol.generated.share_group_target_assignment_member_key import (
    ShareGroupTargetAssignmentMemberKey,
)
from shoal.protocol.generated.share_group_target_assignment_member_value import (
    ShareGroupTargetAssignmentMemberValue,
)
from shoal.protocol.generated.share_group_target_assignment_metadata_key import (
    ShareGroupTargetAssignmentMetadataKey,
)
from shoal.protocol.generated.share_group_target_assignment_metadata_value import (
    ShareGroupTargetAssignmentMetadataValue,
)

if TYPE_CHECKING:
    from shoal.coordinator.group.share.group import InitializedTopic, ShareMember

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
KEY_VERSIONS = frozenset(range(MEMBER_METADATA, STATE_PARTITION_METADATA + 1))

TYPES = TypedRecords({
    MEMBER_METADATA: (ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue, "member_id"),
    GROUP_METADATA: (ShareGroupMetadataKey, ShareGroupMetadataValue, None),
    TARGET_ASSIGNMENT_METADATA: (ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue,
                                 None),
    TARGET_ASSIGNMENT_MEMBER: (ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue, "member_id"),
    CURRENT_MEMBER_ASSIGNMENT: (ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue, "member_id"),
    STATE_PARTITION_METADATA: (ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue, None),
})
decode_key = TYPES.decode_key  # (key version, group id, member id or None)
decode_value = TYPES.decode_value
tombstone = TYPES.tombstone


# ---------------------------------------------------------------- records
def member_metadata_record(group_id: str, m: ShareMember) -> Record:
    value = ShareGroupMemberMetadataValue(rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                                          subscribed_topic_names=list(m.subscribed_topic_names))
    return TYPES.record(MEMBER_METADATA, group_id, value, m.member_id)


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return TYPES.record(GROUP_METADATA, group_id, ShareGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash))


def target_epoch_record(group_id: str, epoch: int, timestamp_ms: int) -> Record:
    return TYPES.record(TARGET_ASSIGNMENT_METADATA, group_id, ShareGroupTargetAssignmentMetadataValue(
        assignment_epoch=epoch, assignment_timestamp=timestamp_ms))


def target_assignment_record(group_id: str, member_id: str, partitions: Partitions) -> Record:
    cls = ShareGroupTargetAssignmentMemberValue
    value = cls(topic_partitions=topic_partitions(cls.TopicPartition, partitions))
    return TYPES.record(TARGET_ASSIGNMENT_MEMBER, group_id, value, member_id)


def current_assignment_record(group_id: str, m: ShareMember) -> Record:
    cls = ShareGroupCurrentMemberAssignmentValue
    value = cls(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=m.state,
                assigned_partitions=topic_partitions(cls.TopicPartitions, m.assigned))
    return TYPES.record(CURRENT_MEMBER_ASSIGNMENT, group_id, value, m.member_id)


def state_partition_metadata_record(group_id: str, initializing: Mapping[UUID, InitializedTopic],
                                    initialized: Mapping[UUID, InitializedTopic],
                                    deleting: Mapping[UUID, str]) -> Record:
    cls = ShareGroupStatePartitionMetadataValue

    def infos(topics: Mapping[UUID, InitializedTopic]) -> list[Any]:
        return [cls.TopicPartitionsInfo(topic_id=t, topic_name=i.name, partitions=sorted(i.partitions))
                for t, i in sorted(topics.items(), key=lambda kv: str(kv[0]))]

    value = cls(initializing_topics=infos(initializing), initialized_topics=infos(initialized),
                deleting_topics=[cls.TopicInfo(topic_id=t, topic_name=n)
                                 for t, n in sorted(deleting.items(), key=lambda kv: str(kv[0]))])
    return TYPES.record(STATE_PARTITION_METADATA, group_id, value)


def remove_member_records(group_id: str, member_id: str) -> list[Record]:
    """A member's tombstones, in Kafka's order (current assignment, target assignment, metadata)."""
    return [tombstone(t, group_id, member_id)
            for t in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)]
