"""Removing data from a partition log: DeleteRecords moving the log start offset up, retention.ms and
retention.bytes deleting old segments, and when and how far compaction may run (the rewriting itself
is ``cleaner.py``). A base of `PartitionLog` (storage/log.py), which holds the segments, the log start
offset and the high watermark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal import fileio
from shoal.storage.errors import OffsetOutOfRangeError
from shoal.storage.producer_state import list_snapshots, snapshot_path

if TYPE_CHECKING:
    from pathlib import Path

    from shoal.storage.config import LogConfig
    from shoal.storage.producer_state import ProducerStateManager
    from shoal.storage.segment import Segment


class LogRetention:
    """Deletion, retention and compaction scheduling of a `PartitionLog` (which also provides
    `_check_open`, `_write_log_start_offset` and `size_bytes`)."""

    dir: Path
    config: LogConfig
    producer_state: ProducerStateManager
    high_watermark: int
    _segments: list[Segment]
    _bases: list[int]
    _log_start_offset: int
    _last_snapshot_offset: int
    _cleaned_offset: int

    # -- deletion ----------------------------------------------------------

    def delete_records(self, before_offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``before_offset`` (-1: the high watermark).

        Whole segments below the new start are removed. Returns the new log
        start offset. Raises OffsetOutOfRangeError beyond the high watermark.
        """
        self._check_open()
        if before_offset == -1:
            before_offset = self.high_watermark
        if before_offset < 0 or before_offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {before_offset}: high watermark is {self.high_watermark}"
            )
        if before_offset > self._log_start_offset:
            self._log_start_offset = before_offset
            self._write_log_start_offset()
            self._delete_segments_below_start()
        return self._log_start_offset

    def _delete_segments_below_start(self) -> int:
        deleted = 0
        while len(self._segments) > 1 and self._bases[1] <= self._log_start_offset:
            self._delete_oldest()
            deleted += 1
        return deleted

    def _delete_oldest(self) -> None:
        seg = self._segments.pop(0)
        self._bases.pop(0)
        seg.delete()
        if self._bases[0] > self._log_start_offset:
            self._log_start_offset = self._bases[0]
            self._write_log_start_offset()
        for old in list_snapshots(self.dir):
            if old < self._bases[0] and old != self._last_snapshot_offset:
                fileio.unlink(snapshot_path(self.dir, old))

    def enforce_retention(self, now_ms: int) -> int:
        """Delete old non-active segments by retention.ms and retention.bytes; return how many.

        A segment is old when its largest record timestamp (its file mtime if
        it has none) is more than retention.ms ago. Size retention drops the
        oldest segments while the log stays at or above retention.bytes
        without them. Deletion stops at the first segment that must stay.
        """
        self._check_open()
        deleted = self._delete_segments_below_start()
        cfg = self.config
        if not cfg.delete:
            return deleted
        if cfg.retention_ms >= 0:
            while (
                len(self._segments) > 1 and now_ms - self._segments[0].largest_timestamp() > cfg.retention_ms
            ):
                self._delete_oldest()
                deleted += 1
        if cfg.retention_bytes >= 0:
            excess = self.size_bytes - cfg.retention_bytes
            while len(self._segments) > 1 and excess - self._segments[0].size >= 0:
                excess -= self._segments[0].size
                self._delete_oldest()
                deleted += 1
        return deleted

    # -- compaction --------------------------------------------------------

    def first_uncleanable_offset(self, now_ms: int) -> int:
        """Where the part the cleaner may not touch yet starts (Kafka's first uncleanable offset):
        the first segment holding an open transaction or, above the cleaner's checkpoint, younger
        than min.compaction.lag.ms; at the latest the active segment. Segments cleaned before are
        cleaned again whatever their age (later records may supersede theirs)."""
        cfg = self.config
        unstable = self.producer_state.first_unstable_offset()
        for seg in self._segments[:-1]:
            if unstable is not None and seg.next_offset > unstable:
                return seg.base_offset
            if (seg.next_offset > self._cleaned_offset and cfg.min_compaction_lag_ms > 0
                    and now_ms - seg.largest_timestamp() < cfg.min_compaction_lag_ms):
                return seg.base_offset
        return self._segments[-1].base_offset

    def needs_compaction(self, now_ms: int) -> bool:
        """Kafka's LogCleanerManager rule: a compacted log is cleaned when the dirty part of its
        cleanable segments (below ``first_uncleanable_offset``; dirty: above the cleaner's
        checkpoint) is at least min.cleanable.dirty.ratio of them, or when a dirty segment has
        waited longer than max.compaction.lag.ms."""
        cfg = self.config
        if not cfg.compact or len(self._segments) < 2:
            return False
        limit = self.first_uncleanable_offset(now_ms)
        clean = dirty = 0
        oldest_dirty = None
        for seg in self._segments[:-1]:
            if seg.next_offset > limit:
                break
            if seg.next_offset <= self._cleaned_offset:
                clean += seg.size
            else:
                dirty += seg.size
                if oldest_dirty is None:
                    oldest_dirty = seg
        if oldest_dirty is None:
            return False
        if dirty >= cfg.min_cleanable_dirty_ratio * (clean + dirty):
            return True
        # The segment's largest timestamp bounds its first record's from above: never early.
        return now_ms - oldest_dirty.largest_timestamp() > cfg.max_compaction_lag_ms

    def compact(self, now_ms: int) -> int:
        """Keep only the latest record per key in the non-active segments; return records removed.

        See ``shoal.storage.cleaner`` for the rules.
        """
        self._check_open()
        if not self.config.compact:
            return 0
        from shoal.storage.cleaner import compact_segments

        removed, self._cleaned_offset = compact_segments(self, now_ms)
        return removed

    def _replace_segment(self, index: int, seg: Segment) -> None:
        """Swap in a rewritten segment object (the cleaner renamed its files already)."""
        self._segments[index] = seg
