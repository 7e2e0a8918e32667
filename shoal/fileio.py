"""The files shoal writes, through one seam.

Storage (segments, indexes, producer snapshots), the cluster metadata log and the coordinators'
small state files create, write, truncate, sync, rename and delete files through these functions,
never through `os` directly, so a simulator can put a disk of its own behind them
(`shoal.sim.disk`): one that loses what was not synced when the power goes, tears writes, or fails
with ENOSPC and EIO. Reads still go to `os` (a simulated disk keeps the real files current; what
differs is only what survives a crash).

By default the functions are the `os` calls themselves, behind one module-level lookup.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Protocol


class Disk(Protocol):
    """What a disk does for shoal; `OS_DISK` is the real one."""

    def open(self, path: str | Path, flags: int, mode: int) -> int: ...
    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> int: ...
    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int: ...
    def ftruncate(self, fd: int, length: int) -> None: ...
    def fsync(self, fd: int) -> None: ...
    def fdatasync(self, fd: int) -> None: ...
    def close(self, fd: int) -> None: ...
    def replace(self, src: str | Path, dst: str | Path) -> None: ...
    def unlink(self, path: str | Path) -> None: ...
    def rmtree(self, path: str | Path) -> None: ...


class _OsDisk:
    """The real disk: each method is the `os` (or `shutil`) call of the same name."""

    open = staticmethod(os.open)
    pwrite = staticmethod(os.pwrite)
    write = staticmethod(os.write)
    ftruncate = staticmethod(os.ftruncate)
    fsync = staticmethod(os.fsync)
    fdatasync = staticmethod(os.fdatasync)
    close = staticmethod(os.close)
    replace = staticmethod(os.replace)
    unlink = staticmethod(os.unlink)

    @staticmethod
    def rmtree(path: str | Path) -> None:
        shutil.rmtree(path, ignore_errors=True)


OS_DISK: Disk = _OsDisk()
_disk: Disk = OS_DISK


def set_disk(disk: Disk) -> None:
    """Send every write of this process to ``disk`` (a simulator's). Process-wide."""
    global _disk
    _disk = disk


def reset_disk() -> None:
    """Back to the real disk."""
    set_disk(OS_DISK)


def open_fd(path: str | Path, flags: int, mode: int = 0o644) -> int:
    return _disk.open(path, flags, mode)


def pwrite(fd: int, data: bytes | bytearray | memoryview, offset: int) -> int:
    return _disk.pwrite(fd, data, offset)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write all of ``data`` at the descriptor's position (a short write continues)."""
    view = memoryview(data)
    while view:
        view = view[_disk.write(fd, view):]


def ftruncate(fd: int, length: int) -> None:
    _disk.ftruncate(fd, length)


def truncate(path: str | Path, length: int) -> None:
    fd = _disk.open(path, os.O_WRONLY, 0o644)
    try:
        _disk.ftruncate(fd, length)
    finally:
        _disk.close(fd)


def fsync(fd: int) -> None:
    _disk.fsync(fd)


def fdatasync(fd: int) -> None:
    _disk.fdatasync(fd)


def close(fd: int) -> None:
    _disk.close(fd)


def replace(src: str | Path, dst: str | Path) -> None:
    _disk.replace(src, dst)


def unlink(path: str | Path, *, missing_ok: bool = True) -> None:
    try:
        _disk.unlink(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


def rmtree(path: str | Path) -> None:
    """Remove a directory and everything in it (errors ignored, as a best effort)."""
    _disk.rmtree(path)


def fsync_dir(directory: str | Path) -> None:
    """fsync a directory: the files created, renamed or removed in it stay so after a crash."""
    fd = _disk.open(directory, os.O_RDONLY, 0)
    try:
        _disk.fsync(fd)
    finally:
        _disk.close(fd)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Create or overwrite ``path`` with ``data`` in place (no sync: for markers and hints)."""
    fd = _disk.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
    finally:
        _disk.close(fd)


def replace_file(path: str | Path, data: bytes, *, fsync: bool) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file, synced when ``fsync`` (then the
    directory too), renamed over ``path``. Without ``fsync`` a crash of the machine may leave the
    old content, or an empty file: readers must cope."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = _disk.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        if fsync:
            _disk.fsync(fd)
    finally:
        _disk.close(fd)
    _disk.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)
