"""Producer state in the log: idempotence, fencing, open transactions, the LSO, the aborted index,
snapshots and recovery (no sockets; the log driven directly)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from shoal.protocol import record_batch as rb
from shoal.protocol.errors import ErrorCode
from shoal.protocol.record_encode import build_batch
from shoal.storage import LogConfig, PartitionLog
from shoal.storage.producer_state import (
    AppendOrigin,
    CoordinatorFencedError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    list_snapshots,
)
from shoal.storage.txn_index import AbortedTxn

T0 = 1_700_000_000_000


def pbatch(pid: int, epoch: int, seq: int, n: int = 1, *, txn: bool = False, value: bytes = b"v",
           ts: int = T0) -> bytearray:
    return bytearray(build_batch([(ts, None, value + b"-%d" % i, None) for i in range(n)], producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq, is_transactional=txn))


def plain(n: int = 1, value: bytes = b"p") -> bytearray:
    return bytearray(build_batch([(T0, None, value + b"-%d" % i, None) for i in range(n)]))


def open_log(path: Path, **cfg) -> PartitionLog:
    return PartitionLog(path, LogConfig(**cfg), now_ms=T0)


# ---------------------------------------------------------------- idempotence


def test_duplicate_batches_get_their_first_offsets_back(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    infos = [log.append(pbatch(7, 0, seq * 2, 2), T0) for seq in range(6)]
    assert [i.base_offset for i in infos] == [0, 2, 4, 6, 8, 10]
    # The last five batches are remembered: a retry of any of them is not appended again.
    for i in range(1, 6):
        dup = log.append(pbatch(7, 0, i * 2, 2), T0)
        assert dup.duplicate and (dup.base_offset, dup.last_offset) == (i * 2, i * 2 + 1)
    assert log.log_end_offset == 12
    # The first batch fell out of the window: its retry is out of sequence.
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(7, 0, 0, 2), T0)
    log.close()


def test_sequence_rules(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(pbatch(1, 0, 42), T0)  # an unknown producer may start anywhere
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(1, 0, 44), T0)  # a gap
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(1, 1, 5), T0)  # a new epoch starts at 0
    log.append(pbatch(1, 1, 0), T0)
    with pytest.raises(InvalidProducerEpochError) as e:
        log.append(pbatch(1, 0, 43), T0)  # the old epoch is fenced
    assert e.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    # Sequences wrap from 2^31-1 to 0.
    log.append(pbatch(2, 0, 0x7FFFFFFF), T0)
    log.append(pbatch(2, 0, 0), T0)
    log.close()


def test_marker_fencing_and_epoch_bump(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(pbatch(5, 3, 0, txn=True), T0)
    with pytest.raises(InvalidTxnStateError):
        log.append(pbatch(5, 3, 1), T0)  # a plain write while its transaction is open
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(5, 2, 0, True, T0)  # a marker from an older producer epoch
    log.append_marker(5, 3, 4, False, T0)
    with pytest.raises(CoordinatorFencedError) as e:
        log.append_marker(5, 3, 3, True, T0)  # an older coordinator
    assert e.value.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # The same epoch keeps counting sequences across transactions.
    log.append(pbatch(5, 3, 1, txn=True), T0)
    log.append_marker(5, 3, 4, True, T0)
    # A marker with a bumped epoch fences the old epoch and restarts sequences at 0.
    log.append_marker(5, 4, 4, False, T0)
    with pytest.raises(InvalidProducerEpochError):
        log.append(pbatch(5, 3, 2, txn=True), T0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(5, 4, 2, txn=True), T0)
    log.append(pbatch(5, 4, 0, txn=True), T0)
    # A marker for a producer the partition never saw creates its entry (and fences older epochs).
    offset, completed = log.append_marker(99, 7, 4, False, T0)
    assert completed is None and log.producer_state.producers[99].epoch == 7
    log.close()


# ---------------------------------------------------------------- LSO and the aborted index


def test_last_stable_offset_and_aborted_index(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(plain(2), T0)                          # 0-1
    log.append(pbatch(1, 0, 0, 3, txn=True), T0)      # 2-4   P1 opens
    assert log.last_stable_offset == 2
    log.append(plain(1), T0)                          # 5
    log.append(pbatch(2, 0, 0, 2, txn=True), T0)      # 6-7   P2 opens
    assert log.last_stable_offset == 2
    off, done = log.append_marker(1, 0, 0, False, T0)  # 8     P1 aborts: LSO moves to P2's first offset
    assert off == 8 and done is not None and done.is_aborted and done.first_offset == 2
    assert log.last_stable_offset == 6
    assert log.active_segment.txn_index.entries == [AbortedTxn(1, 2, 8, 6)]
    log.append_marker(2, 0, 0, True, T0)              # 9     P2 commits
    assert log.last_stable_offset == log.high_watermark == 10
    # The aborted list of a read_committed fetch: only transactions overlapping the range.
    assert log.aborted_transactions(0, 10) == [AbortedTxn(1, 2, 8, 6)]
    assert log.aborted_transactions(9, 10) == []
    assert log.aborted_transactions(0, 2) == []
    # A second abort of P1 gets its own entry, with the LSO right after it.
    log.append(pbatch(1, 0, 3, 1, txn=True), T0)      # 10
    log.append_marker(1, 0, 0, False, T0)             # 11
    assert log.aborted_transactions(0, 12) == [AbortedTxn(1, 2, 8, 6), AbortedTxn(1, 10, 11, 12)]
    log.close()


def test_aborted_transaction_spanning_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    log.append(pbatch(1, 0, 0, 1, txn=True, value=b"x" * 100), T0)
    for _ in range(6):
        log.append(plain(1, b"y" * 100), T0)
    log.append(pbatch(1, 0, 1, 1, txn=True, value=b"x" * 100), T0)
    off, _ = log.append_marker(1, 0, 0, False, T0)
    assert len(log.segments) > 2
    # Fetching from a later segment still learns of the abort that started in the first one.
    second = log.segments[1].base_offset
    assert log.aborted_transactions(second, off + 1) == [AbortedTxn(1, 0, off, off + 1)]
    log.close()


def _read_committed(log: PartitionLog, max_bytes: int) -> list[bytes]:
    """What a read_committed consumer sees, fetching as the broker serves it and filtering as Kafka's
    client does (CompletedFetch): aborted producers' batches are skipped until their ABORT marker."""
    out: list[bytes] = []
    offset = log.log_start_offset
    while True:
        data, nxt = log.read_with_end(offset, max_bytes, max_offset=log.last_stable_offset)
        if nxt < 0:
            return out
        pending = sorted((a.first_offset, a.producer_id) for a in log.aborted_transactions(offset, nxt))
        aborted: set[int] = set()
        for h in rb.iter_batches(data):
            while pending and pending[0][0] <= h.last_offset:
                aborted.add(pending.pop(0)[1])
            if h.is_control:
                if rb.control_type(bytes(memoryview(data)[h.position:h.position + h.size])) == rb.CONTROL_ABORT:
                    aborted.discard(h.producer_id)
            elif not (h.is_transactional and h.producer_id in aborted):
                batch = bytes(memoryview(data)[h.position:h.position + h.size])
                out += [r.value for r in rb.iter_records(batch) if r.offset >= offset]
        offset = nxt


