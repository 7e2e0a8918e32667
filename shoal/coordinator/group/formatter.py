"""Print `__consumer_offsets` records as Kafka's console formatters do.

OffsetsMessageFormatter:        [group,topic,3]::[OffsetMetadata[2130,NO_METADATA],CommitTime 1538843128354,ExpirationTime 1539447928354]
GroupMetadataMessageFormatter:  group::GroupMetadata(groupId=group, generation=1, protocolType=Some(consumer), currentState=Stable, members=Map(...))
Tombstones print as `NULL` (Kafka's formatters write "NULL" for a null value).
"""

from __future__ import annotations

from shoal.coordinator.group.records import (
    decode_group_metadata_key,
    decode_group_metadata_value,
    decode_offset_commit_key,
    decode_offset_commit_value,
    key_version,
)


def _opt(value: str | None) -> str:
    return "None" if value is None else f"Some({value})"


def format_offset_record(key: bytes, value: bytes | None) -> str | None:
    """One line for an OffsetCommit record, None for any other record."""
    if key_version(key) not in (0, 1):
        return None
    k = decode_offset_commit_key(key)
    head = f"[{k.group},{k.topic},{k.partition}]"
    if value is None:
        return f"{head}::NULL"
    om = decode_offset_commit_value(value)
    metadata = om.metadata if om.metadata else "NO_METADATA"
    expire = -1 if om.expire_timestamp is None else om.expire_timestamp
    return (f"{head}::[OffsetMetadata[{om.offset},{metadata}],"
            f"CommitTime {om.commit_timestamp},ExpirationTime {expire}]")


def format_group_metadata_record(key: bytes, value: bytes | None) -> str | None:
    """One line for a GroupMetadata record, None for any other record."""
    if key_version(key) != 2:
        return None
    group_id = decode_group_metadata_key(key).group
    if value is None:
        return f"{group_id}::NULL"
    _, v = decode_group_metadata_value(value)
    members = ", ".join(
        f"{m.member_id} -> MemberMetadata(memberId={m.member_id}, groupInstanceId={_opt(m.group_instance_id)}, "
        f"clientId={m.client_id}, clientHost={m.client_host}, sessionTimeoutMs={m.session_timeout}, "
        f"rebalanceTimeoutMs={m.rebalance_timeout}, supportedProtocols=List({v.protocol or ''}))"
        for m in v.members
    )
    state = "Stable" if v.members else "Empty"
    return (f"{group_id}::GroupMetadata(groupId={group_id}, generation={v.generation}, "
            f"protocolType={_opt(v.protocol_type or None)}, currentState={state}, members=Map({members}))")


def format_record(key: bytes, value: bytes | None) -> str | None:
    """Either formatter's line for the record (None for records neither prints)."""
    return format_offset_record(key, value) or format_group_metadata_record(key, value)
