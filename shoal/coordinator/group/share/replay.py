"""Applying share group records to state (Kafka's GroupMetadataManager.replay for key versions 10-15).

The one path that changes a ShareGroup, live (every emitted record) and on load.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shoal.coordinator.group.consumer.member import LEAVE_GROUP_MEMBER_EPOCH, partitions_of
from shoal.coordinator.group.modern import persisted_group
from shoal.coordinator.group.share import records as R
from shoal.coordinator.group.share.group import InitializedTopic, ShareGroup, ShareMember
from shoal.coordinator.group.types import Group, GroupType


def _empty_classic(group: Group) -> bool:
    return group.type == GroupType.CLASSIC and group.is_empty()


def replay_record(groups: dict[str, Group], key: bytes, value: bytes | None) -> None:
    version, group_id, member_id = R.decode_key(key)
    v = None if value is None else R.decode_value(version, value)
    group = persisted_group(groups, group_id, v is not None, ShareGroup, _empty_classic)
    if group is None:
        return
    mid = member_id or ""
    if version == R.GROUP_METADATA:
        if v is None:
            group.drop(groups)
        else:
            group.group_epoch = v.epoch
            group.metadata_hash = v.metadata_hash
            group.update_state()
    elif version == R.MEMBER_METADATA:
        _member_metadata(group, mid, v)
    elif version == R.TARGET_ASSIGNMENT_METADATA:
        group.assignment_epoch = -1 if v is None else v.assignment_epoch
        group.assignment_timestamp = 0 if v is None else v.assignment_timestamp
    elif version == R.TARGET_ASSIGNMENT_MEMBER:
        group.replay_target(mid, v)
    elif version == R.CURRENT_MEMBER_ASSIGNMENT:
        _current_assignment(group, mid, v)
    elif version == R.STATE_PARTITION_METADATA:
        _state_partition_metadata(group, v)


def _member_metadata(group: ShareGroup, member_id: str, v: Any) -> None:
    if v is None:
        group.remove_member(member_id)
        return
    old = group.members.get(member_id) or ShareMember(member_id)
    group.update_member(replace(old, rack_id=v.rack_id, client_id=v.client_id, client_host=v.client_host,
                                subscribed_topic_names=tuple(sorted(set(v.subscribed_topic_names)))))


def _current_assignment(group: ShareGroup, member_id: str, v: Any) -> None:
    old = group.members.get(member_id)
    if v is None:
        if old is not None:
            group.update_member(replace(old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                        previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned={}))
        return
    group.update_member(replace(old or ShareMember(member_id), member_epoch=v.member_epoch,
                                previous_member_epoch=v.previous_member_epoch, state=v.state,
                                assigned=partitions_of(v.assigned_partitions)))


def _state_partition_metadata(group: ShareGroup, v: Any) -> None:
    if v is None:
        group.initializing, group.initialized, group.deleting = {}, {}, {}
        return

    def topics(infos: list[Any]) -> dict[Any, InitializedTopic]:
        return {i.topic_id: InitializedTopic(i.topic_name, frozenset(i.partitions)) for i in infos}

    group.initializing = topics(v.initializing_topics)
    group.initialized = topics(v.initialized_topics)
    group.deleting = {i.topic_id: i.topic_name for i in v.deleting_topics}