@pytest.mark.parametrize("seed", range(12))
def test_read_committed_sees_exactly_the_committed_records(tmp_path: Path, seed: int) -> None:
    """Random interleavings of producers committing and aborting, small segments, every fetch size:
    read_committed yields every committed and plain record in log order and no aborted one."""
    rng = random.Random(seed)
    log = open_log(tmp_path / "t-0", segment_bytes=rng.choice([300, 700, 1 << 20]))
    seqs = {pid: 0 for pid in (1, 2, 3)}
    open_txn: dict[int, list[bytes]] = {}
    expected: list[bytes] = []
    committed_order: list[tuple[int, bytes]] = []  # (offset, value) of records that end up visible
    pending_offsets: dict[int, list[tuple[int, bytes]]] = {}
    for step in range(120):
        pid = rng.choice([1, 2, 3])
        action = rng.random()
        if action < 0.15:
            v = b"plain-%d" % step
            info = log.append(plain(1, v), T0)
            committed_order.append((info.base_offset, v + b"-0"))
        elif action < 0.7 or pid not in open_txn:
            n = rng.randint(1, 3)
            v = b"p%d-s%d" % (pid, step)
            info = log.append(pbatch(pid, 0, seqs[pid], n, txn=True, value=v), T0)
            seqs[pid] += n
            open_txn.setdefault(pid, [])
            pending_offsets.setdefault(pid, []).extend(
                (info.base_offset + i, v + b"-%d" % i) for i in range(n))
        else:
            commit = rng.random() < 0.5
            log.append_marker(pid, 0, 0, commit, T0)
            if commit:
                committed_order.extend(pending_offsets.get(pid, []))
            open_txn.pop(pid, None)
            pending_offsets.pop(pid, None)
        lso = log.last_stable_offset
        firsts = [offs[0][0] for offs in pending_offsets.values() if offs]
        assert lso == (min(firsts) if firsts else log.high_watermark)
    expected = [v for o, v in sorted(committed_order) if o < log.last_stable_offset]
    for max_bytes in (1, 150, 1000, 1 << 20):
        assert _read_committed(log, max_bytes) == expected
    log.close()


