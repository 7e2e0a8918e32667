"""The share-partition state machine (KIP-932): acquisition, acknowledgement, locks, persistence."""

from __future__ import annotations

import random

import pytest

from shoal.broker.share.partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRange,
    RecordState,
    SharePartition,
    StateBatch,
)
from shoal.protocol.errors import ErrorCode

A, R, X, G, N = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.GAP,
    AcknowledgeType.RENEW,
)
LOCK = 30_000


def snapshot(sp: SharePartition) -> tuple:
    return (sp.start_offset, sp.end_offset, tuple(sp.in_flight()), sp.version)


def state(sp: SharePartition, offset: int) -> tuple[RecordState, int, str | None] | None:
    rec = sp.record(offset)
    return None if rec is None else (rec.state, rec.delivery_count, rec.member_id)


# ---------------------------------------------------------------- acquisition


def test_acquire_new_records_in_order_and_max_records() -> None:
    sp = SharePartition(0)
    got = sp.acquire("m1", [(0, 9)], 4, now_ms=1000)
    assert got == [AcquiredRange(0, 3, 1)]
    assert sp.end_offset == 4 and sp.start_offset == 0
    assert state(sp, 2) == (RecordState.ACQUIRED, 1, "m1")
    assert sp.record(2).deadline_ms == 1000 + LOCK
    got = sp.acquire("m2", [(4, 9)], 100, now_ms=1000)
    assert got == [AcquiredRange(4, 9, 1)]
    assert sp.end_offset == 10
    assert sp.fetch_offset() == 10


def test_acquire_redeliveries_first_then_new_records() -> None:
    sp = SharePartition(0)
    sp.acquire("m1", [(0, 9)], 10, now_ms=0)
    assert sp.acknowledge("m1", [(2, 3, [R])], now_ms=1) == ErrorCode.NONE
    assert sp.fetch_offset() == 2
    got = sp.acquire("m2", [(2, 14)], 5, now_ms=2)
    # 2-3 again (second delivery), then three new records.
    assert got == [AcquiredRange(2, 3, 2), AcquiredRange(10, 12, 1)]
    assert sp.end_offset == 13


def test_acquire_skips_gaps_and_passes_end_over_them() -> None:
    sp = SharePartition(0)
    got = sp.acquire("m1", [(0, 1), (5, 6)], 10, now_ms=0)
    assert got == [AcquiredRange(0, 1, 1), AcquiredRange(5, 6, 1)]
    assert sp.end_offset == 7
    assert sp.record(3) is None
    assert sp.in_flight_count() == 4
    # The gap 2-4 does not hold the start offset back once 0-1 are done.
    assert sp.acknowledge("m1", [(0, 1, [A])], now_ms=1) == ErrorCode.NONE
    assert sp.start_offset == 5


def test_leading_gap_moves_start() -> None:
    sp = SharePartition(0)
    sp.acquire("m1", [(100, 104)], 10, now_ms=0)
    assert sp.start_offset == 100 and sp.end_offset == 105


def test_max_in_flight_limits_new_records_only() -> None:
    sp = SharePartition(0, max_in_flight=5)
    assert sp.acquire("m1", [(0, 99)], 100, now_ms=0) == [AcquiredRange(0, 4, 1)]
    assert not sp.can_acquire()
    assert sp.acquire("m2", [(5, 99)], 100, now_ms=0) == []
    assert sp.acknowledge("m1", [(1, 1, [R])], now_ms=0) == ErrorCode.NONE
    assert sp.can_acquire()
    # The released record is redelivered; still no room for new ones.
    assert sp.acquire("m2", [(1, 99)], 100, now_ms=0) == [AcquiredRange(1, 1, 2)]
    assert sp.acknowledge("m1", [(0, 0, [A])], now_ms=0) == ErrorCode.NONE
    assert sp.start_offset == 1
    assert sp.acquire("m2", [(5, 99)], 100, now_ms=0) == [AcquiredRange(5, 5, 1)]


