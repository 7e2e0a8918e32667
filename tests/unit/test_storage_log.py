"""PartitionLog: append, read, indexes, rolling, recovery, retention, timestamps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shoal import fileio
from shoal.protocol import record_batch as rb
from shoal.protocol.record_encode import _assemble, build_batch
from shoal.storage import InvalidConfigError, LogConfig, OffsetOutOfRangeError, PartitionLog
from shoal.storage.log import CLEAN_SHUTDOWN_FILE

T0 = 1_700_000_000_000


def batch(n: int, ts: int = T0, *, key: bytes | None = b"k", size: int = 10, codec: int = 0) -> bytearray:
    return bytearray(
        build_batch(
            [(ts + i, key, bytes([65 + i % 26]) * size, None) for i in range(n)], compression=codec
        )
    )


def offsets_in(data: bytes | memoryview) -> list[int]:
    return [r.offset for _, r in rb.iter_all_records(data)]


def all_offsets(log: PartitionLog, start: int | None = None) -> list[int]:
    out: list[int] = []
    off = log.log_start_offset if start is None else start
    while off < log.log_end_offset:
        data = log.read(off, 1 << 20)
        recs = [o for o in offsets_in(data) if o >= off]
        if not recs:
            break
        out += recs
        off = rb.parse_header(data, 0).base_offset
        last = None
        for h in rb.iter_batches(data):
            last = h
        off = last.next_offset
    return out


def segment_files(d: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(suffix))


def test_append_assigns_offsets_in_place(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", LogConfig(), now_ms=T0)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    buf = batch(3) + batch(2)
    headers = rb.validate_batches(buf)
    info = log.append(buf, T0, headers=headers)
    assert (info.base_offset, info.last_offset, info.num_batches, info.num_records) == (0, 4, 2, 5)
    assert info.log_append_time == -1 and info.max_timestamp == T0 + 2
    assert [h.base_offset for h in rb.iter_batches(buf)] == [0, 3]  # buf was edited in place
    info = log.append(batch(4), T0)
    assert (info.base_offset, info.last_offset) == (5, 8)
    assert log.log_end_offset == 9 and log.high_watermark == 9
    assert offsets_in(log.read(0, 1 << 20)) == list(range(9))
    assert (tmp_path / "t-0" / "00000000000000000000.log").exists()
    log.close()


def test_log_append_time(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), now_ms=T0)
    info = log.append(batch(3, ts=5), T0 + 777)
    assert info.log_append_time == T0 + 777 and info.max_timestamp == T0 + 777
    data = bytes(log.read(0, 1000))
    (h,) = rb.validate_batches(data, client=False)
    assert h.timestamp_type == rb.LOG_APPEND_TIME
    assert [r.timestamp for r in rb.iter_records(data)] == [T0 + 777] * 3
    log.close()


def test_append_without_assigning_offsets(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", LogConfig(), now_ms=T0)
    b = bytearray(build_batch([(T0, b"a", b"1", None)], base_offset=10))
    log.append(b, T0, assign_offsets=False)
    assert log.log_end_offset == 11
    with pytest.raises(ValueError):
        log.append(
            bytearray(build_batch([(T0, b"a", b"1", None)], base_offset=5)), T0, assign_offsets=False
        )
    log.close()


def test_read_semantics(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", LogConfig(), now_ms=T0)
    sizes = []
    for _ in range(5):
        b = batch(4, size=100)
        sizes.append(len(b))
        log.append(b, T0)
    # whole batches from the batch holding the offset (it may start earlier)
    data = log.read(6, 1 << 20)
    assert offsets_in(data)[0] == 4
    # max_bytes cuts at batch boundaries
    data = log.read(0, sizes[0] + sizes[1] + 10)
    assert len(data) == sizes[0] + sizes[1]
    # min_one: one whole batch even if bigger than max_bytes
    data = log.read(0, 10)
    assert len(data) == sizes[0]
    assert log.read(0, 10, min_one=False) == b""
    # max_offset excludes batches reaching it
    assert offsets_in(log.read(0, 1 << 20, max_offset=8)) == list(range(8))
    assert offsets_in(log.read(0, 1 << 20, max_offset=9)) == list(range(8))
    assert log.read(8, 1 << 20, max_offset=8) == b""
    # end and out of range
    assert log.read(20, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    log.close()


def test_roll_by_size_and_index_lookups(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1500, index_interval_bytes=300)
    log = PartitionLog(tmp_path / "t-0", cfg, now_ms=T0)
    for i in range(60):
        log.append(batch(3, ts=T0 + i * 10, size=50), T0)
    logs = segment_files(tmp_path / "t-0", ".log")
    assert len(logs) > 5
    assert all(os.path.getsize(tmp_path / "t-0" / n) <= 1500 for n in logs)
    # file names are the base offsets of the segments
    bases = [int(n[:20]) for n in logs]
    assert bases[0] == 0 and bases == sorted(bases)
    assert [s.base_offset for s in log.segments] == bases
    assert os.path.getsize(tmp_path / "t-0" / segment_files(tmp_path / "t-0", ".index")[0]) > 0
    # every offset is readable and reads start at the right batch
    for off in range(0, 180, 7):
        data = log.read(off, 200)
        first = offsets_in(data)
        assert first[0] <= off <= first[-1]
    assert all_offsets(log) == list(range(180))
    # index entries point at batch starts
    seg = log.segments[0]
    for rel, pos in zip(seg.offset_index.rel_offsets, seg.offset_index.positions, strict=True):
        h = rb.parse_header(os.pread(seg.fd, rb.HEADER_SIZE, pos))
        assert h.last_offset == seg.base_offset + rel
    log.close()


def test_roll_by_time(tmp_path: Path) -> None:
    cfg = LogConfig(segment_ms=1000)
    log = PartitionLog(tmp_path / "t-0", cfg, now_ms=T0)
    log.append(batch(1, ts=T0), T0)
    log.append(batch(1, ts=T0 + 500), T0 + 500)
    assert len(log.segments) == 1
    log.append(batch(1, ts=T0 + 1500), T0 + 1500)  # record time 1500 ms after the first batch
    assert len(log.segments) == 2 and log.segments[1].base_offset == 2
    # without timestamps (-1) the segment's creation time counts
    log2 = PartitionLog(tmp_path / "u-0", cfg, now_ms=T0)
    log2.append(batch(1, ts=-1), T0)
    log2.append(batch(1, ts=-1), T0 + 900)
    assert len(log2.segments) == 1
    log2.append(batch(1, ts=-1), T0 + 1001)
    assert len(log2.segments) == 2
    log.close()
    log2.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=800, index_interval_bytes=200)
    log = PartitionLog(tmp_path / "t-0", cfg, now_ms=T0)
    # record i has timestamp T0 + 10*i, 4 records per batch, compressed
    for b in range(40):
        recs = [(T0 + 10 * (b * 4 + j), b"k", b"x" * 40, None) for j in range(4)]
        log.append(bytearray(build_batch(recs, compression=1)), T0)
    assert len(log.segments) > 3
    for target in (T0 - 100, T0, T0 + 1, T0 + 10 * 37, T0 + 10 * 37 + 5, T0 + 10 * 159):
        expected_i = max(0, -(-(target - T0) // 10))
        assert log.offset_for_timestamp(target) == (expected_i, T0 + 10 * expected_i)
    assert log.offset_for_timestamp(T0 + 10 * 159 + 1) is None
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(-1) == (160, -1)
    assert log.offset_for_timestamp(-3) == (159, T0 + 1590)
    log.close()


def test_offset_for_timestamp_out_of_order_timestamps(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", LogConfig(index_interval_bytes=1), now_ms=T0)
    for ts in (100, 300, 200, 250, 400):
        log.append(bytearray(build_batch([(ts, None, b"v", None)])), T0)
    assert log.offset_for_timestamp(150) == (1, 300)
    assert log.offset_for_timestamp(201) == (1, 300)
    assert log.offset_for_timestamp(350) == (4, 400)
    log.close()


def test_reopen_after_clean_close(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=2000, index_interval_bytes=100)
    log = PartitionLog(d, cfg, now_ms=T0)
    for i in range(30):
        log.append(batch(2, ts=T0 + i), T0)
    log.close()
    assert (d / CLEAN_SHUTDOWN_FILE).exists()
    log = PartitionLog(d, cfg, now_ms=T0)
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()
    assert log.log_end_offset == 60 and log.recovered_bytes_truncated == 0
    assert all_offsets(log) == list(range(60))
    assert log.offset_for_timestamp(T0 + 29) == (57, T0 + 29)
    info = log.append(batch(1), T0)
    assert info.base_offset == 60
    log.close()


def test_recovery_truncates_torn_tail(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog(d, LogConfig(index_interval_bytes=50), now_ms=T0)
    for _ in range(10):
        log.append(batch(3, size=30), T0)
    good_size = log.active_segment.size
    log.append(batch(3, size=30), T0)
    full_size = log.active_segment.size
    # simulate kill -9 during a write: no close(), tail cut mid-batch
    for seg in log.segments:
        seg.close()
    path = d / "00000000000000000000.log"
    os.truncate(path, good_size + (full_size - good_size) // 2)
    log = PartitionLog(d, LogConfig(index_interval_bytes=50), now_ms=T0)
    assert log.log_end_offset == 30
    assert log.recovered_bytes_truncated == (full_size - good_size) // 2
    assert os.path.getsize(path) == good_size
    assert all_offsets(log) == list(range(30))
    assert log.append(batch(1), T0).base_offset == 30
    log.close()


def test_recovery_drops_garbage_and_corrupt_batch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog(d, LogConfig(), now_ms=T0)
    for _ in range(5):
        log.append(batch(2), T0)
    size = log.active_segment.size
    for seg in log.segments:
        seg.close()
    path = d / "00000000000000000000.log"
    with open(path, "ab") as f:
        f.write(os.urandom(1000))
    log = PartitionLog(d, LogConfig(), now_ms=T0)
    assert log.log_end_offset == 10 and os.path.getsize(path) == size
    # flip a byte inside the last batch: the CRC check drops it
    last_len = len(batch(2))
    for seg in log.segments:
        seg.close()
    with open(path, "r+b") as f:
        f.seek(size - 3)
        f.write(b"\xff")
    log = PartitionLog(d, LogConfig(), now_ms=T0)
    assert log.log_end_offset == 8 and os.path.getsize(path) == size - last_len
    log.close()


def test_rebuilds_deleted_and_corrupt_indexes(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=3000, index_interval_bytes=200)
    log = PartitionLog(d, cfg, now_ms=T0)
    for i in range(50):
        log.append(batch(2, ts=T0 + i * 100, size=40), T0)
    expected_index = {s.base_offset: list(s.offset_index.positions) for s in log.segments}
    log.close()
    idx = segment_files(d, ".index")
    tidx = segment_files(d, ".timeindex")
    (d / idx[0]).unlink()  # missing
    with open(d / idx[1], "ab") as f:
        f.write(b"\x00\x00\x00")  # not a multiple of the entry size
    with open(d / idx[2], "r+b") as f:  # non-monotonic
        f.write(b"\x7f\xff\xff\xff")
    (d / tidx[0]).unlink()
    log = PartitionLog(d, cfg, now_ms=T0)
    got = {s.base_offset: list(s.offset_index.positions) for s in log.segments}
    assert got == expected_index
    assert all_offsets(log) == list(range(100))
    assert log.offset_for_timestamp(T0 + 2000) == (40, T0 + 2000)
    assert log.segments[0].max_timestamp > 0
    log.close()


def test_retention_by_time(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=800, retention_ms=10_000)
    log = PartitionLog(tmp_path / "t-0", cfg, now_ms=T0)
    for i in range(30):
        log.append(batch(2, ts=T0 + i * 1000, size=50), T0 + i * 1000)
    n_before = len(log.segments)
    assert n_before > 4
    now = T0 + 29_000
    deleted = log.enforce_retention(now)
    assert deleted > 0 and len(log.segments) == n_before - deleted
    first = log.segments[0]
    assert log.log_start_offset == first.base_offset
    # everything older than retention is gone; what stays is not all expired
    assert now - first.largest_timestamp() <= 10_000
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    # the active segment is never deleted
    assert log.enforce_retention(now + 10**9) >= 0
    assert len(log.segments) == 1 and log.log_end_offset == 60
    assert log.log_start_offset == log.segments[0].base_offset
    log.close()


def test_retention_by_size(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=-1)
    log = PartitionLog(tmp_path / "t-0", cfg, now_ms=T0)
    for _ in range(40):
        log.append(batch(2, size=50), T0)
    assert log.size_bytes > 2500
    log.enforce_retention(T0 + 10**12)
    assert log.size_bytes <= 2500 + max(s.size for s in log.segments)
    assert log.size_bytes - log.segments[0].size < 2500
    assert log.log_start_offset == log.segments[0].base_offset
    log.close()
    # retention state survives a restart
    log = PartitionLog(tmp_path / "t-0", cfg, now_ms=T0)
    assert log.log_start_offset == log.segments[0].base_offset > 0
    log.close()


def test_compact_policy_skips_delete_retention(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=500, retention_ms=1, cleanup_policy="compact")
    log = PartitionLog(tmp_path / "t-0", cfg, now_ms=T0)
    for _ in range(10):
        log.append(batch(2), T0)
    assert log.enforce_retention(T0 + 10**9) == 0
    log.close()


def test_delete_records(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=1000)
    log = PartitionLog(d, cfg, now_ms=T0)
    for _ in range(30):
        log.append(batch(2, size=50), T0)
    n = len(log.segments)
    assert log.delete_records(31) == 31
    assert log.log_start_offset == 31 and len(log.segments) < n
    with pytest.raises(OffsetOutOfRangeError):
        log.read(30, 100)
    assert offsets_in(log.read(31, 100))[-1] >= 31
    assert log.offset_for_timestamp(0) == (31, T0 + 1)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(61)
    log.close()
    log = PartitionLog(d, cfg, now_ms=T0)
    assert log.log_start_offset == 31
    assert log.delete_records(-1) == 60
    log.close()


def test_flush_policy_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    class CountingDisk:  # the real disk, counting fdatasync (storage writes through shoal.fileio)
        def __getattr__(self, name: str) -> object:
            return getattr(fileio.OS_DISK, name)

        def fdatasync(self, fd: int) -> None:
            calls.append(fd)
            fileio.OS_DISK.fdatasync(fd)

    monkeypatch.setattr(fileio, "_disk", CountingDisk())
    log = PartitionLog(tmp_path / "a-0", LogConfig(flush_interval_messages=1), now_ms=T0)
    log.append(batch(1), T0)
    assert len(calls) == 1
    log.append(batch(1), T0)
    assert len(calls) == 2
    log.close()
    calls.clear()
    log = PartitionLog(tmp_path / "b-0", LogConfig(), now_ms=T0)
    for _ in range(5):
        log.append(batch(1), T0)
    assert calls == []  # default: page cache only
    log.close()
    assert len(calls) == 1  # close() fsyncs
    calls.clear()
    log = PartitionLog(tmp_path / "c-0", LogConfig(flush_interval_ms=1000), now_ms=T0)
    log.append(batch(1), T0 + 10)
    assert calls == []
    assert log.maybe_flush(T0 + 500) is False
    assert log.maybe_flush(T0 + 1000) is True and len(calls) == 1
    log.close()


def test_config_from_topic_configs() -> None:
    base = LogConfig()
    assert base.segment_bytes == 1073741824 and base.retention_ms == 604800000
    assert base.max_message_bytes == 1048588 and base.flush_interval_messages is None
    cfg = LogConfig.from_topic_configs(
        {
            "segment.bytes": "1048576",
            "retention.ms": "-1",
            "cleanup.policy": "delete,compact",
            "flush.messages": "1",
            "flush.ms": str((1 << 63) - 1),
            "message.timestamp.type": "LogAppendTime",
            "compression.type": "lz4",  # not ours: ignored
        },
        base,
    )
    assert cfg.segment_bytes == 1048576 and cfg.retention_ms == -1
    assert cfg.compact and cfg.delete and cfg.flush_interval_messages == 1 and cfg.flush_interval_ms is None
    assert cfg.log_append_time
    for bad in (
        {"segment.bytes": "abc"},
        {"segment.bytes": "1"},
        {"segment.bytes": str(1 << 31)},
        {"cleanup.policy": "shred"},
        {"message.timestamp.type": "Wallclock"},
        {"retention.ms": "-2"},
        {"flush.messages": "0"},
    ):
        with pytest.raises(InvalidConfigError):
            LogConfig.from_topic_configs(bad, base)


def test_offset_for_timestamp_survives_unparsable_records(tmp_path: Path) -> None:
    """A log written before produce validated records may hold a batch whose CRC holds but whose
    compressed records do not parse: timestamp lookups answer at batch granularity, not fail."""
    log = PartitionLog(tmp_path / "t-0", LogConfig(), now_ms=T0)
    log.append(batch(2, ts=T0), T0)
    bad = _assemble(b"\x00garbage" * 4, count=3, base_offset=0, last_offset_delta=2, base_timestamp=T0 + 100,
                    max_timestamp=T0 + 102, attributes=4, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                    partition_leader_epoch=-1)
    log.append(bytearray(bad), T0)
    log.append(batch(1, ts=T0 + 200), T0)
    assert log.offset_for_timestamp(T0 + 101) == (2, T0 + 102)
    assert log.offset_for_timestamp(-3) == (5, T0 + 200)
    assert log.offset_for_timestamp(T0 + 150) == (5, T0 + 200)
    log.close()


def test_open_segments_are_bounded_and_reopened_on_use(tmp_path: Path) -> None:
    """Thousands of partitions must not mean thousands of open files: past the pool's limit the
    least recently used segment is closed, and opened again when read or written."""
    from shoal.storage import file_pool

    pool = file_pool.POOL
    saved = pool.limit
    pool.limit = 8
    try:
        fds_before = len(os.listdir("/proc/self/fd"))
        logs = [PartitionLog(tmp_path / f"t-{i}", LogConfig(), now_ms=T0) for i in range(40)]
        for i, log in enumerate(logs):
            log.append(batch(2, ts=T0 + i), T0)
        assert len(os.listdir("/proc/self/fd")) - fds_before <= 8 * 4 + 4
        reopened = pool.reopened
        for i, log in enumerate(logs):  # every one readable and writable again
            assert offsets_in(log.read(0, 1 << 20)) == [0, 1]
            log.append(batch(1, ts=T0 + 100 + i), T0)
            assert log.log_end_offset == 3
        assert pool.reopened > reopened
        assert len(os.listdir("/proc/self/fd")) - fds_before <= 8 * 4 + 4
        for log in logs:
            log.close()
        again = PartitionLog(tmp_path / "t-7", LogConfig(), now_ms=T0)
        assert offsets_in(again.read(0, 1 << 20)) == [0, 1, 2]
        again.close()
    finally:
        pool.limit = saved
