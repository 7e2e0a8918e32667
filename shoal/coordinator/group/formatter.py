"""Print `__consumer_offsets` records as Kafka's console formatters do.

OffsetsMessageFormatter:        [group,topic,3]::[OffsetMetadata[2130,NO_METADATA],CommitTime 1538843128354,ExpirationTime 1539447928354]
GroupMetadataMessageFormatter:  group::GroupMetadata(groupId=group, generation=1, protocolType=Some(consumer), currentState=Stable, members=Map(...))
Tombstones print as `NULL` (Kafka's formatters write "NULL" for a null value).

Consumer group records (KIP-848, key versions 3-8) and share group records (KIP-932, key versions
10-15) print as Kafka 4's coordinator record formatter
prints every record: one JSON object, `{"key":{"type":3,"data":{"groupId":"g"}},"value":{"version":0,
"data":{"epoch":4}}}`, field names in Kafka's JSON spelling, uuids as Kafka writes them (URL-safe
base64), a tombstone's value `null`.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from shoal.coordinator.group.consumer import records as consumer_records
from shoal.coordinator.group.records import (
    decode_group_metadata_key,
    decode_group_metadata_value,
    decode_offset_commit_key,
    decode_offset_commit_value,
    key_version,
)
from shoal.coordinator.group.share import records as share_records


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


def _camel(name: str) -> str:
    head, *rest = name.rstrip("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _json(obj: Any) -> Any:
    if isinstance(obj, uuid.UUID):
        return base64.urlsafe_b64encode(obj.bytes).decode().rstrip("=")
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(obj)).decode()
    if isinstance(obj, list):
        return [_json(x) for x in obj]
    fields = getattr(obj, "_FIELDS", None)
    if fields is None:
        return obj
    out = {}
    for name in fields:
        value = getattr(obj, name)
        if name == "classic_member_metadata" and (value is None or not value.supported_protocols):
            continue  # a tagged field, written only when set (members of the classic protocol)
        out[_camel(name)] = _json(value)
    return out


def format_consumer_group_record(key: bytes, value: bytes | None) -> str | None:
    """One JSON line for a consumer group record (key versions 3-8) or a share group record (10-15),
    None for any other record."""
    version = key_version(key)
    if version in consumer_records.KEY_VERSIONS:
        records: Any = consumer_records
    elif version in share_records.KEY_VERSIONS:
        records = share_records
    else:
        return None
    key_cls, _, _ = records.TYPES.types[version]
    k = key_cls.decode(memoryview(key)[2:], version)
    line: dict[str, Any] = {"key": {"type": version, "data": _json(k)}, "value": None}
    if value is not None:
        line["value"] = {"version": key_version(value), "data": _json(records.decode_value(version, value))}
    return json.dumps(line, separators=(",", ":"))


def format_record(key: bytes, value: bytes | None) -> str | None:
    """The formatters' line for the record (None for records none of them prints)."""
    return (format_offset_record(key, value) or format_group_metadata_record(key, value)
            or format_consumer_group_record(key, value))
