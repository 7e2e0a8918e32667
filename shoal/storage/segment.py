"""One log segment: ``<base>.log`` plus its ``.index`` and ``.timeindex``.

The log file is read with ``os.pread`` so a read never needs the segment in
memory. Writes go through ``fileio.pwrite`` (the disk seam) at the tracked end of file.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

from shoal import fileio
from shoal.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    RecordBatchError,
    compute_crc,
    parse_header,
)
from shoal.storage.config import LogConfig
from shoal.storage.file_pool import POOL
from shoal.storage.index import IndexCorruptError, OffsetIndex, TimeIndex
from shoal.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
# The producer-state snapshot (<base>.snapshot) also sits beside a segment,
# but belongs to the log's producer state (storage/producer_state.py).
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

_PEEK = struct.Struct(">qi")  # base offset, batch length
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_READ_CHUNK = 64 * 1024
_SCAN_CHUNK = 1024 * 1024
_MAX_RELATIVE_OFFSET = (1 << 31) - 1


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's 20-digit zero-padded file name, e.g. ``00000000000000000042.log``."""
    return f"{base_offset:020d}{suffix}"


class Segment:
    """A log segment file and its indexes. Not thread-safe (one event loop owns it)."""

    def __init__(
        self, directory: Path, base_offset: int, config: LogConfig, now_ms: int, *, suffix: str = ""
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.config = config

        def path(kind: str) -> Path:
            return directory / (segment_file_name(base_offset, kind) + suffix)

        self.log_path = path(LOG_SUFFIX)
        # Internal topics' segments stay open (the coordinators read them from a thread); the
        # others share the process's bounded pool of open files (file_pool.py).
        self._pinned = directory.name.startswith("__")
        self._closed = False
        self._fd = fileio.open_fd(self.log_path, os.O_RDWR | os.O_CREAT)
        if not self._pinned:
            POOL.opened(self)
        self.size = os.fstat(self._fd).st_size
        index_bytes = config.segment_index_bytes
        self.offset_index = OffsetIndex(path(INDEX_SUFFIX), base_offset, max(1, index_bytes // OffsetIndex.entry.size))
        self.time_index = TimeIndex(path(TIME_INDEX_SUFFIX), base_offset, max(1, index_bytes // TimeIndex.entry.size))
        # Aborted transactions whose ABORT marker is in this segment.
        self.txn_index = TransactionIndex(path(TXN_INDEX_SUFFIX))
        self.txn_index.load()
        self.created_ms = now_ms
        self.bytes_since_index_entry = 0
        self.max_timestamp = -1  # largest batch max timestamp in this segment
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp: int | None = None  # rolling base for segment.ms
        self.next_offset = base_offset  # one past the last offset written here
        self.dirty = False  # written since the last fsync
        self.synced_size = self.size  # the length the last fsync covered (what was there at open)

    @property
    def fd(self) -> int:
        """The log file's descriptor, opened again if the pool closed it."""
        fd = self._fd
        if fd < 0:
            if self._closed:
                raise OSError(f"segment {self.log_path} is closed")
            fd = self._fd = fileio.open_fd(self.log_path, os.O_RDWR)
            POOL.opened(self, again=True)
        elif not self._pinned:
            POOL.used(self)
        return fd

    def release(self) -> None:
        """Close the files (the pool's choice); any later use opens them again."""
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        if self._fd >= 0:
            fileio.close(self._fd)
            self._fd = -1

    # -- loading -----------------------------------------------------------

    def load_indexes(self) -> bool:
        """Load both index files; on any doubt rebuild them from the log. True if rebuilt."""
        try:
            self.offset_index.load(self.size)
            self.time_index.load()
        except IndexCorruptError:
            self.rebuild(check_crc=False)
            return True
        self.max_timestamp = self.time_index.last_timestamp
        if self.time_index.rel_offsets:
            self.offset_of_max_timestamp = self.base_offset + self.time_index.rel_offsets[-1]
        # Walk the tail after the last index entry: it finds the end offset, the
        # max timestamp of unindexed batches and the bytes since the last entry.
        # (Kafka resets the byte counter just before adding the indexed batch,
        # so the counter is the size of everything from the last entry on.)
        _, pos = self.offset_index.last_entry
        self.bytes_since_index_entry = 0
        try:
            for h in self.iter_headers(pos):
                self._note_batch(h)
                self.bytes_since_index_entry += h.size
                pos = h.position + h.size
        except RecordBatchError:
            self.rebuild(check_crc=False)
            return True
        if pos != self.size:
            # The tail does not end on a batch boundary: index and log disagree.
            self.rebuild(check_crc=False)
            return True
        self._load_first_timestamp()
        return False

    def _load_first_timestamp(self) -> None:
        if self.size >= HEADER_SIZE:
            self.first_batch_timestamp = parse_header(os.pread(self.fd, HEADER_SIZE, 0)).max_timestamp

    def rebuild(self, *, check_crc: bool) -> int:
        """Rescan the log, rebuild both indexes, truncate an invalid tail.

        Returns the number of bytes truncated. With ``check_crc`` every batch's
        CRC is verified (recovery of the active segment after a crash).
        """
        entries: list[tuple[int, int]] = []
        tentries: list[tuple[int, int]] = []
        self.bytes_since_index_entry = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.next_offset = self.base_offset
        interval = self.config.index_interval_bytes
        last_ts = -1
        valid_end = 0
        prev_next = self.base_offset
        for h, ok in self._scan(check_crc):
            if not ok or h.base_offset < prev_next:
                break
            if self.bytes_since_index_entry > interval:
                entries.append((h.last_offset, h.position))
                if self.max_timestamp > last_ts:
                    tentries.append((self.max_timestamp, self.offset_of_max_timestamp))
                    last_ts = self.max_timestamp
                self.bytes_since_index_entry = 0
            self.bytes_since_index_entry += h.size
            self._note_batch(h)
            prev_next = h.next_offset
            valid_end = h.position + h.size
        truncated = self.size - valid_end
        if truncated:
            fileio.ftruncate(self.fd, valid_end)
            self.size = valid_end
            self.synced_size = min(self.synced_size, valid_end)
        self.offset_index.reset(entries)
        self.time_index.reset(tentries)
        self.first_batch_timestamp = None
        self._load_first_timestamp()
        return truncated

    def _scan(self, check_crc: bool) -> Iterator[tuple[BatchHeader, bool]]:
        """Yield (header, valid) for batches from position 0; stop after the first invalid one."""
        pos = 0
        size = self.size
        while pos < size:
            if size - pos < HEADER_SIZE:
                yield BatchHeader(-1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, pos), False
                return
            chunk = os.pread(self.fd, min(max(_SCAN_CHUNK, HEADER_SIZE), size - pos), pos)
            off = 0
            while off + HEADER_SIZE <= len(chunk):
                try:
                    h = parse_header(chunk, off)
                except RecordBatchError:
                    yield BatchHeader(-1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, pos + off), False
                    return
                if pos + off + h.size > size:
                    yield h, False
                    return
                if off + h.size > len(chunk):
                    if off == 0:  # a batch bigger than the chunk: read it whole
                        chunk = os.pread(self.fd, h.size, pos)
                    else:
                        break
                ok = (not check_crc) or compute_crc(chunk, off, h.size) == h.crc
                h.position = pos + off
                yield h, ok
                if not ok:
                    return
                off += h.size
            pos += off

    def _note_batch(self, h: BatchHeader) -> None:
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.last_offset
        self.next_offset = h.next_offset

    # -- writing -----------------------------------------------------------

    def should_roll(self, append_bytes: int, max_timestamp: int, last_offset: int, now_ms: int) -> bool:
        """Kafka's roll rules: size, age (segment.ms), full indexes, relative-offset overflow."""
        if self.size == 0:
            return False
        if self.size + append_bytes > self.config.segment_bytes:
            return True
        first = self.first_batch_timestamp
        # Like Kafka, age is measured in record time when the segment has timestamps.
        waited = max_timestamp - first if first is not None and first >= 0 else now_ms - self.created_ms
        if waited > self.config.segment_ms:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return last_offset - self.base_offset > _MAX_RELATIVE_OFFSET

    def append(self, data: memoryview | bytes | bytearray, headers: list[BatchHeader]) -> None:
        """Write whole batches (``headers`` positions are relative to ``data``) at the end."""
        start = self.size
        mv = memoryview(data)
        written = 0
        total = len(mv)
        while written < total:
            written += fileio.pwrite(self.fd, mv[written:], start + written)
        interval = self.config.index_interval_bytes
        for h in headers:
            if self.bytes_since_index_entry > interval:
                self.offset_index.append(h.last_offset, start + h.position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_index_entry = 0
            self.bytes_since_index_entry += h.size
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = h.max_timestamp
            self._note_batch(h)
        self.size = start + total
        self.dirty = True

    def on_roll(self) -> None:
        """The segment stops being active: index its max timestamp, push index files to the OS."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.flush()
        self.time_index.flush()

    def fsync(self) -> None:
        if self.dirty:
            fileio.fdatasync(self.fd)
            self.offset_index.fsync()
            self.time_index.fsync()
            self.txn_index.fsync()
            self.dirty = False
            self.synced_size = self.size

    def cut_to_synced(self) -> None:
        """After a failed fsync: drop what the last good fsync did not cover, so that a restart
        never reads back a write whose sync failed (the OS may still hold it in its cache after
        giving up on writing it). Best effort: the disk is failing."""
        try:
            fileio.ftruncate(self.fd, self.synced_size)
        except OSError:
            pass

    # -- reading -----------------------------------------------------------

    def iter_headers(self, start: int = 0) -> Iterator[BatchHeader]:
        """Headers of the batches from ``start`` (a batch boundary) to the end of the file."""
        pos = start
        size = self.size
        buf = b""
        buf_start = pos
        while size - pos >= HEADER_SIZE:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, min(_READ_CHUNK, size - pos), pos)
                buf_start = pos
                off = 0
            h = parse_header(buf, off)
            if pos + h.size > size:
                raise CorruptRecordError(f"batch at position {pos} of {self.log_path} runs past its end")
            h.position = pos
            yield h
            pos += h.size

    def iter_batches(self, start: int = 0) -> Iterator[tuple[BatchHeader, bytes]]:
        """(header with position 0, batch bytes) for every batch from ``start``."""
        for h in self.iter_headers(start):
            data = os.pread(self.fd, h.size, h.position)
            h.position = 0
            yield h, data

    def find_position(self, offset: int) -> int | None:
        """Position of the first batch whose last offset is >= ``offset``; None if past the end."""
        for h in self.iter_headers(self.offset_index.lookup(offset)):
            if h.base_offset + h.last_offset_delta >= offset:
                return h.position
        return None

    def read_with_end(
        self, position: int, max_bytes: int, *, min_one: bool, max_offset: int | None
    ) -> tuple[bytes | memoryview, int]:
        """Whole batches from ``position``: up to ``max_bytes`` (at least one batch if ``min_one``),
        none whose last offset reaches ``max_offset``; and the offset after the last batch returned
        (-1 when none is)."""
        remaining = self.size - position
        if remaining <= 0:
            return b"", -1
        data = os.pread(self.fd, min(max(max_bytes, HEADER_SIZE), remaining), position)
        end = 0
        n = len(data)
        next_offset = -1
        while n - end >= HEADER_SIZE:
            base, length = _PEEK.unpack_from(data, end)
            last = base + _I32.unpack_from(data, end + 23)[0]
            if max_offset is not None and last >= max_offset:
                break
            size = length + LOG_OVERHEAD
            if end + size > n:
                if end == 0 and min_one:
                    data = os.pread(self.fd, size, position)
                    end = len(data)
                    next_offset = last + 1
                break
            if end + size > max_bytes and not (end == 0 and min_one):
                break
            end += size
            next_offset = last + 1
        if end == 0:
            return b"", -1
        return (data if end == len(data) else memoryview(data)[:end]), next_offset

    def last_modified_ms(self) -> int:
        return int(os.fstat(self.fd).st_mtime * 1000)

    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime when no batch carries one (as Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return self.last_modified_ms()

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        self._closed = True
        POOL.closed(self)
        self.release()

    def delete(self) -> None:
        self.close()
        for suffix in SEGMENT_SUFFIXES:
            fileio.unlink(self.dir / segment_file_name(self.base_offset, suffix))