def test_read_proves_available_records_absent() -> None:
    sp = SharePartition(0)
    sp.acquire("m1", [(0, 5)], 10, now_ms=0)
    sp.acknowledge("m1", [(0, 5, [R])], now_ms=0)
    # Retention deleted 0-2 meanwhile: the broker reads from the log start offset.
    assert sp.acquire("m2", [(3, 5)], 10, now_ms=0, read_from=3) == [AcquiredRange(3, 5, 2)]
    assert sp.start_offset == 0 and state(sp, 1) == (RecordState.AVAILABLE, 1, None)
    # By default the read is taken to start at fetch_offset(), so 0-2 missing from it are gaps.
    sp.release_member("m2", now_ms=0)
    assert sp.acquire("m2", [(3, 5)], 10, now_ms=0) == [AcquiredRange(3, 5, 3)]
    assert sp.start_offset == 3 and sp.record(1) is None


def test_zero_max_records_and_no_candidates() -> None:
    sp = SharePartition(0)
    assert sp.acquire("m1", [(0, 9)], 0, now_ms=0) == []
    assert sp.acquire("m1", [], 10, now_ms=0) == []
    assert sp.end_offset == 0 and sp.version == 0


def test_bad_candidates_raise() -> None:
    sp = SharePartition(0)
    with pytest.raises(ValueError):
        sp.acquire("m1", [(5, 9), (0, 3)], 10, now_ms=0)
    with pytest.raises(ValueError):
        sp.acquire("m1", [(5, 4)], 10, now_ms=0)


def test_candidates_below_start_are_ignored() -> None:
    sp = SharePartition(10)
    assert sp.acquire("m1", [(0, 12)], 10, now_ms=0) == [AcquiredRange(10, 12, 1)]


def test_record_on_last_attempt_is_delivered_alone() -> None:
    sp = SharePartition(0, delivery_count_limit=3)
    sp.acquire("m1", [(0, 4)], 10, now_ms=0)
    sp.acknowledge("m1", [(0, 4, [R])], now_ms=0)
    sp.acquire("m1", [(0, 4)], 10, now_ms=0)
    sp.acknowledge("m1", [(0, 4, [R])], now_ms=0)
    # Every record now has its last delivery left: one at a time.
    assert sp.acquire("m1", [(0, 9)], 10, now_ms=0) == [AcquiredRange(0, 0, 3)]
    assert sp.acquire("m1", [(1, 9)], 10, now_ms=0) == [AcquiredRange(1, 1, 3)]
    sp.acknowledge("m1", [(0, 1, [R])], now_ms=0)
    assert sp.start_offset == 2  # both archived at the limit


# ---------------------------------------------------------------- locks and releases


def test_lock_expiry_redelivers_with_count_two() -> None:
    sp = SharePartition(0, record_lock_duration_ms=1000)
    sp.acquire("m1", [(0, 4)], 10, now_ms=0)
    assert sp.next_deadline() == 1000
    assert not sp.expire_locks(999)
    assert sp.expire_locks(1000)
    assert sp.next_deadline() is None
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, None)
    assert sp.acquire("m2", [(0, 4)], 10, now_ms=1500) == [AcquiredRange(0, 4, 2)]
    assert sp.next_deadline() == 2500


def test_acquire_lock_duration_override() -> None:
    sp = SharePartition(0)
    sp.acquire("m1", [(0, 0)], 10, now_ms=100, lock_duration_ms=5)
    assert sp.next_deadline() == 105


def test_release_redelivers_and_reject_archives() -> None:
    sp = SharePartition(0)
    sp.acquire("m1", [(0, 3)], 10, now_ms=0)
    assert sp.acknowledge("m1", [(0, 0, [X]), (1, 1, [R])], now_ms=0) == ErrorCode.NONE
    assert sp.start_offset == 1  # offset 0 archived
    assert state(sp, 1) == (RecordState.AVAILABLE, 1, None)
    assert sp.acquire("m2", [(1, 3)], 10, now_ms=0) == [AcquiredRange(1, 1, 2)]


def test_delivery_limit_archives_poison_record() -> None:
    sp = SharePartition(0, delivery_count_limit=2)
    assert sp.acquire("m1", [(0, 0)], 1, now_ms=0) == [AcquiredRange(0, 0, 1)]
    assert sp.acknowledge("m1", [(0, 0, [R])], now_ms=0) == ErrorCode.NONE
    assert sp.acquire("m1", [(0, 0)], 1, now_ms=0) == [AcquiredRange(0, 0, 2)]
    assert sp.acknowledge("m1", [(0, 0, [R])], now_ms=0) == ErrorCode.NONE
    assert sp.start_offset == 1 and sp.in_flight_count() == 0
    assert sp.acquire("m1", [(0, 0)], 1, now_ms=0) == []


