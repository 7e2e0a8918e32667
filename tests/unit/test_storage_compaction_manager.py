"""Log compaction and the LogManager."""

from __future__ import annotations

from pathlib import Path

from shoal.protocol import record_batch as rb
from shoal.protocol.record_encode import build_batch
from shoal.storage import LogConfig, LogManager, PartitionLog

T0 = 1_700_000_000_000
DAY = 86_400_000


def keyed(pairs: list[tuple[bytes | None, bytes | None]], ts: int = T0, codec: int = 0) -> bytearray:
    return bytearray(build_batch([(ts, k, v, None) for k, v in pairs], compression=codec))


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for seg in log.segments:
        for h, data in seg.iter_batches():
            if h.is_control:
                continue
            out += [(r.offset, r.key, r.value) for r in rb.iter_records(data, h)]
    return out


def test_compaction_keeps_latest_per_key(tmp_path: Path) -> None:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=400)
    log = PartitionLog(tmp_path / "c-0", cfg, now_ms=T0)
    expected_latest: dict[bytes, tuple[int, bytes]] = {}
    off = 0
    for round_ in range(6):
        pairs = [(f"k{i}".encode(), f"v{round_}-{i}".encode()) for i in range(4)]
        log.append(keyed(pairs, codec=round_ % 3), T0)
        for k, v in pairs:
            expected_latest[k] = (off, v)
            off += 1
    log.append(keyed([(None, b"nokey")]), T0)  # null key: kept
    assert len(log.segments) > 2
    leo = log.log_end_offset
    before = records(log)
    removed = log.compact(T0)
    after = records(log)
    assert removed > 0 and len(after) == len(before) - removed
    assert log.log_end_offset == leo
    # offsets are unchanged and still increasing
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in after)
    assert set(after) <= set(before)
    # per key, only the latest survives in cleaned segments; the latest is always there
    for k, (o, v) in expected_latest.items():
        kept = [(ro, rv) for ro, rk, rv in after if rk == k]
        assert kept[-1] == (o, v)
        active_base = log.active_segment.base_offset
        assert all(ro >= active_base for ro, _ in kept[:-1])
    assert (24, None, b"nokey") in after
    # batches keep their offset ranges; reads from any surviving offset work
    for o, _, _ in after:
        data = log.read(o, 1 << 20)
        assert o in [r.offset for _, r in rb.iter_all_records(data)]
    # read from an offset that was compacted away returns the next batch
    gone = sorted(set(range(leo)) - {o for o, _, _ in after})
    assert gone
    data = log.read(gone[0], 1 << 20)
    assert all(r.offset > gone[0] or r.offset < gone[0] for _, r in rb.iter_all_records(data))
    # a second pass with nothing new removes nothing and rewrites nothing
    assert log.compact(T0) == 0
    log.close()
    # the cleaned log reopens intact (indexes were swapped with the log)
    log = PartitionLog(tmp_path / "c-0", cfg, now_ms=T0)
    assert records(log) == after
    assert not [p for p in (tmp_path / "c-0").iterdir() if p.name.endswith(".cleaned")]
    log.close()


def test_tombstones_kept_then_dropped(tmp_path: Path) -> None:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=200, delete_retention_ms=DAY)
    log = PartitionLog(tmp_path / "c-0", cfg, now_ms=T0)
    log.append(keyed([(b"a", b"1"), (b"b", b"1")], ts=T0), T0)
    log.append(keyed([(b"a", None)], ts=T0), T0)  # tombstone for a
    for i in range(6):
        log.append(keyed([(b"c", str(i).encode())], ts=T0), T0)
    assert len(log.segments) > 2
    log.compact(T0 + 1000)
    recs = records(log)
    assert (0, b"a", b"1") not in recs  # superseded by the tombstone
    assert (2, b"a", None) in recs  # tombstone still within delete.retention.ms
    assert (1, b"b", b"1") in recs
    log.append(keyed([(b"d", b"x")], ts=T0), T0)
    log.compact(T0 + DAY + 10_000)
    recs = records(log)
    assert all(k != b"a" for _, k, _ in recs)  # tombstone dropped after delete.retention.ms
    assert (1, b"b", b"1") in recs
    log.close()


def test_min_compaction_lag(tmp_path: Path) -> None:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=150, min_compaction_lag_ms=60_000)
    log = PartitionLog(tmp_path / "c-0", cfg, now_ms=T0)
    for i in range(6):
        log.append(keyed([(b"k", str(i).encode())], ts=T0), T0)
    assert log.compact(T0 + 1000) == 0
    assert log.compact(T0 + 120_000) > 0
    log.close()


def test_compaction_of_committed_transaction_and_its_marker(tmp_path: Path) -> None:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=300, delete_retention_ms=60_000)
    log = PartitionLog(tmp_path / "c-0", cfg, now_ms=T0)
    txn = bytearray(
        build_batch(
            [(T0, b"k", b"txn", None)],
            producer_id=3,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        )
    )
    log.append(txn, T0)
    log.append_marker(3, 0, 0, True, T0)
    for i in range(6):
        log.append(keyed([(b"k", str(i).encode())], ts=T0), T0)
    # The committed record is superseded like any other; its COMMIT marker stays
    # until the delete horizon has passed.
    log.compact(T0)
    kinds = [(h.is_transactional, h.is_control) for s in log.segments for h, _ in s.iter_batches()]
    assert kinds[0] == (True, True)
    assert (0, b"k", b"txn") not in records(log)
    log.compact(T0 + 120_000)
    kinds = [(h.is_transactional, h.is_control) for s in log.segments for h, _ in s.iter_batches()]
    assert (True, True) not in kinds
    log.close()


