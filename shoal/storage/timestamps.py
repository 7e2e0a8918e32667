"""ListOffsets' lookups by timestamp over a partition log's segments: the first record at or after a
timestamp (through each segment's time index), the record with the largest timestamp, and ListOffsets
v0's offsets before a time. A base of `PartitionLog` (storage/log.py), which holds the segments, the log
start offset and the high watermark.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from shoal.protocol import record_batch as rb

if TYPE_CHECKING:
    from shoal.storage.segment import Segment

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


class TimestampLookups:
    """The timestamp lookups of a `PartitionLog` (which also provides `_check_open`)."""

    _segments: list[Segment]
    _log_start_offset: int
    high_watermark: int
    log_end_offset: int

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``; None if none.

        Special values as in ListOffsets: -2 earliest -> (log start, -1);
        -1 latest -> (high watermark, -1); -3 -> the record with the largest
        timestamp. Records below the log start offset are skipped, except by -3 (as Kafka).
        """
        self._check_open()
        if timestamp == EARLIEST_TIMESTAMP:
            return self._log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self.high_watermark, -1
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        start = self._log_start_offset
        for seg in self._segments:
            if seg.max_timestamp < timestamp or seg.next_offset <= start:
                continue
            after = seg.time_index.lookup(timestamp)
            from_offset = max(start, seg.base_offset if after is None else after + 1)
            for h in seg.iter_headers(seg.offset_index.lookup(from_offset)):
                if h.max_timestamp < timestamp or h.last_offset < from_offset:
                    continue
                batch = os.pread(seg.fd, h.size, h.position)
                h.position = 0
                try:
                    for r in rb.iter_records(batch, h):
                        if r.offset >= from_offset and r.timestamp >= timestamp:
                            return r.offset, r.timestamp
                except rb.RecordBatchError:
                    # records that do not parse (stored before produce validated them): answer
                    # at batch granularity rather than fail every lookup on this partition
                    return max(h.base_offset, from_offset), h.max_timestamp
        return None

    def legacy_offsets_before(self, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
        """ListOffsets v0: up to ``max_num_offsets`` offsets, descending, from the segments' base
        offsets and the log end, picked by the segment files' modification times (Kafka 3.x's
        legacyFetchOffsetsBefore; -1 latest, -2 earliest). Capped at the high watermark."""
        self._check_open()
        points = [(max(seg.base_offset, self._log_start_offset), seg.last_modified_ms()) for seg in self._segments]
        if self._segments and self._segments[-1].size > 0:
            points.append((self.log_end_offset, now_ms))
        if timestamp == LATEST_TIMESTAMP:
            start = len(points) - 1
        elif timestamp == EARLIEST_TIMESTAMP:
            start = 0
        else:
            start = len(points) - 1
            while start >= 0 and points[start][1] > timestamp:
                start -= 1
        count = max(0, min(max_num_offsets, start + 1))
        offsets = sorted((points[start - j][0] for j in range(count)), reverse=True)
        hw = self.high_watermark
        if any(o > hw for o in offsets):
            offsets = [hw] + [o for o in offsets if o <= hw]
        return offsets

    def _max_timestamp_offset(self) -> tuple[int, int] | None:
        """The first record holding the largest timestamp of the segments kept, as Kafka finds it (its
        segments' largest timestamps so far): records below the log start offset that DeleteRecords left
        in a kept segment count too (kafka-get-offsets --time -3 after kafka-delete-records)."""
        best: Segment | None = None
        for seg in self._segments:
            if seg.next_offset > seg.base_offset and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None or best.max_timestamp < 0:
            return None
        target = best.max_timestamp
        for h in best.iter_headers(best.offset_index.lookup(best.base_offset)):
            if h.max_timestamp != target:
                continue
            batch = os.pread(best.fd, h.size, h.position)
            h.position = 0
            try:
                for r in rb.iter_records(batch, h):
                    if r.timestamp == target:
                        return r.offset, r.timestamp
            except rb.RecordBatchError:  # unparsable records (see offset_for_timestamp)
                return h.base_offset, target
        return None
