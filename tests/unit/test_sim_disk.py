"""The simulated disk (shoal/sim/disk.py) and what shoal's storage does with it: what a power cut
leaves of a file, and a partition log recovering from torn tails and failed writes and syncs."""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal import fileio
from shoal.protocol import record_batch as rb
from shoal.protocol.record_encode import build_batch
from shoal.sim.disk import DiskRates, SimDisk
from shoal.sim.trace import Trace
from shoal.storage import LogConfig, PartitionLog, StorageError

T0 = 1_700_000_000_000


def _disk(**rates: float) -> SimDisk:
    base = dict(write_error=0.0, fsync_error=0.0, keep_unsynced=0.0, zeros=0.0)
    base.update(rates)
    return SimDisk(random.Random(7), Trace(), DiskRates(**base))


@pytest.fixture
def disk() -> Iterator[SimDisk]:
    d = _disk()
    fileio.set_disk(d)
    try:
        yield d
    finally:
        fileio.reset_disk()


def _write(path: Path, data: bytes, *, sync: bool) -> None:
    fd = fileio.open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        fileio.write_all(fd, data)
        if sync:
            fileio.fsync(fd)
    finally:
        fileio.close(fd)


def _cut(disk: SimDisk) -> None:
    disk.power_off()
    disk.power_cut()


def test_a_power_cut_keeps_only_what_was_synced(disk: SimDisk, tmp_path: Path) -> None:
    path = tmp_path / "f"
    _write(path, b"synced", sync=True)
    _write(path, b"-lost", sync=False)
    assert path.read_bytes() == b"synced-lost"  # the page cache reads back everything
    _cut(disk)
    assert path.read_bytes() == b"synced"


def test_overwrites_and_truncation_since_the_sync_are_undone(disk: SimDisk, tmp_path: Path) -> None:
    path = tmp_path / "f"
    _write(path, b"0123456789", sync=True)
    fd = fileio.open_fd(path, os.O_RDWR)
    fileio.pwrite(fd, b"xx", 2)
    fileio.ftruncate(fd, 5)
    fileio.pwrite(fd, b"yyy", 5)
    fileio.close(fd)
    assert path.read_bytes() == b"01xx4yyy"
    _cut(disk)
    assert path.read_bytes() == b"0123456789"


def test_rename_of_an_unsynced_file_comes_back_empty(disk: SimDisk, tmp_path: Path) -> None:
    path = tmp_path / "snapshot"
    fileio.replace_file(path, b"old", fsync=True)
    fileio.replace_file(path, b"new", fsync=False)
    _cut(disk)
    assert path.read_bytes() == b""  # the rename is durable, the data was not: ext4's zero-length file
    fileio.replace_file(path, b"newer", fsync=True)
    _cut(disk)
    assert path.read_bytes() == b"newer"


def test_nothing_lands_while_the_power_is_off(disk: SimDisk, tmp_path: Path) -> None:
    path = tmp_path / "f"
    _write(path, b"kept", sync=True)
    disk.power_off()
    _write(path, b"never", sync=True)
    fileio.write_bytes(tmp_path / "marker", b"")
    fileio.unlink(path)
    disk.power_cut()
    assert path.read_bytes() == b"kept"
    assert not (tmp_path / "marker").exists()


def test_a_torn_tail_keeps_a_prefix_or_zeros(tmp_path: Path) -> None:
    for zeros in (0.0, 1.0):
        disk = _disk(keep_unsynced=1.0, zeros=zeros)
        fileio.set_disk(disk)
        try:
            path = tmp_path / f"f{zeros}"
            _write(path, b"head", sync=True)
            _write(path, b"abcdefgh", sync=False)
            _cut(disk)
        finally:
            fileio.reset_disk()
        data = path.read_bytes()
        assert data.startswith(b"head") and 4 < len(data) <= 12
        tail = data[4:]
        assert tail == (bytes(len(tail)) if zeros else b"abcdefgh"[:len(tail)])


def _batch(i: int) -> bytearray:
    return bytearray(build_batch([(T0, b"k", f"value-{i}".encode(), [])]))


def _values(log: PartitionLog) -> list[bytes]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        buf = log.read(offset, 1 << 20)
        for h in rb.iter_batches(buf):
            out += [bytes(r.value or b"") for r in rb.iter_records(buf, h)]
            offset = h.last_offset + 1
    return out


def test_a_log_recovers_from_every_torn_tail(tmp_path: Path) -> None:
    """Five synced appends, three unsynced, a power cut keeping any prefix (or zeros) of the three:
    the log reopens with the five and a whole-batch prefix of the rest, dense, no error."""
    for seed in range(40):
        disk = SimDisk(random.Random(seed), Trace(), DiskRates(write_error=0, fsync_error=0, keep_unsynced=1.0,
                                                                zeros=0.3 if seed % 2 else 0.0))
        fileio.set_disk(disk)
        try:
            d = tmp_path / f"t-{seed}" / "topic-0"
            log = PartitionLog(d, LogConfig(), now_ms=T0)
            for i in range(5):
                log.append(_batch(i), T0)
            log.flush(T0)
            for i in range(5, 8):
                log.append(_batch(i), T0)
            disk.power_off()
            log.close()  # the dying process's snapshot, fsync and marker never land
            disk.power_cut()
            log = PartitionLog(d, LogConfig(), now_ms=T0)
            values = _values(log)
            assert values[:5] == [f"value-{i}".encode() for i in range(5)]
            assert values == [f"value-{i}".encode() for i in range(len(values))] and len(values) <= 8
            assert log.log_end_offset == len(values)
            log.append(_batch(99), T0)  # and it takes appends again where it ends
            assert _values(log)[-1] == b"value-99"
            log.close()
        finally:
            fileio.reset_disk()


