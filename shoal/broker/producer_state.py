"""Per-partition idempotent-producer state: the last sequence of each producer.

A retried batch (same producer id, epoch and sequences as one already
appended) is answered with the offset it got the first time instead of
being appended again; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER. State lives in
memory for now; producer-state snapshots (Kafka's `.snapshot` files) and
rebuilding it from the log on start come with the transactions work, so after
a restart the first batch of a producer is accepted at any sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.protocol.errors import ErrorCode
from shoal.protocol.record_batch import BatchHeader

# Kafka keeps the last five batches per producer to answer retries of any in-flight batch.
_REMEMBERED_BATCHES = 5


@dataclass
class _Entry:
    epoch: int
    # (first sequence, last sequence, base offset) of recent batches, oldest first
    batches: list[tuple[int, int, int]]


class ProducerStateTable:
    def __init__(self) -> None:
        self._producers: dict[int, _Entry] = {}

    def check(self, h: BatchHeader) -> tuple[ErrorCode, int | None]:
        """(NONE, None): append; (NONE, offset): duplicate of a batch at offset; else an error."""
        entry = self._producers.get(h.producer_id)
        if entry is None:
            return ErrorCode.NONE, None
        if h.producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, None
        if h.producer_epoch > entry.epoch:
            # A new epoch restarts sequences at 0.
            return (ErrorCode.NONE, None) if h.base_sequence == 0 else \
                (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
        last = h.base_sequence + h.last_offset_delta
        for first_seq, last_seq, base_offset in entry.batches:
            if first_seq == h.base_sequence and last_seq == last:
                return ErrorCode.NONE, base_offset
        expected = (entry.batches[-1][1] + 1) & 0x7FFFFFFF
        if h.base_sequence != expected:
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None
        return ErrorCode.NONE, None

    def update(self, h: BatchHeader, base_offset: int) -> None:
        entry = self._producers.get(h.producer_id)
        if entry is None or h.producer_epoch != entry.epoch:
            entry = self._producers[h.producer_id] = _Entry(h.producer_epoch, [])
        entry.batches.append((h.base_sequence, h.base_sequence + h.last_offset_delta, base_offset))
        del entry.batches[:-_REMEMBERED_BATCHES]
