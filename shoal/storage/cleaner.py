"""Log compaction (cleanup.policy=compact): keep the latest record per key.

Rules, per pass over one PartitionLog:

- The key map holds, per key, the highest offset of a record with that key
  in the whole log, active segment included.
- Cleanable segments: the non-active ones, oldest first, stopping at the first
  whose newest record is younger than ``min.compaction.lag.ms``.
- In a cleanable segment a keyed record survives only if it is the latest for
  its key. A tombstone (null value) that is the latest for its key survives
  until its segment's largest timestamp is more than ``delete.retention.ms``
  old, so consumers that are behind still see the delete.
- Records with a null key are kept (the broker rejects them on produce to a
  compacted topic; anything already there is not ours to drop).
- Offsets never change. A batch that lost records is re-encoded with the
  survivors, keeping its base offset, last offset delta (so its offset range
  and the producer's last sequence are unchanged), producer fields and
  compression; a batch that lost all its records is dropped.
- Transactions: nothing at or beyond the first unstable offset (the oldest
  open transaction) is cleaned or enters the key map, so an undecided record
  never hides an older committed one. Batches of aborted transactions (found
  through the ``.txnindex`` entries) are dropped and never enter the key map;
  records of committed transactions are compacted like any other. An ABORT
  marker stays, with its index entry, so read_committed consumers always see
  where an aborted range ends; a COMMIT marker is dropped once no record of
  its transaction is left and its segment is past ``delete.retention.ms``.
- A rewritten segment is written to ``<base>.log.cleaned`` (+ indexes), fsynced,
  then swapped in by rename; a crash before the swap leaves the old files
  (the ``.cleaned`` leftovers are deleted on load), a crash during the swap
  leaves a complete new log whose missing indexes are rebuilt on load.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from typing import TYPE_CHECKING

from shoal import fileio
from shoal.protocol import record_batch as rb
from shoal.protocol.record_encode import rebuild_batch
from shoal.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    Segment,
    segment_file_name,
)

if TYPE_CHECKING:
    from shoal.storage.log import PartitionLog

_MAX_OFFSET = (1 << 63) - 1


def _marker_type(batch: bytes, h: rb.BatchHeader) -> int | None:
    try:
        return rb.control_type(batch, h)
    except rb.RecordBatchError:
        return None


class _AbortedRanges:
    """Offset ranges of aborted transactions per producer, from the segments' aborted indexes."""

    def __init__(self, log: PartitionLog) -> None:
        self._by_pid: dict[int, list[tuple[int, int]]] = {}
        for seg in log.segments:
            for e in seg.txn_index.entries:
                self._by_pid.setdefault(e.producer_id, []).append((e.first_offset, e.last_offset))

    def contains(self, h: rb.BatchHeader) -> bool:
        ranges = self._by_pid.get(h.producer_id)
        if not ranges:
            return False
        i = bisect_right(ranges, (h.base_offset, _MAX_OFFSET)) - 1
        return i >= 0 and ranges[i][0] <= h.base_offset <= ranges[i][1]


def _latest_offsets(log: PartitionLog, aborted: _AbortedRanges, limit: int | None) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for seg in log.segments:
        for h, batch in seg.iter_batches():
            if limit is not None and h.base_offset >= limit:
                return latest
            if h.is_control or (h.is_transactional and aborted.contains(h)):
                continue
            for r in rb.iter_records(batch, h):
                if r.key is not None:
                    latest[r.key] = r.offset
    return latest


def compact_segments(log: PartitionLog, now_ms: int) -> tuple[int, int]:
    """One compaction pass over ``log``; returns the number of records removed and the offset
    the pass cleaned up to (the cleaner's checkpoint: the first segment it left alone)."""
    cfg = log.config
    segments = log.segments
    if len(segments) < 2:
        return 0, 0
    cleaned_up_to = log.first_uncleanable_offset(now_ms)
    unstable = log.producer_state.first_unstable_offset()
    aborted = _AbortedRanges(log)
    latest = _latest_offsets(log, aborted, unstable)
    txn_has_records: dict[int, bool] = {}  # producer id -> a record of its current transaction survives
    removed_total = 0
    for index, seg in enumerate(segments[:-1]):
        if seg.next_offset > cleaned_up_to:
            break
        drop_tombstones = now_ms - seg.largest_timestamp() > cfg.delete_retention_ms
        # The rewrite starts only at the first batch that loses a record, so an
        # unchanged segment is never copied; from there on batches stream into
        # the .cleaned segment.
        cleaned: Segment | None = None
        removed = 0
        for h in seg.iter_headers(0):
            position = h.position
            batch = os.pread(seg.fd, h.size, position)
            h.position = 0
            if h.is_control:
                has_records = txn_has_records.pop(h.producer_id, False)
                drop = (drop_tombstones and not has_records
                        and _marker_type(batch, h) == rb.CONTROL_COMMIT)
                records = [None] * h.records_count
                keep = [] if drop else records
            elif h.is_transactional and aborted.contains(h):
                records = list(rb.iter_records(batch, h))
                keep = []
            else:
                records = list(rb.iter_records(batch, h))
                keep = [
                    r
                    for r in records
                    if r.key is None
                    or (latest.get(r.key) == r.offset and not (r.value is None and drop_tombstones))
                ]
                if h.is_transactional and keep:
                    txn_has_records[h.producer_id] = True
            if len(keep) == len(records):
                if cleaned is not None:
                    cleaned.append(batch, [h])
                continue
            removed += len(records) - len(keep)
            if cleaned is None:
                cleaned = Segment(seg.dir, seg.base_offset, seg.config, now_ms, suffix=CLEANED_SUFFIX)
                for ph in seg.iter_headers(0):
                    if ph.position >= position:
                        break
                    data = os.pread(seg.fd, ph.size, ph.position)
                    ph.position = 0
                    cleaned.append(data, [ph])
            if keep and not h.is_control:
                new = rebuild_batch(h, keep)
                cleaned.append(new, [rb.parse_header(new)])
        if cleaned is not None:
            log._replace_segment(index, _swap(seg, cleaned, now_ms))
            removed_total += removed
    return removed_total, cleaned_up_to


def _swap(seg: Segment, cleaned: Segment, now_ms: int) -> Segment:
    """Make ``cleaned`` (a ``.cleaned`` segment) the new contents of ``seg``; return the reopened Segment."""
    directory, base, config = seg.dir, seg.base_offset, seg.config
    cleaned.on_roll()
    cleaned.dirty = True
    cleaned.fsync()
    cleaned.close()
    seg.close()
    # Old indexes go first: if we die after this, the new log's indexes are rebuilt on load.
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        fileio.unlink(directory / segment_file_name(base, suffix))
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # the log first
        name = segment_file_name(base, suffix)
        fileio.replace(directory / (name + CLEANED_SUFFIX), directory / name)
    fileio.fsync_dir(directory)
    fresh = Segment(directory, base, config, now_ms)
    fresh.load_indexes()
    if fresh.next_offset < seg.next_offset:
        # An emptied (or end-trimmed) segment still spans up to where the old one ended.
        fresh.next_offset = seg.next_offset
    return fresh