# ---------------------------------------------------------------- snapshots and recovery


def _state(log: PartitionLog) -> dict:
    return {pid: (e.epoch, e.last_seq, e.coordinator_epoch, e.current_txn_first_offset)
            for pid, e in log.producer_state.producers.items()}


def _scenario(log: PartitionLog) -> None:
    log.append(pbatch(1, 0, 0, 2), T0)
    log.append(pbatch(2, 0, 0, 1, txn=True), T0)
    log.append(pbatch(3, 1, 0, 1, txn=True), T0)
    log.append_marker(3, 1, 2, False, T0)
    log.append(pbatch(1, 0, 2, 2), T0)


def test_clean_restart_keeps_producer_state(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    _scenario(log)
    before, lso, aborted = _state(log), log.last_stable_offset, log.aborted_transactions(0, 100)
    log.close()
    assert list_snapshots(tmp_path / "t-0") == [log.log_end_offset]
    log = open_log(tmp_path / "t-0")
    assert _state(log) == before and log.last_stable_offset == lso == 2
    assert log.aborted_transactions(0, 100) == aborted
    # Duplicate detection survives: the last batch is answered from memory, not appended.
    dup = log.append(pbatch(1, 0, 2, 2), T0)
    assert dup.duplicate
    # The open transaction of producer 2 survives too.
    with pytest.raises(InvalidTxnStateError):
        log.append(pbatch(2, 0, 1), T0)
    log.close()


def test_kill9_rebuilds_state_from_snapshot_and_log(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, segment_bytes=300)
    _scenario(log)
    for _ in range(5):
        log.append(pbatch(1, 0, log.producer_state.producers[1].last_seq + 1, 2), T0)
    before, lso = _state(log), log.last_stable_offset
    assert len(log.segments) > 1 and list_snapshots(d)  # rolls wrote snapshots
    # kill -9: no close, no clean-shutdown marker; files stay as the OS has them.
    for seg in log.segments:
        seg.offset_index.flush()
        seg.time_index.flush()
    log2 = open_log(d, segment_bytes=300)
    assert _state(log2) == before and log2.last_stable_offset == lso
    assert log2.aborted_transactions(0, 1000) == [AbortedTxn(3, 3, 4, 2)]
    log2.close()


def test_torn_tail_is_not_in_the_rebuilt_state(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d)
    log.append(pbatch(1, 0, 0, 1, txn=True), T0)
    log.append_marker(1, 0, 0, True, T0)
    log.append(pbatch(1, 0, 1, 1, txn=True), T0)  # a second transaction, torn below
    size = log.active_segment.size
    log.active_segment.offset_index.flush()
    os.truncate(d / "00000000000000000000.log", size - 5)
    log2 = open_log(d)
    assert log2.log_end_offset == 2
    assert log2.last_stable_offset == 2 and log2.producer_state.producers[1].current_txn_first_offset == -1
    # Its sequence is the last one that survived: the torn batch may be retried.
    log2.append(pbatch(1, 0, 1, 1, txn=True), T0)
    log2.close()


def test_snapshot_ahead_of_log_or_corrupt_is_dropped(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d)
    _scenario(log)
    before = _state(log)
    log.close()
    (d / "00000000000000000000.snapshot").write_bytes(b"garbage")
    (d / "00000000000000009999.snapshot").write_bytes(ProducerStateManager().encode_snapshot())
    (d / ".clean-shutdown").unlink()  # as after a crash
    newest = list_snapshots(d)[-2]
    (d / f"{newest:020d}.snapshot").write_bytes(b"\x00\x01corrupt")
    log = open_log(d)
    assert _state(log) == before  # rebuilt from the whole log
    assert 9999 not in list_snapshots(d)
    log.close()


def test_producer_expiry_spares_open_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", producer_id_expiration_ms=1000)
    log.append(pbatch(1, 0, 0, 1), T0)
    log.append(pbatch(2, 0, 0, 1, txn=True), T0)
    assert log.expire_producers(T0 + 999) == 0
    assert log.expire_producers(T0 + 1000) == 1
    assert set(log.producer_state.producers) == {2}
    log.close()
    log = PartitionLog(tmp_path / "t-0", LogConfig(producer_id_expiration_ms=1000), now_ms=T0 + 10_000)
    assert set(log.producer_state.producers) == {2}
    log.close()


# ---------------------------------------------------------------- compaction


def keyed(key: bytes, value: bytes | None, pid: int = -1, seq: int = -1, txn: bool = False) -> bytearray:
    return bytearray(build_batch([(T0, key, value, None)], producer_id=pid, producer_epoch=0,
                                 base_sequence=seq, is_transactional=txn))


def _values(log: PartitionLog) -> list[tuple[bytes, bytes | None]]:
    out = []
    for seg in log.segments:
        for h, data in seg.iter_batches():
            if not h.is_control:
                out += [(r.key, r.value) for r in rb.iter_records(data, h)]
    return out


def test_compaction_drops_aborted_records_and_stops_at_open_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0", cleanup_policy="compact", segment_bytes=200)
    log.append(keyed(b"k", b"committed"), T0)
    log.append(keyed(b"k", b"aborted", pid=1, seq=0, txn=True), T0)
    log.append_marker(1, 0, 0, False, T0)
    log.append(keyed(b"j", b"open", pid=2, seq=0, txn=True), T0)   # undecided: cleaning stops here
    log.append(keyed(b"j", b"later"), T0)
    for i in range(4):
        log.append(keyed(b"z", b"%d" % i), T0)
    log.compact(T0)
    values = _values(log)
    assert (b"k", b"committed") in values and (b"k", b"aborted") not in values
    assert (b"j", b"open") in values and (b"j", b"later") in values
    # The ABORT marker and its index entry stay.
    assert any(e.producer_id == 1 for s in log.segments for e in s.txn_index.entries)
    log.close()


def test_coordinator_origin_checks_epoch_only(tmp_path: Path) -> None:
    log = open_log(tmp_path / "c-0")
    log.append(keyed(b"k", b"v", pid=4, seq=-1, txn=True), T0, origin=AppendOrigin.COORDINATOR)
    log.append(keyed(b"k", b"w", pid=4, seq=-1, txn=True), T0, origin=AppendOrigin.COORDINATOR)
    log.append_marker(4, 1, 0, True, T0)
    with pytest.raises(InvalidProducerEpochError):
        log.append(keyed(b"k", b"x", pid=4, seq=-1, txn=True), T0, origin=AppendOrigin.COORDINATOR)
    log.close()
