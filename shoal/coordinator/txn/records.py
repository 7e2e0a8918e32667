"""`__transaction_state` records in Kafka's formats (TransactionLogKey / TransactionLogValue).

Key   = int16 version 0 + TransactionLogKey{TransactionalId}
Value = int16 version + TransactionLogValue, or None (tombstone: the id expired)

shoal writes value version 0, as Kafka does for clients on transaction
version 1, except after a producer id rotation: then version 1, whose tagged
PreviousProducerId lets a retried InitProducerId be recognised after a reload.
The partition set is null in the Empty state, as Kafka writes it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from shoal.coordinator.txn.state import TxnState
from shoal.protocol.generated.transaction_log_key import TransactionLogKey
from shoal.protocol.generated.transaction_log_value import TransactionLogValue

KEY_VERSION = 0
VALUE_VERSION = 0
_H = struct.Struct(">h")

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class TxnLogValue:
    """The persisted part of a transaction's metadata."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[TopicPartition] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1


def txn_key(transactional_id: str) -> bytes:
    return _H.pack(KEY_VERSION) + TransactionLogKey(transactional_id=transactional_id).encode(KEY_VERSION)


def txn_value(v: TxnLogValue) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(v.partitions):
        by_topic.setdefault(topic, []).append(partition)
    partitions = None if v.state == TxnState.EMPTY else [
        TransactionLogValue.PartitionsSchema(topic=t, partition_ids=ps) for t, ps in by_topic.items()]
    value = TransactionLogValue(
        producer_id=v.producer_id, producer_epoch=v.producer_epoch, transaction_timeout_ms=v.timeout_ms,
        transaction_status=int(v.state), transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=v.last_update_ms, transaction_start_timestamp_ms=v.start_ms,
        previous_producer_id=v.previous_producer_id, next_producer_id=v.next_producer_id)
    version = 1 if v.previous_producer_id != -1 or v.next_producer_id != -1 else VALUE_VERSION
    return _H.pack(version) + value.encode(version)


def decode_txn_key(key: bytes | memoryview) -> str:
    version = _H.unpack_from(key, 0)[0]
    if version != KEY_VERSION:
        raise ValueError(f"unknown transaction log key version {version}")
    return TransactionLogKey.decode(memoryview(key)[2:], version).transactional_id


def decode_txn_value(value: bytes | memoryview) -> TxnLogValue:
    version = _H.unpack_from(value, 0)[0]
    if version not in (0, 1):
        raise ValueError(f"unknown transaction log value version {version}")
    v = TransactionLogValue.decode(memoryview(value)[2:], version)
    partitions = {(p.topic, pid) for p in (v.transaction_partitions or []) for pid in p.partition_ids}
    return TxnLogValue(
        producer_id=v.producer_id, producer_epoch=v.producer_epoch, timeout_ms=v.transaction_timeout_ms,
        state=TxnState(v.transaction_status), partitions=partitions,
        last_update_ms=v.transaction_last_update_timestamp_ms, start_ms=v.transaction_start_timestamp_ms,
        previous_producer_id=v.previous_producer_id if version >= 1 else -1,
        next_producer_id=v.next_producer_id if version >= 1 else -1)