class _FailingDisk:
    """The real disk, failing the next pwrite or fdatasync of a ``.log`` file on demand."""

    def __init__(self) -> None:
        self.fail_write: int | None = None
        self.fail_sync = False

    def __getattr__(self, name: str) -> object:
        return getattr(fileio.OS_DISK, name)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        if self.fail_write is not None:
            part, self.fail_write = self.fail_write, None
            os.pwrite(fd, memoryview(data)[:part], offset)
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.pwrite(fd, data, offset)

    def fdatasync(self, fd: int) -> None:
        if self.fail_sync:
            raise OSError(errno.EIO, "Input/output error")
        os.fdatasync(fd)


def test_a_failed_append_leaves_the_log_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failing = _FailingDisk()
    monkeypatch.setattr(fileio, "_disk", failing)
    log = PartitionLog(tmp_path / "topic-0", LogConfig(), now_ms=T0)
    log.append(_batch(0), T0)
    failing.fail_write = 20  # part of the batch reaches the file, then ENOSPC
    with pytest.raises(StorageError) as e:
        log.append(_batch(1), T0)
    assert e.value.error_code == 56  # KAFKA_STORAGE_ERROR: the producer retries
    assert not log.offline and log.log_end_offset == 1
    log.append(_batch(2), T0)  # space again: the retry lands right after the last good batch
    assert _values(log) == [b"value-0", b"value-2"]
    log.close()
    log = PartitionLog(tmp_path / "topic-0", LogConfig(), now_ms=T0)
    assert _values(log) == [b"value-0", b"value-2"]
    log.close()


def test_a_failed_fsync_takes_the_log_offline_until_reopened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failing = _FailingDisk()
    monkeypatch.setattr(fileio, "_disk", failing)
    d = tmp_path / "topic-0"
    log = PartitionLog(d, LogConfig(flush_interval_messages=1), now_ms=T0)
    log.append(_batch(0), T0)
    failing.fail_sync = True
    with pytest.raises(StorageError):
        log.append(_batch(1), T0)
    assert log.offline and log.high_watermark == 1  # never exposed what was not synced
    failing.fail_sync = False
    with pytest.raises(StorageError):
        log.append(_batch(2), T0)
    with pytest.raises(StorageError):
        log.read(0, 1 << 20)
    log.close()
    assert not (d / ".clean-shutdown").exists()  # the next open checks the active segment's CRCs
    log = PartitionLog(d, LogConfig(flush_interval_messages=1), now_ms=T0)
    # the record whose fsync failed was cut, though the OS would still have read it back: a restart
    # of the process alone (no power cut) must not serve what was never synced (simulator seed 423)
    assert not log.offline and _values(log) == [b"value-0"]
    log.close()


def test_recovery_keeps_the_aborted_index_it_rebuilds_before_its_snapshot(disk: SimDisk, tmp_path: Path) -> None:
    """Recovery replays the log to rebuild producer state and the aborted-transaction index, then
    writes a snapshot that makes the next recovery skip the replay. A power cut right after must not
    leave the snapshot without the index entries (simulator seed 1016: read_committed then
    delivered an aborted transaction's record)."""
    d = tmp_path / "txn-0"
    config = LogConfig(flush_interval_messages=1)
    log = PartitionLog(d, config, now_ms=T0)
    log.append(bytearray(build_batch([(T0, b"k", b"aborted", [])], producer_id=7, producer_epoch=0,
                                     base_sequence=0, is_transactional=True)), T0)
    log.append_marker(7, 0, 0, False, T0)
    for _ in range(2):  # crash, recover (replay + snapshot), crash again at once
        disk.power_off()
        log.close()
        disk.power_cut()
        log = PartitionLog(d, config, now_ms=T0)
    assert [(a.producer_id, a.first_offset) for a in log.aborted_transactions(0, log.log_end_offset)] == [(7, 0)]
    log.close()


def test_a_failed_fsync_at_close_closes_without_the_clean_marker(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    failing = _FailingDisk()
    monkeypatch.setattr(fileio, "_disk", failing)
    d = tmp_path / "topic-0"
    log = PartitionLog(d, LogConfig(), now_ms=T0)  # no flush policy: the only fsync is close's
    log.append(_batch(0), T0)
    failing.fail_sync = True
    log.close()  # no exception out of a shutdown
    assert log.offline and not (d / ".clean-shutdown").exists()
    failing.fail_sync = False
    log = PartitionLog(d, LogConfig(), now_ms=T0)  # recovered with CRC checks; nothing was cut
    assert _values(log) == [b"value-0"]
    log.close()
