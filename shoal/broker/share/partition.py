"""The state machine of one share partition (KIP-932): which records are handed to whom, and for how long.

One ``SharePartition`` exists per (share group, topic, partition) on the partition's leader. It is a pure
core in the sense of DESIGN.md: no IO and no clock. The broker reads the log and passes which offsets
exist, passes the current time in, and persists ``state_batches()`` through the share coordinator when
``version`` moves.

The window of in-flight records is ``[start_offset, end_offset)`` (Kafka's SPSO and SPEO). Below the start
every record is acknowledged or archived; at and after the end nothing has been acquired yet. Inside the
window each record is AVAILABLE (to be redelivered), ACQUIRED (locked by a member until a deadline),
ACKNOWLEDGED or ARCHIVED; offsets of the window holding no record are gaps (see ``records_state``).

Behaviour follows Kafka 4.x's broker ``SharePartition``:

* a record is acquired at most ``delivery_count_limit`` times: when a release (explicit, by lock expiry or
  by its member leaving) finds it at the limit, it is archived instead of made available;
* releasing on member departure keeps the delivery count the acquisition gave (Kafka 4.2 restored that
  bump, KAFKA-19972, so a consumer that crashes on a record cannot loop on it forever);
* a record on its last delivery attempt is handed out alone (Kafka's isolation of suspected poison
  records, for limits above 2), so a bad record cannot drag a whole batch into the archive with it; the
  acquisition stops at such a record. Kafka 4.2+ also shrinks acquisitions from batches with high
  delivery counts; that finer throttling is not modelled;
* an acknowledgement is validated as a whole before anything changes, and fails as a whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from shoal.broker.share.records_state import (
    AckInput,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRange,
    InFlightRange,
    RecordState,
    Run,
    ack_segments,
    checked_ranges,
    coalesce,
    complement,
    first_overlapping,
    merge_acquired,
    overlaps,
    rewrite,
)
from shoal.coordinator.share.state import StateBatch  # one persisted range of records (ShareSnapshotValue)
from shoal.protocol.errors import ErrorCode

# The vocabulary is re-exported so callers can import everything from here.
__all__ = [
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcquiredRange",
    "InFlightRange",
    "RecordState",
    "SharePartition",
    "StateBatch",
]

DEFAULT_DELIVERY_COUNT_LIMIT = 5
DEFAULT_MAX_IN_FLIGHT = 2000
DEFAULT_RECORD_LOCK_DURATION_MS = 30_000

_PERSISTED_STATES = frozenset(int(s) for s in RecordState)


class SharePartition:
    """In-flight record state of one share partition for one share group.

    Args:
        start_offset: the share-partition start offset (SPSO) to begin from.
        delivery_count_limit: ``group.share.delivery.count.limit``; how many times a record may be acquired.
        max_in_flight: ``group.share.partition.max.record.locks``; a cap on the records in the window.
        record_lock_duration_ms: ``group.share.record.lock.duration.ms``; how long an acquisition lasts.
        state_batches: persisted state to restore (see ``state_batches()``); the window then ends one past
            the last batch, and offsets of the window no batch covers are treated as AVAILABLE, never
            delivered, as Kafka does after loading (its "initial read gap"): the log decides later whether
            a record exists there.
    """

    def __init__(
        self,
        start_offset: int = 0,
        *,
        delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS,
        state_batches: Iterable[StateBatch] = (),
    ) -> None:
        if start_offset < 0:
            raise ValueError(f"start offset {start_offset} is negative")
        if delivery_count_limit < 1 or max_in_flight < 1 or record_lock_duration_ms < 1:
            raise ValueError("delivery count limit, max in-flight and lock duration must be positive")
        self._limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        self.record_lock_duration_ms = record_lock_duration_ms
        self._start = start_offset
        self._end = start_offset
        self._runs: list[Run] = []
        # Bumped on every change; the broker persists when it differs from what it last wrote.
        self._version = 0
        self._persisted_version = 0
        self._restore(list(state_batches))

    # ------------------------------------------------------------------ configuration

    @property
    def delivery_count_limit(self) -> int:
        """How many times a record may be acquired before a release archives it."""
        return self._limit

    def set_delivery_count_limit(self, limit: int) -> bool:
        """Apply a changed ``group.share.delivery.count.limit``; returns whether any record changed.

        Available records that already had as many deliveries as the new limit allows are archived at once,
        so none is handed out beyond the limit; acquired ones are archived when released.
        """
        if limit < 1:
            raise ValueError(f"delivery count limit {limit} must be positive")
        self._limit = limit
        changed = False
        for run in self._runs:
            if run.state is RecordState.AVAILABLE and run.count >= limit:
                run.state = RecordState.ARCHIVED
                changed = True
        if changed:
            self._runs = coalesce(self._runs)
            self._advance_start()
            self._changed()
        return changed

    # ------------------------------------------------------------------ offsets and counters

    @property
    def start_offset(self) -> int:
        """The share-partition start offset (SPSO): every record below it is acknowledged or archived."""
        return self._start

    @property
    def end_offset(self) -> int:
        """The share-partition end offset (SPEO): the next offset that has never been acquired."""
        return self._end

    @property
    def version(self) -> int:
        """A counter bumped by every change of state but lock renewals; compare it to know whether to persist."""
        return self._version

    @property
    def dirty(self) -> bool:
        """Whether the state changed since ``mark_persisted`` was last called."""
        return self._version != self._persisted_version

    def mark_persisted(self, version: int | None = None) -> None:
        """Record that the state as of ``version`` (default: now) has been written to the share coordinator.

        Passing the version the snapshot was taken at lets a write that completes late leave the flag set
        when more changes happened in the meantime.
        """
        self._persisted_version = self._version if version is None else version

    def fetch_offset(self) -> int:
        """The offset the broker should read the log from for the next ``acquire``.

        That is the lowest AVAILABLE in-flight record, if any (redeliveries come first), else the end offset.
        """
        for run in self._runs:
            if run.state is RecordState.AVAILABLE:
                return run.first
        return self._end

    def can_acquire(self) -> bool:
        """Whether an ``acquire`` could hand anything out: a redelivery is pending or the window has room."""
        return self.acquirable_count() > 0 or self.in_flight_count() < self.max_in_flight

    def in_flight_count(self) -> int:
        """Records in the window, whatever their state (gaps are not records and do not count)."""
        return sum(run.size for run in self._runs)

    def acquirable_count(self) -> int:
        """In-flight records waiting for (re)delivery."""
        return sum(run.size for run in self._runs if run.state is RecordState.AVAILABLE)

    def acquired_count(self) -> int:
        """In-flight records currently locked by some member."""
        return sum(run.size for run in self._runs if run.state is RecordState.ACQUIRED)

    def lag(self, log_end_offset: int) -> int:
        """Records from the start offset not yet acknowledged or archived, given the log's end offset.

        Kafka's share-partition lag. Known gaps inside the window are not records and are left out; past
        the window the log is not known here, so every offset up to ``log_end_offset`` is counted.
        """
        pending = sum(run.size for run in self._runs if not run.state.terminal)
        return pending + max(0, log_end_offset - self._end)

    def next_deadline(self) -> int | None:
        """The earliest lock deadline among acquired records, for the broker's timer; None when none."""
        deadlines = [run.deadline for run in self._runs if run.deadline is not None]
        return min(deadlines) if deadlines else None

    def in_flight(self) -> list[InFlightRange]:
        """The in-flight records as ranges of equal attributes, lowest offsets first."""
        return [run.view() for run in self._runs]

    def record(self, offset: int) -> InFlightRange | None:
        """The single in-flight record at ``offset``, or None when it is outside the window or a gap."""
        for run, lo, hi in overlaps(self._runs, [(offset, offset)]):
            return run.piece(lo, hi).view()
        return None

    # ------------------------------------------------------------------ acquisition

    def acquire(
        self,
        member_id: str,
        candidates: Sequence[tuple[int, int]],
        max_records: int,
        now_ms: int,
        lock_duration_ms: int | None = None,
        *,
        read_from: int | None = None,
    ) -> list[AcquiredRange]:
        """Lock records for ``member_id`` and return them as Kafka's ``AcquiredRecords`` ranges.

        Args:
            member_id: the share-group member fetching.
            candidates: sorted, disjoint ``(first, last)`` ranges of the offsets that exist in the log
                from ``read_from`` on, as far as the broker read. They must list every record in
                ``[read_from, last candidate]``: offsets there that are missing are taken to be gaps.
            max_records: most records to hand out (the request's MaxRecords).
            now_ms: the current time on the monotonic clock (lock deadlines are never stored).
            lock_duration_ms: overrides the record lock duration for this acquisition.
            read_from: where the broker began reading; defaults to ``fetch_offset()``.

        Redeliveries come first since they sit at lower offsets than new records; both are taken in offset
        order. New records are limited by ``max_in_flight``; available ones are not, as they already count.
        """
        ranges = checked_ranges(candidates)
        if read_from is None:
            read_from = self.fetch_offset()
        lock = self.record_lock_duration_ms if lock_duration_ms is None else lock_duration_ms
        changed = self._drop_known_gaps(ranges, read_from)
        ranges = [(max(lo, self._start), hi) for lo, hi in ranges if hi >= self._start]

        redeliver, fresh = self._choose(ranges, max_records)
        deadline = now_ms + lock
        granted: list[AcquiredRange] = []

        def take(piece: Run, _payload: object) -> Run:
            piece.state, piece.count = RecordState.ACQUIRED, piece.count + 1
            piece.owner, piece.deadline = member_id, deadline
            granted.append(AcquiredRange(piece.first, piece.last, piece.count))
            return piece

        if redeliver:
            self._runs = rewrite(self._runs, [(lo, hi, None) for lo, hi in redeliver], take)
        for lo, hi in fresh:
            self._runs.append(Run(lo, hi, RecordState.ACQUIRED, 1, member_id, deadline))
            granted.append(AcquiredRange(lo, hi, 1))
        if fresh:
            # Gaps between the old end and the new records are known now, so the end moves past them.
            self._end = fresh[-1][1] + 1
            self._runs = coalesce(self._runs)
        if changed or granted:
            # New records may sit past a stretch of gaps that no longer holds the start back.
            self._advance_start()
            self._changed()
        return merge_acquired(granted)

    def _drop_known_gaps(self, ranges: list[tuple[int, int]], read_from: int) -> bool:
        """Forget AVAILABLE in-flight records that the read proved absent from the log.

        After a restore, the window's unpersisted offsets are assumed to be records; once the broker has
        read that stretch of the log, those that are not there (compacted, markers, deleted) are gaps.
        Acquired or finished records are left alone: they were real when acquired.
        """
        if not ranges or not self._runs:
            return False
        holes = complement(ranges, max(read_from, self._start), min(ranges[-1][1], self._end - 1))
        if not holes:
            return False
        before = self.in_flight_count()

        def drop_available(piece: Run, _payload: object) -> Run | None:
            return None if piece.state is RecordState.AVAILABLE else piece

        self._runs = rewrite(self._runs, [(lo, hi, None) for lo, hi in holes], drop_available)
        self._advance_start()
        return self.in_flight_count() != before

    def _choose(
        self, ranges: list[tuple[int, int]], max_records: int
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Pick the offsets to acquire: (available in-flight ranges, new ranges at or past the end)."""
        remaining = max(0, max_records)
        redeliver: list[tuple[int, int]] = []
        inside = [(lo, min(hi, self._end - 1)) for lo, hi in ranges if lo < self._end]
        for run, lo, hi in overlaps(self._runs, inside):
            if remaining == 0:
                break
            if run.state is not RecordState.AVAILABLE:
                continue
            if self._on_last_attempt(run):
                # Isolate a record on its last attempt: alone, or not in this response at all.
                if not redeliver:
                    redeliver.append((lo, lo))
                return redeliver, []
            take = min(remaining, hi - lo + 1)
            redeliver.append((lo, lo + take - 1))
            remaining -= take

        fresh: list[tuple[int, int]] = []
        room = min(remaining, self.max_in_flight - self.in_flight_count())
        for lo, hi in ranges:
            if room <= 0:
                break
            lo = max(lo, self._end)
            if lo > hi:
                continue
            take = min(room, hi - lo + 1)
            fresh.append((lo, lo + take - 1))
            room -= take
        return redeliver, fresh

    def _on_last_attempt(self, run: Run) -> bool:
        """Whether acquiring ``run`` again would use up its last delivery (only isolated above limit 2)."""
        limit = self._limit
        return limit > 2 and run.count == limit - 1

    # ------------------------------------------------------------------ acknowledgement

    def acknowledge(self, member_id: str, batches: Sequence[AckInput], now_ms: int) -> ErrorCode:
        """Apply a member's acknowledgements, all or nothing.

        Each batch is ``(first, last, types)`` (or an ``AcknowledgementBatch``) with one type for the whole
        range or one per offset. ACCEPT acknowledges; RELEASE makes the record available again (archived
        at the delivery limit); REJECT archives; GAP archives and is also accepted on offsets the partition
        knows hold no record; RENEW keeps the record and restarts its lock.

        Returns ``ErrorCode.NONE``, or without changing anything: ``INVALID_REQUEST`` for malformed
        batches (reversed, unsorted or overlapping ranges, unknown types, a types array of the wrong
        length) and for offsets at or past the end offset (never acquired; Kafka answers the same when a
        batch reaches past the last acquired record); ``INVALID_RECORD_STATE`` when an offset is below the
        start offset, is not ACQUIRED, or is held by another member.
        """
        segments = ack_segments(batches)
        if segments is None:
            return ErrorCode.INVALID_REQUEST
        if not segments:
            return ErrorCode.NONE
        if segments[-1][1] >= self._end:
            return ErrorCode.INVALID_REQUEST
        if segments[0][0] < self._start or not self._acknowledgeable(member_id, segments):
            return ErrorCode.INVALID_RECORD_STATE

        deadline = now_ms + self.record_lock_duration_ms

        def settle(piece: Run, payload: object) -> Run:
            if payload == AcknowledgeType.RENEW:
                piece.deadline = deadline
            elif payload == AcknowledgeType.RELEASE:
                self._release(piece)
            else:
                accepted = payload == AcknowledgeType.ACCEPT
                piece.state = RecordState.ACKNOWLEDGED if accepted else RecordState.ARCHIVED
                piece.owner = piece.deadline = None
            return piece

        self._runs = rewrite(self._runs, segments, settle)
        self._advance_start()
        if any(ack_type != AcknowledgeType.RENEW for _, _, ack_type in segments):
            # A renewal only moves a lock deadline, which is never persisted (nor does Kafka write it).
            self._changed()
        return ErrorCode.NONE

    def _acknowledgeable(self, member_id: str, segments: list[tuple[int, int, object]]) -> bool:
        """Whether every offset of ``segments`` is acquired by ``member_id`` (or a gap acknowledged as GAP)."""
        runs = self._runs
        i = first_overlapping(runs, segments[0][0])
        for first, last, ack_type in segments:
            while i < len(runs) and runs[i].last < first:
                i += 1
            cursor, j = first, i
            while j < len(runs) and runs[j].first <= last:
                run = runs[j]
                if run.first > cursor and ack_type != AcknowledgeType.GAP:
                    return False  # a gap in the log acknowledged as if it were a record
                if run.state is not RecordState.ACQUIRED or run.owner != member_id:
                    return False
                cursor = run.last + 1
                j += 1
            if cursor <= last and ack_type != AcknowledgeType.GAP:
                return False
        return True

    # ------------------------------------------------------------------ releases

    def release_member(self, member_id: str, now_ms: int) -> bool:
        """Release every record ``member_id`` holds, as when its share session closes or it leaves.

        The records become AVAILABLE, or ARCHIVED at the delivery limit; the delivery count is kept.
        Returns whether anything changed.
        """
        return self._release_where(lambda run: run.owner == member_id)

    def expire_locks(self, now_ms: int) -> bool:
        """Release every acquired record whose lock deadline is at or before ``now_ms``.

        Returns whether anything changed; ``next_deadline()`` gives when to call again.
        """
        return self._release_where(lambda run: run.deadline is not None and run.deadline <= now_ms)

    def _release_where(self, predicate: Callable[[Run], bool]) -> bool:
        changed = False
        for run in self._runs:
            if run.state is RecordState.ACQUIRED and predicate(run):
                self._release(run)
                changed = True
        if changed:
            self._runs = coalesce(self._runs)
            self._advance_start()
            self._changed()
        return changed

    def _release(self, run: Run) -> None:
        """Give an acquired run up: back to AVAILABLE, or ARCHIVED when it has had all its deliveries."""
        at_limit = run.count >= self._limit
        run.state = RecordState.ARCHIVED if at_limit else RecordState.AVAILABLE
        run.owner = run.deadline = None

    # ------------------------------------------------------------------ persistence and resets

    def state_batches(self) -> list[StateBatch]:
        """The state to persist, in Kafka's ShareSnapshotValue shape (with ``start_offset``).

        Records that are AVAILABLE and were never delivered are left out, as the log alone describes them.
        An ACQUIRED record is written as AVAILABLE with its delivery count: after a failover its lock is
        gone, but the delivery it used still counts. Equal neighbours are merged into maximal batches.
        """
        out: list[StateBatch] = []
        for run in self._runs:
            state = RecordState.AVAILABLE if run.state is RecordState.ACQUIRED else run.state
            if state is RecordState.AVAILABLE and run.count == 0:
                continue
            last = out[-1] if out else None
            if (
                last is not None
                and last.last_offset + 1 == run.first
                and last.delivery_state == state
                and last.delivery_count == run.count
            ):
                out[-1] = StateBatch(last.first_offset, run.last, int(state), run.count)
            else:
                out.append(StateBatch(run.first, run.last, int(state), run.count))
        return out

    def _restore(self, batches: list[StateBatch]) -> None:
        """Rebuild the window from persisted batches (see the class docstring for the gap rule)."""
        batches = sorted(
            (b for b in batches if b.last_offset >= self._start), key=lambda b: b.first_offset
        )
        cursor = self._start
        runs: list[Run] = []
        for batch in batches:
            if batch.first_offset > batch.last_offset or batch.delivery_state not in _PERSISTED_STATES:
                raise ValueError(f"malformed state batch {batch}")
            if batch.delivery_count < 0:
                raise ValueError(f"negative delivery count in {batch}")
            first = max(batch.first_offset, self._start)
            if first < cursor:
                raise ValueError(f"state batch {batch} overlaps an earlier one")
            if first > cursor:
                runs.append(Run(cursor, first - 1, RecordState.AVAILABLE, 0))
            runs.append(Run(first, batch.last_offset, *self._restored_state(batch)))
            cursor = batch.last_offset + 1
        self._runs = coalesce(runs)
        self._end = cursor
        self._advance_start()

    def _restored_state(self, batch: StateBatch) -> tuple[RecordState, int]:
        """The state a persisted batch comes back in: locks are gone, and the limit may have dropped."""
        state = RecordState(batch.delivery_state)
        if state is RecordState.ACQUIRED:
            state = RecordState.AVAILABLE
        if state is RecordState.AVAILABLE and batch.delivery_count >= self._limit:
            state = RecordState.ARCHIVED
        return state, batch.delivery_count

    # ------------------------------------------------------------------ internals

    def _advance_start(self) -> None:
        """Move the start offset past finished records (and gaps) at the front of the window, forgetting them."""
        drop = 0
        while drop < len(self._runs) and self._runs[drop].state.terminal:
            drop += 1
        if drop:
            del self._runs[:drop]
        self._start = self._runs[0].first if self._runs else self._end

    def _changed(self) -> None:
        self._version += 1
