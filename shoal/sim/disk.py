"""The simulated disk: the real files, plus what a power cut would leave of them.

Put behind `shoal.fileio` for a run, it passes every write to the real file (so the broker reads
back what it wrote, as from the page cache) and keeps, per file, what is *durable*: its length at
the last fsync and the bytes below that length overwritten or cut since. When the power goes
(`power_off`, then `power_cut`):

- what was written after the last fsync is lost, except a prefix of the appended bytes that the
  page cache happened to write back, which may end mid-write (a **torn write**) or read as zeros
  (the length reached the disk, the data did not);
- overwritten and truncated bytes come back as they were at the last fsync;
- while the power is off nothing reaches the files (the dying process's writes, its clean-
  shutdown markers and snapshots, are lost).

Directory entries (creates, renames, deletes) are durable at once: a file created and never synced
comes back empty, one renamed over another without a sync comes back empty (ext4's zero-length
file after rename), not missing. That is kinder than a real file system, and stated.

Faults on the partition logs (``<topic>-<n>/*.log``, the coordinators' topics included; not the
cluster metadata log): an append fails with ENOSPC after writing part of its bytes, or with EIO;
an fsync fails with EIO (the broker takes that log offline; the run then restarts the cluster, as
an operator would, with a power cut, since a failed fsync may have dropped the pages it could not
write). And on the files `may_lie` names, an fsync now and then **lies**: it returns without
making anything durable, and the file's next fsync tells the truth again. A power cut between the
two loses data the broker acknowledged; `power_cut` names the partitions where that happened, so
the invariants can excuse exactly those losses (and nothing else).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random

    from shoal.sim.trace import Trace


@dataclass
class DiskRates:
    """How often the disk fails (per append or per fsync of a partition data file)."""

    write_error: float = 0.004  # an append fails (ENOSPC after a partial write, or EIO)
    fsync_error: float = 0.003  # an fsync fails with EIO
    lie: float = 0.03  # an fsync of a file `may_lie` names returns without syncing
    keep_unsynced: float = 0.5  # at a power cut, the chance that some unsynced appended bytes survive
    zeros: float = 0.2  # ... and that what survives of them reads as zeros


@dataclass
class _File:
    durable_len: int
    saves: list[tuple[int, bytes]] = field(default_factory=list)  # durable bytes replaced since the sync
    lied: bool = False  # the last fsync lied: what it claimed durable is not


def _key(path: str | Path) -> str:
    return os.path.normpath(os.fspath(path))


_PARTITION_DIR = re.compile(r".+-\d+")


def _faulty(path: str) -> bool:
    """A partition's log (the coordinators' topics included; not the cluster metadata log): where
    the disk's faults are injected."""
    return path.endswith(".log") and _PARTITION_DIR.fullmatch(os.path.basename(os.path.dirname(path))) is not None