def test_log_manager_create_load_delete(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    mgr = LogManager(dirs, LogConfig())
    a0 = mgr.get_or_create("my-topic", 0)
    a1 = mgr.get_or_create("my-topic", 1)
    b0 = mgr.get_or_create("other", 0, LogConfig(cleanup_policy="compact"))
    assert mgr.get_or_create("my-topic", 0) is a0
    assert {a0.dir.parent, a1.dir.parent} == set(dirs)  # spread over log dirs
    assert a0.dir.name == "my-topic-0" and b0.config.compact
    a0.append(keyed([(b"x", b"1")]), T0)
    b0.append(keyed([(b"y", b"2")]), T0)
    assert mgr.get("nope", 0) is None
    assert set(mgr.logs()) == {("my-topic", 0), ("my-topic", 1), ("other", 0)}
    mgr.flush_all()
    mgr.close()

    mgr = LogManager(dirs, LogConfig())
    loaded = mgr.load_existing(lambda t: LogConfig(cleanup_policy="compact") if t == "other" else None)
    assert sorted(loaded) == [("my-topic", 0), ("my-topic", 1), ("other", 0)]
    assert mgr.get("my-topic", 0).log_end_offset == 1
    assert mgr.get("other", 0).config.compact
    assert mgr.delete_topic("my-topic") == 2
    assert mgr.get("my-topic", 0) is None
    assert not any((d / "my-topic-0").exists() or (d / "my-topic-1").exists() for d in dirs)
    assert mgr.get("other", 0) is not None
    mgr.close()


def test_log_manager_run_periodic(tmp_path: Path) -> None:
    mgr = LogManager([tmp_path], LogConfig())
    deleting = mgr.get_or_create("del", 0, LogConfig(segment_bytes=300, retention_ms=1000))
    compacting = mgr.get_or_create("cmp", 0, LogConfig(segment_bytes=300, cleanup_policy="compact"))
    flushing = mgr.get_or_create("fl", 0, LogConfig(flush_interval_ms=100), now_ms=T0)
    for i in range(8):
        deleting.append(keyed([(b"k", b"v" * 20)], ts=T0 + i), T0)
        compacting.append(keyed([(b"k", str(i).encode())]), T0)
    flushing.append(keyed([(b"k", b"v")]), T0)
    stats = mgr.run_periodic(T0 + 10_000)
    assert stats["segments_deleted"] > 0 and stats["records_compacted"] > 0 and stats["logs_flushed"] == 1
    assert len(deleting.segments) == 1
    assert mgr.run_periodic(T0 + 10_000)["records_compacted"] == 0  # nothing new since
    mgr.close()


def test_cleaning_waits_for_the_dirty_ratio_or_the_max_lag(tmp_path: Path) -> None:
    """As Kafka's LogCleanerManager: a compacted log is cleaned once the dirty share of its closed
    segments reaches min.cleanable.dirty.ratio, or once dirty data waited max.compaction.lag.ms."""
    mgr = LogManager([tmp_path], LogConfig())
    lazy = mgr.get_or_create("lazy", 0, LogConfig(segment_bytes=300, cleanup_policy="compact",
                                                  min_cleanable_dirty_ratio=0.9))
    for i in range(30):
        lazy.append(keyed([(b"k%d" % (i % 20), b"v")]), T0)
    assert lazy.needs_compaction(T0) and mgr.run_periodic(T0)["records_compacted"] == 10  # all of it dirty
    clean = len(records(lazy))
    for _ in range(4):  # one more closed segment, dirty, a small share of the log
        lazy.append(keyed([(b"k0", b"x")]), T0)
    assert len(lazy.segments) >= 4 and not lazy.needs_compaction(T0)
    assert mgr.run_periodic(T0)["records_compacted"] == 0 and len(records(lazy)) == clean + 4

    eager = LogConfig(segment_bytes=300, cleanup_policy="compact", min_cleanable_dirty_ratio=0.9,
                      max_compaction_lag_ms=60_000)
    mgr.update_topic_config("lazy", eager)
    assert not lazy.needs_compaction(T0 + 30_000)
    assert lazy.needs_compaction(T0 + 61_000)  # the dirty segment waited past the max lag
    assert mgr.run_periodic(T0 + 61_000)["records_compacted"] > 0
    assert not lazy.needs_compaction(T0 + 61_000)
    mgr.close()


def test_a_log_that_cannot_be_cleaned_further_is_not_rescanned(tmp_path: Path) -> None:
    """Segments younger than min.compaction.lag.ms are not cleanable: the cleaner's pass stops
    there and the log is not due again until they age (no full rescan every housekeeping tick)."""
    log = PartitionLog(tmp_path / "c-0", LogConfig(segment_bytes=300, cleanup_policy="compact",
                                                   min_compaction_lag_ms=60_000), now_ms=T0)
    for i in range(12):
        log.append(keyed([(b"k", str(i).encode())], ts=T0 + i * 10_000), T0 + i * 10_000)
    now = T0 + 100_000  # the first segment aged past the lag, the second did not
    assert log.needs_compaction(now) and log.compact(now) > 0
    assert not log.needs_compaction(now)
    assert log.needs_compaction(now + 200_000)  # once every closed segment has aged