def test_delivery_limit_archives_on_expiry_and_member_release() -> None:
    sp = SharePartition(0, delivery_count_limit=1, record_lock_duration_ms=10)
    sp.acquire("m1", [(0, 1)], 1, now_ms=0)
    sp.acquire("m2", [(1, 1)], 1, now_ms=0)
    assert sp.expire_locks(10)
    assert sp.start_offset == 2


def test_release_member() -> None:
    sp = SharePartition(0)
    sp.acquire("m1", [(0, 4)], 5, now_ms=0)
    sp.acquire("m2", [(5, 9)], 5, now_ms=0)
    assert sp.release_member("m1", now_ms=5)
    assert not sp.release_member("m1", now_ms=5)
    assert state(sp, 3) == (RecordState.AVAILABLE, 1, None)
    assert state(sp, 7) == (RecordState.ACQUIRED, 1, "m2")
    assert sp.fetch_offset() == 0
    assert sp.acquirable_count() == 5 and sp.acquired_count() == 5


def test_renew_extends_lock() -> None:
    sp = SharePartition(0, record_lock_duration_ms=100)
    sp.acquire("m1", [(0, 3)], 10, now_ms=0)
    assert sp.acknowledge("m1", [(0, 1, [N])], now_ms=90) == ErrorCode.NONE
    assert sp.expire_locks(100)
    assert state(sp, 0) == (RecordState.ACQUIRED, 1, "m1")
    assert state(sp, 2) == (RecordState.AVAILABLE, 1, None)
    assert sp.next_deadline() == 190
    assert sp.acknowledge("m1", [(0, 1, [A])], now_ms=150) == ErrorCode.NONE
    assert sp.start_offset == 2


# ---------------------------------------------------------------- acknowledgement


def test_per_offset_types_and_start_advance() -> None:
    sp = SharePartition(0)
    sp.acquire("m1", [(0, 5)], 10, now_ms=0)
    code = sp.acknowledge("m1", [AcknowledgementBatch(0, 5, [A, A, X, R, A, N])], now_ms=0)
    assert code == ErrorCode.NONE
    assert sp.start_offset == 3
    assert state(sp, 3) == (RecordState.AVAILABLE, 1, None)
    assert state(sp, 4) == (RecordState.ACKNOWLEDGED, 1, None)
    assert state(sp, 5) == (RecordState.ACQUIRED, 1, "m1")
    assert sp.lag(log_end_offset=10) == 2 + 4


def test_gap_acknowledgement() -> None:
    sp = SharePartition(0)
    sp.acquire("m1", [(0, 1), (4, 5)], 10, now_ms=0)
    # GAP archives an acquired record (the client saw no record there), and covers known gaps 2-3.
    assert sp.acknowledge("m1", [(0, 5, [A, G, G, G, A, A])], now_ms=0) == ErrorCode.NONE
    assert sp.start_offset == sp.end_offset == 6
    # A known gap acknowledged as a record is refused.
    sp2 = SharePartition(0)
    sp2.acquire("m1", [(0, 1), (4, 5)], 10, now_ms=0)
    before = snapshot(sp2)
    assert sp2.acknowledge("m1", [(0, 5, [A])], now_ms=0) == ErrorCode.INVALID_RECORD_STATE
    assert snapshot(sp2) == before


@pytest.mark.parametrize(
    "member, batches",
    [
        ("m2", [(0, 1, [A])]),  # another member's records
        ("m1", [(0, 1, [A]), (5, 5, [A])]),  # 5 is available, not acquired; 0-1 must stay untouched
        ("m1", [(6, 6, [A])]),  # acknowledged already
    ],
)
def test_invalid_record_state_changes_nothing(member: str, batches: list) -> None:
    sp = SharePartition(0)
    sp.acquire("m1", [(0, 9)], 10, now_ms=0)
    sp.acknowledge("m1", [(5, 5, [R]), (6, 6, [A])], now_ms=0)
    before = snapshot(sp)
    assert sp.acknowledge(member, batches, now_ms=0) == ErrorCode.INVALID_RECORD_STATE
    assert snapshot(sp) == before