class SimDisk:
    """A `shoal.fileio.Disk` that remembers what is durable and fails now and then."""

    def __init__(self, rng: random.Random, trace: Trace, rates: DiskRates | None = None) -> None:
        self.rng = rng
        self.trace = trace
        self.rates = rates or DiskRates()
        self.powered = True
        self.on_fsync_error: Callable[[str], None] = lambda path: None
        self.may_lie: Callable[[str], bool] = lambda path: False
        self._files: dict[str, _File] = {}
        self._fds: dict[int, tuple[str, bool]] = {}  # fd -> (path, opened for append)
        self._dir_fds: set[int] = set()  # fds of directories (opened to sync their entries)

    # -- bookkeeping ----------------------------------------------------------
    def _file(self, path: str) -> _File:
        f = self._files.get(path)
        if f is None:  # untouched since the run (or the last power cut) began: all of it is durable
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                size = 0
            f = self._files[path] = _File(size)
        return f

    def _preserve(self, path: str, start: int, end: int) -> None:
        """Keep the durable bytes in [start, end) before they are overwritten or cut."""
        f = self._file(path)
        end = min(end, f.durable_len)
        if start < end:
            with open(path, "rb") as fh:
                fh.seek(start)
                f.saves.append((start, fh.read(end - start)))

    def _path(self, fd: int) -> str:
        return self._fds[fd][0]

    # -- the Disk protocol ----------------------------------------------------
    def open(self, path: str | Path, flags: int, mode: int) -> int:
        key = _key(path)
        if not self.powered:  # the dying process may still open files; nothing it writes lands
            exists = os.path.exists(key)
            fd = os.open(key if exists else os.devnull, flags & ~(os.O_CREAT | os.O_TRUNC))
            self._opened(fd, key, False, os.path.isdir(key))
            return fd
        is_dir = os.path.isdir(key)
        if not is_dir:
            self._file(key)  # note the length before the open creates or truncates the file
            if flags & os.O_TRUNC:
                self._preserve(key, 0, os.path.getsize(key) if os.path.exists(key) else 0)
        fd = os.open(key, flags, mode)
        self._opened(fd, key, bool(flags & os.O_APPEND), is_dir)
        return fd

    def _opened(self, fd: int, key: str, append: bool, is_dir: bool) -> None:
        self._fds[fd] = (key, append)
        if is_dir:
            self._dir_fds.add(fd)
        else:
            self._dir_fds.discard(fd)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> int:
        if not self.powered:
            return len(data)
        path = self._path(fd)
        if _faulty(path) and self.rng.random() < self.rates.write_error:
            if self.rng.random() < 0.5:
                part = self.rng.randrange(len(data) + 1)
                self._preserve(path, offset, offset + part)
                os.pwrite(fd, memoryview(data)[:part], offset)
                self.trace.fault("disk-full", f"append to {_short(path)}: {part} of {len(data)} bytes, then ENOSPC")
                raise OSError(errno.ENOSPC, "No space left on device (simulated)")
            self.trace.fault("write-error", f"append to {_short(path)}: EIO")
            raise OSError(errno.EIO, "Input/output error (simulated)")
        self._preserve(path, offset, offset + len(data))
        return os.pwrite(fd, data, offset)

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        if not self.powered:
            return len(data)
        path, append = self._fds[fd]
        pos = os.lseek(fd, 0, os.SEEK_END if append else os.SEEK_CUR)
        self._preserve(path, pos, pos + len(data))
        return os.write(fd, data)

    def ftruncate(self, fd: int, length: int) -> None:
        if not self.powered:
            return
        path = self._path(fd)
        self._preserve(path, length, os.fstat(fd).st_size)
        os.ftruncate(fd, length)

    def fsync(self, fd: int) -> None:
        if not self.powered:
            return
        if fd in self._dir_fds:
            return  # directory entries are durable at once in this model
        path = self._path(fd)
        if _faulty(path) and self.rng.random() < self.rates.fsync_error:
            self.trace.fault("fsync-error", f"fsync of {_short(path)}: EIO")
            self.on_fsync_error(path)
            raise OSError(errno.EIO, "Input/output error (simulated)")
        f = self._file(path)
        if not f.lied and self.may_lie(path) and self.rng.random() < self.rates.lie:
            self.trace.fault("fsync-lie", f"fsync of {_short(path)} returns, nothing synced")
            f.lied = True
            return
        f.lied = False
        f.durable_len = os.fstat(fd).st_size
        f.saves.clear()

    fdatasync = fsync

    def close(self, fd: int) -> None:
        self._fds.pop(fd, None)
        self._dir_fds.discard(fd)
        os.close(fd)

    def replace(self, src: str | Path, dst: str | Path) -> None:
        if not self.powered:
            return
        s, d = _key(src), _key(dst)
        self._files[d] = self._file(s)
        del self._files[s]
        os.replace(s, d)

    def unlink(self, path: str | Path) -> None:
        if not self.powered:
            return
        key = _key(path)
        os.unlink(key)
        self._files.pop(key, None)

    def rmtree(self, path: str | Path) -> None:
        if not self.powered:
            return
        prefix = _key(path) + os.sep
        for key in [k for k in self._files if k.startswith(prefix)]:
            del self._files[key]
        shutil.rmtree(path, ignore_errors=True)

    # -- the power ------------------------------------------------------------
    def power_off(self) -> None:
        """From now on nothing reaches the files (the machine is going down)."""
        self.powered = False

    def power_cut(self) -> list[str]:
        """Leave each file as the disk would after the cut; then the power is back. Returns the
        partition directories (``<topic>-<n>``) that lost data an fsync had lied about."""
        cut = torn = 0
        broken: set[str] = set()
        for path, f in sorted(self._files.items()):
            if not os.path.exists(path):
                continue
            size = os.path.getsize(path)
            if not f.saves and size == f.durable_len:
                continue
            with open(path, "rb") as fh:
                now = fh.read()
            content = bytearray(now)
            for start, data in reversed(f.saves):  # the oldest save of a byte wins
                if len(content) < start + len(data):
                    content.extend(bytes(start + len(data) - len(content)))
                content[start:start + len(data)] = data
            del content[f.durable_len:]
            tail = now[f.durable_len:]
            if tail and self.rng.random() < self.rates.keep_unsynced:
                kept = tail[:self.rng.randrange(1, len(tail) + 1)]
                if self.rng.random() < self.rates.zeros:
                    kept = bytes(len(kept))
                content += kept
                torn += 1
            if f.lied and content != now:
                broken.add(os.path.basename(os.path.dirname(path)))
            with open(path, "r+b") as fh:
                fh.write(content)
                fh.truncate(len(content))
            cut += 1
        self._files.clear()
        self._fds.clear()
        self._dir_fds.clear()
        self.powered = True
        self.trace.emit(f"power back: {cut} files lost unsynced writes, {torn} kept part of them")
        for name in sorted(broken):  # counted with the faults: how often a lie was exposed
            self.trace.fault("lie-exposed", f"{name} lost data a lying fsync had claimed durable")
        return sorted(broken)


def _short(path: str) -> str:
    """``<topic>-<n>/<file>``: the trace must not carry the run's temporary directory."""
    return "/".join(Path(path).parts[-2:])
