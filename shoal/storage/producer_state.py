"""Producer state of one partition: idempotence, fencing and open transactions.

Per producer id the partition remembers its epoch, its last five batches
(so a retried batch is answered with the offset it got the first time), the
coordinator epoch of the last transaction marker, and the first offset of its
open transaction. The open transactions give the partition's first unstable
offset, from which the last stable offset (LSO) follows.

Rules (Kafka's ProducerStateManager / ProducerAppendInfo):

- a batch from an older epoch than the producer's is INVALID_PRODUCER_EPOCH;
- client batches are checked for sequence: a new epoch starts at 0 (unless
  the producer is unknown or has no epoch yet), the same epoch continues at
  last + 1 (wrapping at 2^31-1 to 0); else OUT_OF_ORDER_SEQUENCE_NUMBER.
  Sequences are *not* reset by a marker of the same epoch;
- a batch identical (epoch, first and last sequence) to one of the last five
  is a duplicate: the log does not append it again;
- a non-transactional batch from a producer with an open transaction is
  INVALID_TXN_STATE;
- a marker older than the producer's epoch is INVALID_PRODUCER_EPOCH, one
  from an older coordinator epoch is TRANSACTION_COORDINATOR_FENCED; a marker
  with a newer epoch moves the producer to it and clears its batches (the
  next batch must start at sequence 0).

The log is the source of truth: snapshots (``<offset>.snapshot``, Kafka's
format: version, CRC32C, then one entry per producer holding only its last
batch) are a cache from which the log is replayed on load.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from google_crc32c import value as crc32c

from shoal import fileio
from shoal.protocol.errors import CodedError, ErrorCode
from shoal.protocol.record_batch import CONTROL_ABORT, BatchHeader

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NO_EPOCH = -1
NO_SEQUENCE = -1
REMEMBERED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
_INT32_MAX = 0x7FFFFFFF

_SNAP_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")


class AppendOrigin(Enum):
    """Who writes a batch decides how much is checked (Kafka's AppendOrigin)."""

    CLIENT = "client"  # a producer: epoch, sequence, duplicates, transaction state
    COORDINATOR = "coordinator"  # a coordinator's own transactional writes: epoch only
    REPLAY = "replay"  # recovery and replication: nothing is checked


class ProducerStateError(CodedError):
    """A batch or marker the producer state refuses; ``error_code`` is Kafka's."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, error_code: ErrorCode | None = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class InvalidProducerEpochError(ProducerStateError):
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class OutOfOrderSequenceError(ProducerStateError):
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidTxnStateError(ProducerStateError):
    error_code = ErrorCode.INVALID_TXN_STATE


class CoordinatorFencedError(ProducerStateError):
    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


def add_sequence(seq: int, delta: int) -> int:
    """Sequence numbers wrap from 2^31-1 to 0."""
    return (seq + delta) & _INT32_MAX if seq + delta > _INT32_MAX else seq + delta


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=REMEMBERED_BATCHES))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int = -1  # -1: no open transaction

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_epoch != self.epoch:
            return None
        last = add_sequence(h.base_sequence, h.last_offset_delta)
        for b in self.batches:
            if b.first_seq == h.base_sequence and b.last_seq == last:
                return b
        return None

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction closed by a marker: its first offset and the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerStateManager:
    """Producers of one partition and their open transactions."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._first_unstable: int | None = None

    # ---------------------------------------------------------------- queries
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction (None: every offset is decided)."""
        return self._first_unstable

    def _recompute_first_unstable(self) -> None:
        self._first_unstable = min(self.ongoing.values()) if self.ongoing else None

    def stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is closed (stored in its aborted-index entry)."""
        others = [first for pid, first in self.ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    # ---------------------------------------------------------------- data batches
    def check_batch(self, h: BatchHeader, origin: AppendOrigin) -> BatchMetadata | None:
        """Validate a data batch before it is appended; return the earlier copy if a duplicate.

        Raises ProducerStateError. Does not change state.
        """
        entry = self.producers.get(h.producer_id)
        if entry is None or origin is AppendOrigin.REPLAY:
            return None
        if origin is AppendOrigin.CLIENT:
            dup = entry.find_duplicate(h)
            if dup is not None:
                return dup
        if h.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"epoch {h.producer_epoch} of producer {h.producer_id} is older than its current epoch {entry.epoch}")
        if origin is AppendOrigin.CLIENT:
            if h.producer_epoch != entry.epoch:
                if h.base_sequence != 0 and entry.epoch != NO_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"producer {h.producer_id}: new epoch {h.producer_epoch} must start at sequence 0, "
                        f"not {h.base_sequence}")
            else:
                last = entry.last_seq
                if not (h.base_sequence == last + 1 or (h.base_sequence == 0 and last == _INT32_MAX)):
                    raise OutOfOrderSequenceError(
                        f"producer {h.producer_id}: sequence {h.base_sequence} does not follow {last}")
        if not h.is_transactional and entry.current_txn_first_offset >= 0:
            raise InvalidTxnStateError(
                f"expected a transactional write from producer {h.producer_id}, "
                f"which has a transaction open since offset {entry.current_txn_first_offset}")
        return None

    def apply_batch(self, h: BatchHeader) -> None:
        """Record an appended data batch (``h.base_offset`` already assigned)."""
        pid = h.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid)
        entry.set_epoch(h.producer_epoch)
        last_offset = h.base_offset + h.last_offset_delta
        entry.batches.append(BatchMetadata(h.base_sequence, add_sequence(h.base_sequence, h.last_offset_delta),
                                           last_offset, h.last_offset_delta, h.max_timestamp))
        entry.last_timestamp = h.max_timestamp
        if h.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = h.base_offset
            self.ongoing[pid] = h.base_offset
            if self._first_unstable is None or h.base_offset < self._first_unstable:
                self._first_unstable = h.base_offset

    # ---------------------------------------------------------------- markers
    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Validate a COMMIT/ABORT marker before it is appended; raises ProducerStateError."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return  # a marker for an unknown producer creates its entry (it fences older epochs)
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker epoch {producer_epoch} of producer {producer_id} is older than its epoch {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise CoordinatorFencedError(
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}")

    def apply_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, control_type: int,
                     offset: int, timestamp: int) -> CompletedTxn | None:
        """Record an appended marker at ``offset``; the transaction it closes, if one was open."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(producer_id, entry.current_txn_first_offset, offset,
                                     control_type == CONTROL_ABORT)
        entry.set_epoch(producer_epoch)
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        if self.ongoing.pop(producer_id, None) is not None:
            self._recompute_first_unstable()
        return completed

    # ---------------------------------------------------------------- expiry
    def expire(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle for ``expiration_ms`` (producer.id.expiration.ms), never one with an open
        transaction. Returns the ids removed."""
        gone = [pid for pid, e in self.producers.items()
                if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return gone

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self._first_unstable = None

    # ---------------------------------------------------------------- snapshots
    def encode_snapshot(self) -> bytes:
        body = bytearray()
        for e in self.producers.values():
            last = e.batches[-1] if e.batches else None
            body += _SNAP_ENTRY.pack(
                e.producer_id, e.epoch,
                last.last_seq if last else NO_SEQUENCE,
                last.last_offset if last else -1,
                last.offset_delta if last else 0,
                last.timestamp if last else e.last_timestamp,
                e.coordinator_epoch, e.current_txn_first_offset)
        count = struct.pack(">i", len(self.producers))
        crc = crc32c(count + bytes(body))
        return _SNAP_HEADER.pack(SNAPSHOT_VERSION, crc, len(self.producers)) + bytes(body)

    def load_snapshot(self, data: bytes, now_ms: int | None = None, expiration_ms: int | None = None) -> None:
        """Replace the state with a snapshot's; raises ValueError when it is corrupt.

        Producers that expired while the broker was down are skipped (never
        one with an open transaction).
        """
        if len(data) < _SNAP_HEADER.size:
            raise ValueError("snapshot is shorter than its header")
        version, crc, count = _SNAP_HEADER.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"unknown snapshot version {version}")
        if crc32c(data[6:]) != crc:
            raise ValueError("snapshot CRC mismatch")
        if count < 0 or len(data) != _SNAP_HEADER.size + count * _SNAP_ENTRY.size:
            raise ValueError("snapshot length does not match its entry count")
        self.clear()
        for (pid, epoch, last_seq, last_offset, offset_delta, ts, coord_epoch,
             txn_first) in _SNAP_ENTRY.iter_unpack(data[_SNAP_HEADER.size:]):
            if (txn_first < 0 and now_ms is not None and expiration_ms is not None
                    and now_ms - ts >= expiration_ms):
                continue
            entry = ProducerEntry(pid, epoch, coordinator_epoch=coord_epoch, last_timestamp=ts,
                                  current_txn_first_offset=txn_first)
            if last_offset >= 0:
                first_seq = last_seq - offset_delta if last_seq >= offset_delta else \
                    _INT32_MAX + 1 + last_seq - offset_delta
                entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset, offset_delta, ts))
            self.producers[pid] = entry
            if txn_first >= 0:
                self.ongoing[pid] = txn_first
        self._recompute_first_unstable()


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(directory: Path) -> list[int]:
    """Offsets of the snapshot files in ``directory``, ascending."""
    out = []
    for p in directory.glob("*" + SNAPSHOT_SUFFIX):
        stem = p.name[: -len(SNAPSHOT_SUFFIX)]
        if len(stem) == 20 and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def write_snapshot(directory: Path, offset: int, data: bytes, *, fsync: bool) -> None:
    """Write ``<offset>.snapshot`` atomically (tmp + rename)."""
    fileio.replace_file(snapshot_path(directory, offset), data, fsync=fsync)
