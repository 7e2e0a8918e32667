"""Applying consumer group records to state (Kafka's GroupMetadataManager.replay for key versions 3-8
and 16).

The one path that changes a ConsumerGroup, live (every emitted record) and on load.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shoal.coordinator.group.consumer import records as R
from shoal.coordinator.group.consumer.group import ConsumerGroup
from shoal.coordinator.group.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ConsumerMember,
    MemberState,
    partitions_of,
)
from shoal.coordinator.group.consumer.topics import TopicMeta
from shoal.coordinator.group.modern import persisted_group
from shoal.coordinator.group.types import Group, GroupType


def _is_simple_classic(group: Group) -> bool:
    """A classic group with no record behind it (created to hold standalone commits): replaceable."""
    return group.type == GroupType.CLASSIC and group.is_empty() and not getattr(group, "protocol_type", None)


def replay_record(groups: dict[str, Group], key: bytes, value: bytes | None) -> None:
    version, group_id, member_id = R.decode_key(key)
    v = None if value is None else R.decode_value(version, value)
    group = persisted_group(groups, group_id, v is not None, ConsumerGroup, _is_simple_classic)
    if group is None:
        return
    mid = member_id or ""  # for a regex record, the regex
    if version == R.GROUP_METADATA:
        if v is None:
            group.drop(groups)
        else:
            group.group_epoch = v.epoch
            group.update_state()
    elif version == R.PARTITION_METADATA:
        group.subscription_metadata = {} if v is None else {
            t.topic_name: TopicMeta(topic_id=t.topic_id, name=t.topic_name, num_partitions=t.num_partitions,
                                    partition_racks={p.partition: frozenset(p.racks) for p in t.partition_metadata})
            for t in v.topics}
    elif version == R.MEMBER_METADATA:
        _member_metadata(group, mid, v)
    elif version == R.TARGET_ASSIGNMENT_METADATA:
        group.assignment_epoch = -1 if v is None else v.assignment_epoch
        group.update_state()
    elif version == R.TARGET_ASSIGNMENT_MEMBER:
        group.replay_target(mid, v)
    elif version == R.CURRENT_MEMBER_ASSIGNMENT:
        _current_assignment(group, mid, v)
    elif version == R.REGULAR_EXPRESSION:
        if v is None:
            group.resolved_regexes.pop(mid, None)
        else:
            group.resolved_regexes[mid] = frozenset(v.topics)


def _member_metadata(group: ConsumerGroup, member_id: str, v: Any) -> None:
    if v is None:
        group.remove_member(member_id)
        return
    old = group.members.get(member_id) or ConsumerMember(member_id)
    group.update_member(replace(
        old, instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id, client_host=v.client_host,
        subscribed_topic_names=tuple(sorted(set(v.subscribed_topic_names))),
        subscribed_topic_regex=v.subscribed_topic_regex, rebalance_timeout_ms=v.rebalance_timeout_ms,
        server_assignor=v.server_assignor, classic=R.classic_meta_of(v)))


def _current_assignment(group: ConsumerGroup, member_id: str, v: Any) -> None:
    old = group.members.get(member_id)
    if v is None:
        if old is not None:
            group.update_member(replace(old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                        previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned={},
                                        pending_revocation={}))
        return
    group.update_member(replace(
        old or ConsumerMember(member_id), member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
        state=MemberState.from_value(v.state), assigned=partitions_of(v.assigned_partitions),
        pending_revocation=partitions_of(v.partitions_pending_revocation)))
