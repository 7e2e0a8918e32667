"""The aborted-transaction index of one segment (``<base>.txnindex``), in Kafka's file format.

Each entry is 34 bytes, big-endian: version int16 (0), producer id int64,
first offset int64, last offset int64 (the ABORT marker's offset) and last
stable offset int64 (the LSO right after the abort was written). An entry
sits in the index of the segment holding its marker, so entries are ordered
by last offset. read_committed fetches use the entries to tell consumers
which producers' batches to drop (``collect``); the cleaner uses them to
drop aborted records.

Entries live in memory; the file is appended to and read back only on load.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path

from shoal import fileio

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(0, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


class TransactionIndex:
    """Aborted transactions whose ABORT marker lies in one segment."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []
        self._fd: int | None = None
        self.dirty = False

    def load(self) -> None:
        """Read the file; a torn trailing entry (crash mid-write) is cut off."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        whole = len(data) - len(data) % ENTRY_SIZE
        entries = []
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data[:whole]):
            if version != 0 or first > last or (entries and last < entries[-1].last_offset):
                break  # garbage from here on: keep what came before
            entries.append(AbortedTxn(pid, first, last, lso))
        self.entries = entries
        self._last_offsets = [e.last_offset for e in entries]
        if len(entries) * ENTRY_SIZE != len(data):
            self._rewrite()

    def append(self, entry: AbortedTxn) -> None:
        if self._last_offsets and entry.last_offset < self._last_offsets[-1]:
            raise ValueError(f"aborted transaction at {entry.last_offset} is below the index's last entry")
        self.entries.append(entry)
        self._last_offsets.append(entry.last_offset)
        if self._fd is None:
            self._fd = fileio.open_fd(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        fileio.write_all(self._fd, entry.encode())
        self.dirty = True

    def truncate_from(self, offset: int) -> None:
        """Drop every entry whose marker is at ``offset`` or later (they are rebuilt by replay)."""
        i = bisect_left(self._last_offsets, offset)
        if i < len(self.entries):
            del self.entries[i:]
            del self._last_offsets[i:]
            self._rewrite()

    def collect(self, fetch_offset: int, upper_bound: int, out: list[AbortedTxn]) -> bool:
        """Add entries overlapping [fetch_offset, upper_bound) to ``out``.

        Returns True when no later segment can hold an overlapping entry:
        an entry whose last stable offset reaches the upper bound proves that
        every transaction aborted after it started at or beyond the bound.
        """
        for i in range(bisect_left(self._last_offsets, fetch_offset), len(self.entries)):
            e = self.entries[i]
            if e.first_offset < upper_bound:
                out.append(e)
            if e.last_stable_offset >= upper_bound:
                return True
        return False

    def _rewrite(self) -> None:
        self.close()
        if not self.entries:
            fileio.unlink(self.path)
            return
        # synced: rare (recovery, compaction), and a rename without it may leave an empty file
        # while the producer snapshot that makes rebuilding it unnecessary survives
        fileio.replace_file(self.path, b"".join(e.encode() for e in self.entries), fsync=True)

    def reset(self, entries: list[AbortedTxn]) -> None:
        """Replace all entries (after compaction rewrote the segment)."""
        self.entries = list(entries)
        self._last_offsets = [e.last_offset for e in self.entries]
        self._rewrite()

    def fsync(self) -> None:
        if self.dirty and self._fd is not None:
            fileio.fsync(self._fd)
        self.dirty = False

    def close(self) -> None:
        if self._fd is not None:
            fileio.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        self.entries.clear()
        self._last_offsets.clear()
        fileio.unlink(self.path)
