"""PartitionLog: the append-only log of one topic partition, as a list of segments.

Directory layout (Kafka's file names)::

    <dir>/00000000000000000000.log        batches, as produced (offsets assigned)
    <dir>/00000000000000000000.index      sparse offset index
    <dir>/00000000000000000000.timeindex  sparse time index
    <dir>/log-start-offset                the log start offset (after DeleteRecords)
    <dir>/.clean-shutdown                 present only between close() and the next open

Recovery (in the constructor): leftovers of an interrupted compaction
(``*.cleaned``) are removed; every older segment's indexes are loaded and
rebuilt when missing or inconsistent; the active (last) segment is rescanned
batch by batch with CRC checks unless the clean-shutdown marker is there, and a
torn or corrupt tail is truncated.

Durability: see ``LogConfig`` and docs/durability.md. In short: with
``flush_interval_messages=1`` an append is fsynced before ``append`` returns;
by default appends only reach the OS page cache (survive ``kill -9`` of the
process, not a machine crash).

Producer state (idempotence, fencing, open transactions) lives beside the
segments: a snapshot ``<offset>.snapshot`` is written at every roll and at
clean shutdown; on load the newest snapshot at or below the log end is read
and the batches after it are replayed, which also rebuilds the aborted-
transaction index (``<base>.txnindex``) of the replayed range. The last stable
offset (LSO) follows from the open transactions.

Deleting data (DeleteRecords, retention, compaction scheduling) is in
``retention.py``; lookups by timestamp in ``timestamps.py``.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

from shoal import fileio
from shoal.clock import now_ms as wall_clock_ms
from shoal.protocol import record_batch as rb
from shoal.protocol.record_encode import build_control_batch
from shoal.storage.config import LogConfig
from shoal.storage.errors import OffsetOutOfRangeError, StorageError
from shoal.storage.producer_state import (
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ProducerStateManager,
    list_snapshots,
    snapshot_path,
    write_snapshot,
)
from shoal.storage.retention import LogRetention
from shoal.storage.segment import CLEANED_SUFFIX, LOG_SUFFIX, Segment
from shoal.storage.timestamps import TimestampLookups
from shoal.storage.txn_index import AbortedTxn

CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
LOG_START_OFFSET_FILE = "log-start-offset"

@dataclass(slots=True)
class AppendInfo:
    """What an append wrote: offsets, and the timestamps the produce response reports."""

    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    max_timestamp: int
    num_batches: int
    num_records: int = 0
    duplicate: bool = False  # a producer's retry of a batch already in the log: nothing was written
    completed_txns: tuple[CompletedTxn, ...] = ()  # transactions closed by markers in this append


class PartitionLog(LogRetention, TimestampLookups):
    """Segments of one partition with offsets, indexes, retention and compaction.

    Single-threaded: the broker's event loop owns it. ``high_watermark``
    follows the log end offset after each append while
    ``auto_high_watermark`` is True (single replica); replication can switch
    that off and set ``high_watermark`` itself.
    """

    def __init__(self, dir: Path, config: LogConfig, *, now_ms: int | None = None) -> None:
        self.dir = Path(dir)
        self.config = config
        self.dir.mkdir(parents=True, exist_ok=True)
        now = wall_clock_ms() if now_ms is None else now_ms
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._log_start_offset = 0
        self._unflushed_messages = 0
        self._last_flush_ms = now
        self._cleaned_offset = 0  # the cleaner's checkpoint: segments below it are clean
        self._closed = False
        self._failed: str | None = None  # why the log is offline (a write it cannot vouch for)
        self.auto_high_watermark = True
        self.recovered_bytes_truncated = 0
        self.producer_state = ProducerStateManager()
        self._last_snapshot_offset = -1
        clean = self._load(now)
        self.high_watermark = self.log_end_offset
        self._load_producer_state(now, clean)

    # -- loading -----------------------------------------------------------

    def _load(self, now_ms: int) -> bool:
        """Open the segments (recovering the active one after a crash); True after a clean shutdown."""
        for p in self.dir.iterdir():
            if p.name.endswith(CLEANED_SUFFIX) or p.name.endswith(".tmp"):
                fileio.unlink(p)  # an interrupted compaction or index rewrite: the originals stand
        marker = self.dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        if clean:
            fileio.unlink(marker)
        bases = sorted(
            int(p.name[: -len(LOG_SUFFIX)])
            for p in self.dir.glob("*" + LOG_SUFFIX)
            if len(p.name) == 20 + len(LOG_SUFFIX) and p.name[:20].isdigit()
        )
        checkpoint = self._read_log_start_offset()
        for i, base in enumerate(bases):
            seg = Segment(self.dir, base, self.config, now_ms)
            active = i == len(bases) - 1
            if active and not clean:
                self.recovered_bytes_truncated = seg.rebuild(check_crc=True)
            else:
                seg.load_indexes()
            self._segments.append(seg)
            self._bases.append(base)
        if not self._segments:
            self._new_segment(checkpoint or 0, now_ms)
        self._log_start_offset = max(checkpoint or 0, self._bases[0])
        if self._log_start_offset > self.log_end_offset:
            self._log_start_offset = self.log_end_offset
        return clean

    def _load_producer_state(self, now_ms: int, clean: bool) -> None:
        """Newest usable snapshot, then replay of the log after it (Kafka's rebuildProducerState)."""
        leo = self.log_end_offset
        expiration = self.config.producer_id_expiration_ms
        snapshots = list_snapshots(self.dir)
        for offset in snapshots:
            if offset > leo:  # ahead of a log cut back by recovery: the log wins
                fileio.unlink(snapshot_path(self.dir, offset))
        start = None
        for offset in reversed([o for o in snapshots if o <= leo]):
            try:
                self.producer_state.load_snapshot(snapshot_path(self.dir, offset).read_bytes(), now_ms, expiration)
            except (OSError, ValueError):
                fileio.unlink(snapshot_path(self.dir, offset))
                continue
            start = self._last_snapshot_offset = offset
            break
        if start is None:
            self.producer_state.clear()
            # A log written before producer state was kept (no snapshot at all,
            # closed cleanly) holds no transactions: nothing to rebuild.
            start = leo if clean and not snapshots else self._log_start_offset
        if start >= leo:
            return
        replayed = self._replay_producer_state(start)
        if self._syncs:
            # the snapshot below lets the next recovery skip this replay: the aborted-transaction
            # entries the replay rebuilt must be on disk first (simulator seed 1016)
            for seg in replayed:
                seg.txn_index.fsync()
        self.producer_state.expire(now_ms, expiration)
        self.take_snapshot()

    def _replay_producer_state(self, start: int) -> list[Segment]:
        """Apply every producer batch from ``start`` to the log end, rebuilding the aborted index;
        the segments replayed."""
        state = self.producer_state
        i = max(bisect_right(self._bases, start) - 1, 0)
        for seg in self._segments[i:]:
            seg.txn_index.truncate_from(start)
            pos = seg.offset_index.lookup(start) if seg.base_offset <= start else 0
            for h in seg.iter_headers(pos):
                if h.last_offset < start or h.producer_id < 0:
                    continue
                if h.is_control:
                    try:
                        self._apply_marker(seg, h, os.pread(seg.fd, h.size, h.position))
                    except rb.RecordBatchError:
                        continue  # an emptied control batch (cleaned): nothing to apply
                else:
                    state.apply_batch(h)
        return self._segments[i:]

    def _apply_marker(self, seg: Segment, h: rb.BatchHeader, batch: bytes | memoryview) -> CompletedTxn | None:
        """Apply the control batch ``batch`` (of ``seg``) to the producer state, indexing an abort."""
        marker = rb.control_record(batch, rb.parse_header(batch))
        completed = self.producer_state.apply_marker(h.producer_id, h.producer_epoch, marker.coordinator_epoch,
                                                     marker.control_type, h.base_offset, h.max_timestamp)
        if completed is not None and completed.is_aborted:
            seg.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                                            self.producer_state.stable_offset_after(completed)))
        return completed

    def take_snapshot(self, offset: int | None = None) -> None:
        """Write the producer state as ``<offset>.snapshot`` (default: the log end)."""
        offset = self.log_end_offset if offset is None else offset
        if offset == self._last_snapshot_offset and snapshot_path(self.dir, offset).exists():
            return
        write_snapshot(self.dir, offset, self.producer_state.encode_snapshot(), fsync=self._syncs)
        self._last_snapshot_offset = offset
        # Older snapshots stay while their segment does; below the oldest segment they are useless.
        for old in list_snapshots(self.dir):
            if old < self._bases[0] and old < offset:
                fileio.unlink(snapshot_path(self.dir, old))

    def _read_log_start_offset(self) -> int | None:
        try:
            return int((self.dir / LOG_START_OFFSET_FILE).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _write_log_start_offset(self) -> None:
        fileio.replace_file(self.dir / LOG_START_OFFSET_FILE, f"{self._log_start_offset}\n".encode(),
                            fsync=self._syncs)

    def _new_segment(self, base: int, now_ms: int) -> Segment:
        seg = Segment(self.dir, base, self.config, now_ms)
        self._segments.append(seg)
        self._bases.append(base)
        return seg

    # -- properties --------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def last_stable_offset(self) -> int:
        """Offsets below it are decided (committed, aborted or not transactional); read_committed
        consumers read up to it. A batch boundary, never above the high watermark."""
        first = self.producer_state.first_unstable_offset()
        hw = self.high_watermark
        lso = hw if first is None or first >= hw else first
        return max(lso, self._log_start_offset)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), for a read_committed fetch."""
        out: list[AbortedTxn] = []
        i = max(bisect_right(self._bases, fetch_offset) - 1, 0)
        for seg in self._segments[i:]:
            if seg.txn_index.collect(fetch_offset, upper_bound, out):
                break
        return out

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[Segment]:
        """The segments, oldest first (read-only use)."""
        return list(self._segments)

    @property
    def active_segment(self) -> Segment:
        return self._segments[-1]

    def update_config(self, config: LogConfig) -> None:
        """Apply changed topic configs; they take effect from the next append/roll."""
        self.config = config
        for seg in self._segments:
            seg.config = config

    # -- append ------------------------------------------------------------

    def append(
        self,
        buf: bytearray,
        now_ms: int,
        *,
        assign_offsets: bool = True,
        headers: list[rb.BatchHeader] | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendInfo:
        """Append already-validated batches.

        With ``assign_offsets`` the batches get consecutive offsets from the log
        end offset, written into ``buf`` in place (and, for LogAppendTime, the
        max timestamp + attribute bit, with a new CRC). Without it (replication,
        recovery tools) the batches keep their offsets, which must not go below
        the log end offset. ``headers`` may pass the result of
        ``validate_batches`` to skip re-parsing.

        Batches with a producer id are checked against the producer state as
        ``origin`` demands (raising ``ProducerStateError``); a client's retry
        of a batch already in the log is not written again and comes back
        with ``duplicate`` set and the offsets it got the first time.
        """
        self._check_open()
        if headers is None:
            headers = self._whole_batches(buf)
        if not headers:
            raise ValueError("nothing to append")
        producers, dup = self._check_producers(headers, origin)
        if dup is not None:
            return AppendInfo(base_offset=dup.first_offset, last_offset=dup.last_offset, log_append_time=-1,
                              max_timestamp=dup.timestamp, num_batches=0, duplicate=True)
        log_append = self.config.log_append_time
        if (assign_offsets or log_append) and memoryview(buf).readonly:
            buf = bytearray(buf)  # bytes given: edit a copy
        if assign_offsets:
            self._assign_offsets(buf, headers)
        else:
            self._check_offsets(headers)
        if log_append:
            for h in headers:
                rb.set_log_append_time(buf, h.position, now_ms)
                h.max_timestamp = now_ms
                h.attributes |= rb.TIMESTAMP_TYPE_MASK
        max_ts = max(h.max_timestamp for h in headers)
        first = headers[0].base_offset
        last = headers[-1].last_offset
        seg = self._segments[-1]
        if seg.should_roll(len(buf), max_ts, last, now_ms):
            seg = self._roll(first, now_ms)
        try:
            seg.append(buf, headers)
        except OSError as e:
            self._undo_failed_write(seg, e)
        completed = self._apply_producer_batches(buf, headers, seg) if producers else ()
        records = sum(h.records_count for h in headers)
        self._unflushed_messages += records
        self._flush_if_due(now_ms)  # before the high watermark moves: nobody reads what is not synced
        if self.auto_high_watermark:
            self.high_watermark = self.log_end_offset
        return AppendInfo(
            base_offset=first,
            last_offset=last,
            log_append_time=now_ms if log_append else -1,
            max_timestamp=max_ts,
            num_batches=len(headers),
            num_records=records,
            completed_txns=completed,
        )

    @staticmethod
    def _whole_batches(buf: bytes | bytearray | memoryview) -> list[rb.BatchHeader]:
        """The headers of the batches of ``buf``, which must hold whole batches only."""
        headers = list(rb.iter_batches(buf))
        end = headers[-1].position + headers[-1].size if headers else 0
        if end != len(buf):
            raise rb.CorruptRecordError("append buffer does not hold whole batches only")
        return headers

    def _check_producers(self, headers: list[rb.BatchHeader],
                         origin: AppendOrigin) -> tuple[bool, BatchMetadata | None]:
        """Whether any batch touches the producer state, and the batch already in the log that
        a client's batch repeats (None if none does); raises ProducerStateError."""
        producers = False
        for h in headers:
            if h.producer_id >= 0 and not h.is_control:
                producers = True
                dup = self.producer_state.check_batch(h, origin)
                if dup is not None:
                    return True, dup
            elif h.is_control:
                producers = True
        return producers, None

    def _assign_offsets(self, buf: bytearray, headers: list[rb.BatchHeader]) -> None:
        """Consecutive offsets from the log end, written in place."""
        nxt = self.log_end_offset
        for h in headers:
            rb.set_base_offset(buf, h.position, nxt)
            h.base_offset = nxt
            nxt += h.last_offset_delta + 1

    def _check_offsets(self, headers: list[rb.BatchHeader]) -> None:
        """Batches keeping their offsets must not go below the log end offset."""
        prev = self.log_end_offset
        for h in headers:
            if h.base_offset < prev:
                raise ValueError(f"batch base offset {h.base_offset} is below the next offset {prev}")
            prev = h.next_offset

    def _undo_failed_write(self, seg: Segment, error: OSError) -> None:
        """An append's write failed (ENOSPC, EIO): cut what part of it reached the file, so the
        log is as it was and the producer may retry; if even that fails the log goes offline."""
        try:
            fileio.ftruncate(seg.fd, seg.size)
        except OSError as e:
            self._fail(f"a failed append could not be undone: {e}")
        raise StorageError(f"append to {self.dir.name} failed: {error}") from error

    def _fail(self, why: str) -> None:
        """Take the log offline until the process restarts and recovery checks the files (as Kafka
        takes a log directory offline): after a failed fsync the OS may have dropped the data it
        could not write, so what the files read back is no longer what the disk holds."""
        self._failed = why
        raise StorageError(f"log {self.dir.name} is offline: {why}")

    @property
    def offline(self) -> bool:
        """True after a write or sync the log cannot vouch for (until the broker restarts)."""
        return self._failed is not None

    @property
    def _syncs(self) -> bool:
        """The flush settings ask for fsync: small files (snapshots, the start offset) are synced too."""
        return self.config.flush_interval_messages is not None or self.config.flush_interval_ms is not None

    def _flush_if_due(self, now_ms: int) -> None:
        """flush.messages / flush.ms: flush when either is reached."""
        cfg = self.config
        if (
            cfg.flush_interval_messages is not None
            and self._unflushed_messages >= cfg.flush_interval_messages
        ) or (cfg.flush_interval_ms is not None and now_ms - self._last_flush_ms >= cfg.flush_interval_ms):
            self.flush(now_ms)

    def _apply_producer_batches(self, buf: bytes | bytearray | memoryview, headers: list[rb.BatchHeader],
                                seg: Segment) -> tuple[CompletedTxn, ...]:
        state = self.producer_state
        completed_txns = []
        for h in headers:
            if h.producer_id < 0:
                continue
            if h.is_control:
                completed = self._apply_marker(seg, h, memoryview(buf)[h.position:h.position + h.size])
                if completed is not None:
                    completed_txns.append(completed)
            else:
                state.apply_batch(h)
        return tuple(completed_txns)

    def append_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      now_ms: int) -> tuple[int, CompletedTxn | None]:
        """Write a COMMIT or ABORT marker for a producer; (its offset, the transaction it closed).

        Raises ``ProducerStateError`` for a marker from an older producer epoch
        (INVALID_PRODUCER_EPOCH) or an older coordinator epoch
        (TRANSACTION_COORDINATOR_FENCED). A marker for a producer with no open
        transaction is written (it fences older epochs) but closes nothing.
        """
        self._check_open()
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        batch = bytearray(build_control_batch(
            rb.CONTROL_COMMIT if commit else rb.CONTROL_ABORT, producer_id=producer_id,
            producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch, timestamp=now_ms))
        info = self.append(batch, now_ms, origin=AppendOrigin.REPLAY)
        return info.base_offset, (info.completed_txns[0] if info.completed_txns else None)

    def _roll(self, base_offset: int, now_ms: int) -> Segment:
        old = self._segments[-1]
        old.on_roll()
        # The producer state up to the new segment: recovery replays from here at most.
        self.take_snapshot(base_offset)
        seg = self._new_segment(base_offset, now_ms)
        if self._syncs:
            fileio.fsync_dir(self.dir)
        return seg

    # -- flush -------------------------------------------------------------

    def flush(self, now_ms: int | None = None) -> None:
        """fsync every segment written since the last flush (log data and indexes); a failed fsync
        takes the log offline."""
        for i, seg in enumerate(self._segments):
            try:
                seg.fsync()
            except OSError as e:
                if self._syncs:  # nothing past the last good fsync was promised: cut it (see cut_to_synced)
                    for later in self._segments[i:]:
                        later.cut_to_synced()
                self._fail(f"fsync failed: {e}")
        self._unflushed_messages = 0
        self._last_flush_ms = wall_clock_ms() if now_ms is None else now_ms

    def maybe_flush(self, now_ms: int) -> bool:
        """Time-based flush (flush.ms), called by the log manager's timer. True if it flushed."""
        interval = self.config.flush_interval_ms
        if interval is not None and self._unflushed_messages and now_ms - self._last_flush_ms >= interval:
            self.flush(now_ms)
            return True
        return False

    # -- read --------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, *, min_one: bool = True, max_offset: int | None = None
    ) -> bytes | memoryview:
        """Whole batches from the batch holding ``offset``, at most ``max_bytes``.

        The first batch may start before ``offset`` (clients skip the earlier
        records, as with Kafka). With ``min_one`` the first batch is returned
        even when larger than ``max_bytes``. No batch whose last offset is >=
        ``max_offset`` (exclusive bound: high watermark / last stable offset)
        is returned. Data comes from one segment per call. Raises
        OffsetOutOfRangeError when ``offset`` is below the log start offset or
        above the log end offset; ``offset == log_end_offset`` gives ``b""``.
        """
        return self.read_with_end(offset, max_bytes, min_one=min_one, max_offset=max_offset)[0]

    def read_with_end(
        self, offset: int, max_bytes: int, *, min_one: bool = True, max_offset: int | None = None
    ) -> tuple[bytes | memoryview, int]:
        """As ``read``, with the offset after the last batch returned (-1 when nothing is)."""
        self._check_open()
        leo = self.log_end_offset
        if offset < self._log_start_offset or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range [{self._log_start_offset}, {leo}] for {self.dir.name}"
            )
        if offset == leo or (max_offset is not None and offset >= max_offset):
            return b"", -1
        i = bisect_right(self._bases, offset) - 1
        while i < len(self._segments):
            seg = self._segments[i]
            pos = seg.find_position(offset)
            if pos is not None:
                return seg.read_with_end(pos, max_bytes, min_one=min_one, max_offset=max_offset)
            i += 1
        return b"", -1

    def expire_producers(self, now_ms: int) -> int:
        """Forget producers idle longer than producer.id.expiration.ms (none with an open transaction)."""
        return len(self.producer_state.expire(now_ms, self.config.producer_id_expiration_ms))

    # -- lifecycle ---------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"log {self.dir} is closed")
        if self._failed is not None:
            raise StorageError(f"log {self.dir.name} is offline: {self._failed}")

    def close(self) -> None:
        """fsync everything, close files and leave the clean-shutdown marker."""
        if self._closed:
            return
        if self._failed is not None:  # no snapshot, no marker: the next open recovers from the files
            for seg in self._segments:
                seg.close()
            self._closed = True
            return
        self.take_snapshot()
        try:
            self.flush()
        except StorageError:  # the last fsync failed: closed as an offline log, without the marker
            pass
        for seg in self._segments:
            seg.close()
        if self._failed is None:
            fileio.write_bytes(self.dir / CLEAN_SHUTDOWN_FILE, b"")
        self._closed = True

    def delete(self) -> None:
        """Close and remove the partition directory with everything in it."""
        if not self._closed:
            for seg in self._segments:
                seg.close()
            self._closed = True
        fileio.rmtree(self.dir)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.dir}, start={self._log_start_offset}, end={self.log_end_offset}, "
            f"segments={len(self._segments)})"
        )