def test_offsets_outside_window() -> None:
    sp = SharePartition(0)
    sp.acquire("m1", [(0, 9)], 10, now_ms=0)
    sp.acknowledge("m1", [(0, 1, [A])], now_ms=0)
    before = snapshot(sp)
    # Below the start offset: no longer in flight.
    assert sp.acknowledge("m1", [(1, 2, [A])], now_ms=0) == ErrorCode.INVALID_RECORD_STATE
    # At or past the end offset: never acquired (Kafka answers INVALID_REQUEST here).
    assert sp.acknowledge("m1", [(8, 10, [A])], now_ms=0) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("m1", [(50, 60, [A])], now_ms=0) == ErrorCode.INVALID_REQUEST
    assert snapshot(sp) == before


@pytest.mark.parametrize(
    "batches",
    [
        [(3, 2, [A])],  # last before first
        [(4, 5, [A]), (0, 1, [A])],  # unsorted
        [(0, 3, [A]), (3, 4, [A])],  # overlapping
        [(0, 2, [A, A])],  # wrong types length
        [(0, 1, [5])],  # unknown type
        [(0, 1, [-1])],
        [(0, 1, [])],
        [(-1, 1, [A])],
    ],
)
def test_invalid_request_changes_nothing(batches: list) -> None:
    sp = SharePartition(0)
    sp.acquire("m1", [(0, 9)], 10, now_ms=0)
    before = snapshot(sp)
    assert sp.acknowledge("m1", batches, now_ms=0) == ErrorCode.INVALID_REQUEST
    assert snapshot(sp) == before


def test_empty_acknowledgement_is_fine() -> None:
    sp = SharePartition(0)
    assert sp.acknowledge("m1", [], now_ms=0) == ErrorCode.NONE


def test_acknowledge_across_split_runs() -> None:
    sp = SharePartition(0)
    sp.acquire("m1", [(0, 9)], 10, now_ms=0)
    sp.acknowledge("m1", [(3, 3, [N])], now_ms=5)  # splits the run in three
    assert len(sp.in_flight()) == 3
    assert sp.acknowledge("m1", [(0, 9, [A])], now_ms=6) == ErrorCode.NONE
    assert sp.start_offset == 10 and sp.in_flight() == []


# ---------------------------------------------------------------- persistence


def test_state_batches_and_restore_round_trip() -> None:
    sp = SharePartition(0, delivery_count_limit=5)
    sp.acquire("m1", [(0, 19)], 20, now_ms=0)
    sp.acknowledge("m1", [(0, 19, [R] * 5 + [A] * 5 + [X] * 5 + [R] * 5)], now_ms=0)
    sp.acquire("m2", [(0, 4)], 3, now_ms=0)  # 0-2 acquired (count 2), 3-4 available (count 1)
    batches = sp.state_batches()
    assert batches == [
        StateBatch(0, 2, RecordState.AVAILABLE, 2),
        StateBatch(3, 4, RecordState.AVAILABLE, 1),
        StateBatch(5, 9, RecordState.ACKNOWLEDGED, 1),
        StateBatch(10, 14, RecordState.ARCHIVED, 1),
        StateBatch(15, 19, RecordState.AVAILABLE, 1),
    ]
    restored = SharePartition(sp.start_offset, state_batches=batches)
    assert restored.start_offset == 0 and restored.end_offset == 20
    assert restored.state_batches() == batches
    assert restored.acquirable_count() == 10 and restored.acquired_count() == 0
    got = restored.acquire("m3", [(0, 30)], 100, now_ms=0)
    assert got == [
        AcquiredRange(0, 2, 3),
        AcquiredRange(3, 4, 2),
        AcquiredRange(15, 19, 2),
        AcquiredRange(20, 30, 1),
    ]


def test_restore_fills_unpersisted_offsets_as_available() -> None:
    batches = [StateBatch(12, 13, RecordState.ACKNOWLEDGED, 1), StateBatch(15, 15, RecordState.ARCHIVED, 2)]
    sp = SharePartition(10, state_batches=batches)
    assert sp.start_offset == 10 and sp.end_offset == 16
    assert state(sp, 10) == (RecordState.AVAILABLE, 0, None)
    assert state(sp, 14) == (RecordState.AVAILABLE, 0, None)
    assert sp.fetch_offset() == 10
    # The log has no record at 11 (compacted): it is dropped as a gap, the others delivered afresh.
    assert sp.acquire("m1", [(10, 10), (12, 20)], 100, now_ms=0) == [
        AcquiredRange(10, 10, 1),
        AcquiredRange(14, 14, 1),
        AcquiredRange(16, 20, 1),
    ]
    assert sp.record(11) is None
    assert sp.dirty


