"""Sparse offset and time indexes of one segment, in Kafka's file formats.

``.index``: entries of (relative offset int32, file position int32), big-endian;
an entry maps the last offset of a batch to the position where that batch
starts. ``.timeindex``: entries of (timestamp int64, relative offset int32):
the largest timestamp seen so far in the segment and the (last) offset of the
batch that carried it. Both are sparse: one entry per ``index.interval.bytes``
of log. Entries live in memory (arrays) and are appended to the file; the file
is only read at load time, and rebuilt from the log when it does not check out.

Unlike Kafka we do not preallocate and mmap the files, so their length is
always exactly ``entries * entry.size``.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

from shoal import fileio

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class IndexCorruptError(Exception):
    """An index file does not check out; the caller rebuilds it from the log."""


class _IndexFile:
    """Append-only file of fixed-size entries with a small write buffer; every entry holds an
    offset relative to the segment's base offset (``rel_offsets``)."""

    entry = _OFFSET_ENTRY

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self.rel_offsets = array("i")
        self._pending = bytearray()
        self._fd: int | None = None

    def __len__(self) -> int:
        return len(self.rel_offsets)

    @property
    def is_full(self) -> bool:
        return len(self.rel_offsets) >= self.max_entries

    def _read_entries(self) -> Iterator[tuple[int, ...]]:
        """The file's entries; IndexCorruptError when it is missing or cut mid-entry."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            raise IndexCorruptError(f"{self.path} is missing") from None
        if len(data) % self.entry.size:
            raise IndexCorruptError(f"{self.path} size {len(data)} is not a multiple of {self.entry.size}")
        return self.entry.iter_unpack(data)

    def _open(self) -> int:
        if self._fd is None:
            self._fd = fileio.open_fd(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        return self._fd

    def _write_entry(self, data: bytes) -> None:
        self._pending += data
        if len(self._pending) >= 4096:
            self.flush()

    def flush(self) -> None:
        """Hand buffered entries to the OS."""
        if self._pending:
            fileio.write_all(self._open(), self._pending)
            self._pending.clear()

    def fsync(self) -> None:
        self.flush()
        fileio.fsync(self._open())  # also creates the file when it has no entries yet

    def close(self) -> None:
        self.flush()
        if self._fd is not None:
            fileio.close(self._fd)
            self._fd = None

    def _rewrite(self, *columns: array) -> None:
        """Replace the whole file with the entries of these columns (used after a rebuild)."""
        self.close()
        self._pending.clear()
        fileio.replace_file(self.path, b"".join(self.entry.pack(*e) for e in zip(*columns, strict=True)), fsync=False)

    def delete(self) -> None:
        self.close()
        self._pending.clear()
        fileio.unlink(self.path)


class OffsetIndex(_IndexFile):
    """Sparse map from offsets to file positions of one segment."""

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        super().__init__(path, base_offset, max_entries)
        self.positions = array("i")

    @property
    def last_entry(self) -> tuple[int, int]:
        """(absolute offset, position) of the last entry, or (base_offset, 0) when empty."""
        if not self.rel_offsets:
            return self.base_offset, 0
        return self.base_offset + self.rel_offsets[-1], self.positions[-1]

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.rel_offsets and (rel <= self.rel_offsets[-1] or position <= self.positions[-1]):
            return  # entries must strictly increase; a duplicate adds nothing
        self.rel_offsets.append(rel)
        self.positions.append(position)
        self._write_entry(_OFFSET_ENTRY.pack(rel, position))

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch whose last offset is <= ``offset`` (0 if none).

        The batch holding ``offset`` starts at or after the returned position.
        """
        i = bisect_right(self.rel_offsets, offset - self.base_offset)
        return self.positions[i - 1] if i else 0

    def load(self, log_size: int) -> None:
        """Read the file; raise IndexCorruptError when it cannot be trusted."""
        rels = array("i")
        poss = array("i")
        prev_rel = prev_pos = -1
        for rel, pos in self._read_entries():
            if rel <= prev_rel or pos <= prev_pos or pos >= log_size or rel < 0:
                raise IndexCorruptError(f"{self.path} has a non-monotonic or out-of-range entry")
            rels.append(rel)
            poss.append(pos)
            prev_rel, prev_pos = rel, pos
        self.rel_offsets, self.positions = rels, poss

    def reset(self, entries: list[tuple[int, int]]) -> None:
        """Replace all entries with absolute (offset, position) pairs and rewrite the file."""
        self.rel_offsets = array("i", (o - self.base_offset for o, _ in entries))
        self.positions = array("i", (p for _, p in entries))
        self._rewrite(self.rel_offsets, self.positions)


class TimeIndex(_IndexFile):
    """Sparse map from (max-so-far) timestamps to offsets of one segment."""

    entry = _TIME_ENTRY

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        super().__init__(path, base_offset, max_entries)
        self.timestamps = array("q")

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry when ``timestamp`` is larger than the last one (as Kafka does)."""
        if timestamp < 0 or (self.timestamps and timestamp <= self.timestamps[-1]):
            return
        rel = offset - self.base_offset
        if self.rel_offsets and rel < self.rel_offsets[-1]:
            return
        self.timestamps.append(timestamp)
        self.rel_offsets.append(rel)
        self._write_entry(_TIME_ENTRY.pack(timestamp, rel))

    def lookup(self, timestamp: int) -> int | None:
        """Last offset known to hold only timestamps < ``timestamp`` (None: start of segment).

        Every record up to that offset has a timestamp below ``timestamp``, so
        a search for the first record with timestamp >= ``timestamp`` may start
        right after it.
        """
        i = bisect_right(self.timestamps, timestamp - 1)
        return self.base_offset + self.rel_offsets[i - 1] if i else None

    def load(self, max_rel_offset: int | None = None) -> None:
        tss = array("q")
        rels = array("i")
        prev_ts = prev_rel = -1
        for ts, rel in self._read_entries():
            if (
                ts <= prev_ts
                or rel < prev_rel
                or rel < 0
                or (max_rel_offset is not None and rel > max_rel_offset)
            ):
                raise IndexCorruptError(f"{self.path} has a non-monotonic or out-of-range entry")
            tss.append(ts)
            rels.append(rel)
            prev_ts, prev_rel = ts, rel
        self.timestamps, self.rel_offsets = tss, rels

    def reset(self, entries: list[tuple[int, int]]) -> None:
        """Replace all entries with (timestamp, absolute offset) pairs and rewrite the file."""
        self.timestamps = array("q", (t for t, _ in entries))
        self.rel_offsets = array("i", (o - self.base_offset for _, o in entries))
        self._rewrite(self.timestamps, self.rel_offsets)
