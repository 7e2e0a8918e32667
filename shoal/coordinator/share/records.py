"""`__share_group_state` records in Kafka 4.4's formats (the share coordinator's CoordinatorRecordType).

Key   = int16 record type + ShareSnapshotKey / ShareUpdateKey (data version 0):
        SHARE_SNAPSHOT = 0, SHARE_UPDATE = 1
Value = int16 version 0 + ShareSnapshotValue / ShareUpdateValue, or None (a tombstone)
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

from shoal.coordinator.share.state import ShareState, StateBatch
from shoal.protocol.generated.share_snapshot_key import ShareSnapshotKey
from shoal.protocol.generated.share_snapshot_value import ShareSnapshotValue
from shoal.protocol.generated.share_update_key import ShareUpdateKey
from shoal.protocol.generated.share_update_value import ShareUpdateValue

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1
_H = struct.Struct(">h")


class ShareKey(NamedTuple):
    """A share-partition: the unit of state (Kafka's SharePartitionKey)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


class ShareUpdate(NamedTuple):
    """A ShareUpdateValue: new batches merged into the state (start offset -1: unchanged)."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: list[StateBatch]


def snapshot_key(key: ShareKey) -> bytes:
    return _H.pack(SHARE_SNAPSHOT) + ShareSnapshotKey(
        group_id=key.group_id, topic_id=key.topic_id, partition=key.partition).encode(0)


def update_key(key: ShareKey) -> bytes:
    return _H.pack(SHARE_UPDATE) + ShareUpdateKey(
        group_id=key.group_id, topic_id=key.topic_id, partition=key.partition).encode(0)


def snapshot_value(state: ShareState) -> bytes:
    value = ShareSnapshotValue(
        snapshot_epoch=state.snapshot_epoch, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
        start_offset=state.start_offset, delivery_complete_count=state.delivery_complete_count,
        create_timestamp=state.create_timestamp, write_timestamp=state.write_timestamp,
        state_batches=[ShareSnapshotValue.StateBatch(
            first_offset=b.first_offset, last_offset=b.last_offset, delivery_state=b.delivery_state,
            delivery_count=b.delivery_count) for b in state.state_batches])
    return _H.pack(0) + value.encode(0)


def update_value(update: ShareUpdate) -> bytes:
    value = ShareUpdateValue(
        snapshot_epoch=update.snapshot_epoch, leader_epoch=update.leader_epoch, start_offset=update.start_offset,
        delivery_complete_count=update.delivery_complete_count,
        state_batches=[ShareUpdateValue.StateBatch(
            first_offset=b.first_offset, last_offset=b.last_offset, delivery_state=b.delivery_state,
            delivery_count=b.delivery_count) for b in update.state_batches])
    return _H.pack(0) + value.encode(0)


def decode_key(key: bytes | memoryview) -> tuple[int, ShareKey]:
    """(record type, share-partition); ValueError for a record type the share coordinator does not know."""
    record_type = _H.unpack_from(key, 0)[0]
    body = memoryview(key)[2:]
    k: ShareSnapshotKey | ShareUpdateKey
    if record_type == SHARE_SNAPSHOT:
        k = ShareSnapshotKey.decode(body, 0)
    elif record_type == SHARE_UPDATE:
        k = ShareUpdateKey.decode(body, 0)
    else:
        raise ValueError(f"unknown share coordinator record type {record_type}")
    return record_type, ShareKey(k.group_id, k.topic_id, k.partition)


def _version(value: bytes | memoryview) -> memoryview:
    version = _H.unpack_from(value, 0)[0]
    if version != 0:
        raise ValueError(f"unknown share coordinator value version {version}")
    return memoryview(value)[2:]


def decode_snapshot(value: bytes | memoryview) -> ShareState:
    v = ShareSnapshotValue.decode(_version(value), 0)
    return ShareState(
        state_epoch=v.state_epoch, leader_epoch=v.leader_epoch, start_offset=v.start_offset,
        state_batches=[StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                       for b in v.state_batches],
        delivery_complete_count=v.delivery_complete_count, snapshot_epoch=v.snapshot_epoch,
        create_timestamp=v.create_timestamp, write_timestamp=v.write_timestamp)


def decode_update(value: bytes | memoryview) -> ShareUpdate:
    v = ShareUpdateValue.decode(_version(value), 0)
    return ShareUpdate(v.snapshot_epoch, v.leader_epoch, v.start_offset, v.delivery_complete_count,
                       [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                        for b in v.state_batches])