def test_restored_partition_is_clean() -> None:
    sp = SharePartition(3, state_batches=[StateBatch(3, 4, RecordState.AVAILABLE, 1)])
    assert not sp.dirty and sp.version == 0


def test_restore_edge_cases() -> None:
    assert SharePartition(7, state_batches=[]).end_offset == 7
    # Batches below the start are ignored, straddling ones clipped; prefix of finished records dropped.
    sp = SharePartition(
        5,
        state_batches=[
            StateBatch(0, 3, RecordState.ACKNOWLEDGED, 1),
            StateBatch(4, 6, RecordState.ARCHIVED, 1),
            StateBatch(7, 8, RecordState.ACQUIRED, 1),
            StateBatch(9, 9, RecordState.AVAILABLE, 5),  # at the limit: archived
        ],
    )
    assert sp.start_offset == 7 and sp.end_offset == 10
    assert state(sp, 8) == (RecordState.AVAILABLE, 1, None)
    assert state(sp, 9) == (RecordState.ARCHIVED, 5, None)
    with pytest.raises(ValueError):
        SharePartition(0, state_batches=[StateBatch(0, 5, 0, 1), StateBatch(3, 8, 0, 1)])
    with pytest.raises(ValueError):
        SharePartition(0, state_batches=[StateBatch(0, 5, 3, 1)])


def test_dirty() -> None:
    sp = SharePartition(0)
    assert not sp.dirty
    sp.acquire("m1", [(0, 9)], 10, now_ms=0)
    assert sp.dirty
    version = sp.version
    sp.mark_persisted(version)
    assert not sp.dirty
    sp.acknowledge("m1", [(0, 0, [A])], now_ms=0)
    sp.mark_persisted(version)  # a snapshot taken before the ack completes late
    assert sp.dirty


def test_many_in_flight_records_stay_compact() -> None:
    sp = SharePartition(0, max_in_flight=5000)
    for member in range(10):
        sp.acquire(f"m{member}", [(0, 100_000)], 500, now_ms=0)
    assert sp.in_flight_count() == 5000 and len(sp.in_flight()) == 10
    # Per-offset acknowledgements of every other record, all in one call.
    types = [A, R] * 250
    assert sp.acknowledge("m3", [(1500, 1999, types)], now_ms=1) == ErrorCode.NONE
    assert sp.acquirable_count() == 250


# ---------------------------------------------------------------- randomized invariants


def _check_invariants(
    sp: SharePartition, limit: int, terminal: set[int], log: list[int], held: dict[str, set[int]]
) -> None:
    runs = sp.in_flight()
    # The partition's owners agree with what each member was handed and still holds, so no offset
    # can be locked by two members at once.
    locked = {
        (r.member_id, o) for r in runs if r.member_id for o in range(r.first_offset, r.last_offset + 1)
    }
    assert locked == {(m, o) for m, offsets in held.items() for o in offsets}
    assert all(sp.start_offset <= r.first_offset <= r.last_offset < sp.end_offset for r in runs)
    assert all(a.last_offset < b.first_offset for a, b in zip(runs, runs[1:], strict=False))
    for r in runs:
        if r.state in (RecordState.AVAILABLE, RecordState.ACQUIRED):
            assert r.delivery_count <= limit
        if r.state is RecordState.AVAILABLE:
            assert r.delivery_count < limit
        assert (r.state is RecordState.ACQUIRED) == (r.member_id is not None) == (r.deadline_ms is not None)
        if r.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
            assert not terminal.intersection(range(r.first_offset, r.last_offset + 1))
    for offset in log:
        if offset >= sp.start_offset:
            break
        assert offset in terminal, offset


