"""Share-consumer building blocks (KIP-932): acknowledgement types and batches, the records a
ShareFetch acquired, and one share session per partition leader.

A share session lives on one connection to one leader: ShareFetch with epoch 0 opens it with the
partitions it names, each later request (ShareFetch or ShareAcknowledge) carries the next epoch
(1, 2, ... wrapping to 1) and adds (``topics``) or drops (``forgotten_topics_data``) partitions, and
epoch -1 closes it. The broker ends a session whose connection closes and releases the records
the member held, so the consumer keeps a dedicated connection per leader and starts a fresh
session (epoch 0) whenever that connection changes or the broker no longer knows the session.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections.abc import Iterable
from typing import Any, NamedTuple

from shoal.protocol.errors import ErrorCode
from shoal.protocol.record_batch import iter_batches, iter_records

from .structs import TopicPartition

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
#: An offset inside an acquired range that holds no record (compacted away, a control record).
GAP = 0
#: Top-level errors after which the broker has no session for this member: start a new one.
SESSION_ERRORS = (ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH)

TopicIdPartition = tuple[uuid.UUID, int]


class AcknowledgeType(enum.IntEnum):
    """How a share consumer acknowledges a record (Java's ``AcknowledgeType``, wire values)."""

    #: Processed: never delivered again.
    ACCEPT = 1
    #: Not processed: delivered again (to any member), its delivery count one higher.
    RELEASE = 2
    #: Unprocessable: archived, never delivered again.
    REJECT = 3
    #: Still processing: restart the record's acquisition lock (ShareFetch/ShareAcknowledge v2, KIP-1222).
    RENEW = 4


class ShareConsumerRecord(NamedTuple):
    """One record a share consumer's ``poll`` returned: ``ConsumerRecord``'s fields and the
    number of times the record has been delivered (1 the first time)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    delivery_count: int = 1


def acknowledgement_batches(acks: dict[int, int]) -> list[tuple[int, int, list[int]]]:
    """Offset -> type as the wire's batches: runs of consecutive offsets, each with one type when
    all its offsets share it (the compact form Java sends), else one type per offset."""
    out: list[tuple[int, int, list[int]]] = []
    first = last = -2
    types: list[int] = []
    for off in sorted(acks):
        if off != last + 1 and types:
            out.append((first, last, types))
            types = []
        if not types:
            first = off
        last = off
        types.append(int(acks[off]))
    if types:
        out.append((first, last, types))
    return [(f, la, [ts[0]] if len(set(ts)) == 1 else ts) for f, la, ts in out]


def acquired_records(tp: TopicPartition, data: Any, ranges: Iterable[tuple[int, int, int]]
                     ) -> tuple[list[ShareConsumerRecord], list[int]]:
    """The records of ``data`` (whole log batches) inside the acquired ``ranges`` (first, last,
    delivery count), and the acquired offsets without a record (to acknowledge as GAP)."""
    spans = sorted(ranges)
    if not spans:
        return [], []
    counts: dict[int, int] = {}
    for first, last, count in spans:
        for off in range(first, last + 1):
            counts[off] = count
    records: list[ShareConsumerRecord] = []
    seen: set[int] = set()
    if data is not None and len(data) > 0:
        for h in iter_batches(data):
            if h.is_control:
                continue  # a transaction marker: its offset is a gap to the application
            for r in iter_records(data, h):
                delivered = counts.get(r.offset)
                if delivered is None or r.offset in seen:
                    continue
                seen.add(r.offset)
                records.append(ShareConsumerRecord(tp.topic, tp.partition, r.offset, r.timestamp,
                                                   h.timestamp_type, r.key, r.value, r.headers, delivered))
    records.sort(key=lambda rec: rec.offset)
    gaps = sorted(off for off in counts if off not in seen)
    return records, gaps


class ShareSession:
    """This member's share session with one leader: its epoch, partitions and connection.

    ``lock`` keeps one request of the session in flight at a time: each request must carry the
    epoch after the previous one's, so they are sent (and answered) in turn.
    """

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.epoch = INITIAL_EPOCH
        self.partitions: set[TopicIdPartition] = set()
        self.conn: Any = None  # the connection the session lives on
        self.lock = asyncio.Lock()

    @property
    def open(self) -> bool:
        return self.epoch != INITIAL_EPOCH

    def bind(self, conn: Any) -> None:
        """Use ``conn``; a different connection means the broker dropped the old session."""
        if conn is not self.conn:
            self.conn = conn
            self.reset()

    def reset(self) -> None:
        """Start over with epoch 0 (the broker has no session, or ended it)."""
        self.epoch = INITIAL_EPOCH
        self.partitions = set()

    def changes(self, wanted: set[TopicIdPartition]) -> tuple[list[TopicIdPartition], list[TopicIdPartition]]:
        """(partitions to add, partitions to forget) to make the session fetch ``wanted`` (a session
        at epoch 0 holds no partitions: it adds them all)."""
        return (sorted(wanted - self.partitions, key=_key), sorted(self.partitions - wanted, key=_key))

    def on_response(self, sent_epoch: int, error_code: int, partitions: set[TopicIdPartition]) -> None:
        """A request with ``sent_epoch`` that left the session holding ``partitions`` was answered."""
        if error_code in SESSION_ERRORS or sent_epoch == FINAL_EPOCH:
            self.reset()
        elif error_code == ErrorCode.NONE:
            self.epoch = 1 if sent_epoch >= 0x7FFFFFFF else sent_epoch + 1
            self.partitions = set(partitions)


def _key(tip: TopicIdPartition) -> tuple[str, int]:
    return str(tip[0]), tip[1]