@pytest.mark.parametrize("seed", range(6))
def test_random_operations_keep_invariants(seed: int) -> None:
    rng = random.Random(seed)
    limit = rng.choice([1, 2, 3, 5])
    sp = SharePartition(0, delivery_count_limit=limit, max_in_flight=40, record_lock_duration_ms=50)
    members = ["a", "b", "c"]
    log: list[int] = []  # offsets that exist; the rest are gaps
    log_end = 0
    held: dict[str, set[int]] = {m: set() for m in members}
    acquisitions: dict[int, int] = {}
    terminal: set[int] = set()
    now = 0
    last_start = 0

    def existing_from(offset: int) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for o in log:
            if o < offset:
                continue
            if out and out[-1][1] + 1 == o:
                out[-1] = (out[-1][0], o)
            else:
                out.append((o, o))
        return out

    def released(offsets: set[int]) -> None:
        for o in offsets:
            if acquisitions[o] >= limit:
                terminal.add(o)

    for _step in range(400):
        now += rng.randint(0, 20)
        op = rng.random()
        if op < 0.15:
            for _ in range(rng.randint(1, 8)):
                log_end += rng.choice([1, 1, 1, 2, 3])
                log.append(log_end - 1)
        elif op < 0.45:
            member = rng.choice(members)
            for rng_ in sp.acquire(member, existing_from(sp.fetch_offset()), rng.randint(1, 12), now):
                for o in range(rng_.first_offset, rng_.last_offset + 1):
                    acquisitions[o] = acquisitions.get(o, 0) + 1
                    assert acquisitions[o] == rng_.delivery_count <= limit
                    assert all(o not in h for h in held.values())
                    held[member].add(o)
        elif op < 0.75:
            member = rng.choice(members)
            if not held[member]:
                continue
            chosen = sorted(rng.sample(sorted(held[member]), rng.randint(1, len(held[member]))))
            types = [rng.choice([A, R, X, N]) for _ in chosen]
            code = sp.acknowledge(member, [(o, o, [t]) for o, t in zip(chosen, types, strict=True)], now)
            assert code == ErrorCode.NONE
            for o, t in zip(chosen, types, strict=True):
                if t in (A, X):
                    terminal.add(o)
                if t != N:
                    held[member].discard(o)
                if t == R:
                    released({o})
        elif op < 0.85:
            # A stray acknowledgement of someone else's records must fail and change nothing.
            member, other = rng.sample(members, 2)
            if held[other]:
                o = min(held[other])
                before = snapshot(sp)
                assert sp.acknowledge(member, [(o, o, [A])], now) == ErrorCode.INVALID_RECORD_STATE
                assert snapshot(sp) == before
        elif op < 0.92:
            member = rng.choice(members)
            sp.release_member(member, now)
            released(held[member])
            held[member] = set()
        elif op < 0.97:
            deadline = sp.next_deadline()
            if deadline is not None:
                now = max(now, deadline)
                expired = {
                    o
                    for r in sp.in_flight()
                    if r.deadline_ms is not None and r.deadline_ms <= now
                    for o in range(r.first_offset, r.last_offset + 1)
                }
                assert sp.expire_locks(now)
                released(expired)
                for h in held.values():
                    h -= expired
        else:
            # Failover: persist, restore, and every lock is gone.
            sp = SharePartition(
                sp.start_offset,
                delivery_count_limit=limit,
                max_in_flight=40,
                record_lock_duration_ms=50,
                state_batches=sp.state_batches(),
            )
            for member in members:
                released(held[member])
                held[member] = set()
        assert sp.start_offset >= last_start
        last_start = sp.start_offset
        _check_invariants(sp, limit, terminal, log, held)


def test_lowering_the_delivery_limit_archives_spent_records() -> None:
    sp = SharePartition(0, delivery_count_limit=5)
    sp.acquire("m1", [(0, 3)], 10, now_ms=0)
    sp.acknowledge("m1", [(0, 3, [R])], now_ms=0)
    # The broker read from 2 only: 0-1 are not proven absent and stay available.
    sp.acquire("m1", [(2, 3)], 10, now_ms=0, read_from=2)
    sp.acknowledge("m1", [(3, 3, [R])], now_ms=0)  # 0-1 count 1, 2 acquired count 2, 3 count 2
    assert sp.set_delivery_count_limit(2)
    assert state(sp, 3) == (RecordState.ARCHIVED, 2, None)
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, None)
    sp.acknowledge("m1", [(2, 2, [R])], now_ms=0)
    assert state(sp, 2) == (RecordState.ARCHIVED, 2, None)
    assert not sp.set_delivery_count_limit(2)
