"""The vocabulary of a share partition: record states, acknowledge types, and run-length storage.

A share partition keeps its in-flight records as *runs*: maximal ranges of consecutive offsets that share
one state, delivery count, owner and lock deadline. Consumers acquire and acknowledge whole fetched
batches most of the time, so a few runs describe thousands of records; per-offset acknowledgements split
runs, and ``coalesce`` glues equal neighbours back together after every change.

The module also checks and normalizes what the broker passes in (candidate ranges, acknowledgement
batches) and shapes what goes back out (acquired ranges).

Offsets inside the in-flight window that no run covers are *gaps*: the log holds no record there (compacted
away, a transaction marker, or deleted by retention), so nothing can be delivered or acknowledged at them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum


class RecordState(IntEnum):
    """The delivery state of one in-flight record, numbered as Kafka persists it (ShareSnapshotValue)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    # Kafka numbers ARCHIVED 4 (3 was left unused), and the persisted state topic uses these numbers.
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        """Whether the record is done with: it will never be delivered again."""
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AcknowledgeType(IntEnum):
    """An acknowledgement's disposition, numbered as ShareFetch/ShareAcknowledge carry it."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """Records handed to a consumer: Kafka's ``AcquiredRecords`` (one delivery count for the whole range)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """An acknowledgement as the request carries it.

    ``acknowledge_types`` holds either one type for the whole range or one per offset, as Kafka's
    ``AcknowledgeTypes`` array does; the values are plain ints because they come off the wire unchecked.
    """

    first_offset: int
    last_offset: int
    acknowledge_types: Sequence[int]


AckInput = AcknowledgementBatch | tuple[int, int, Sequence[int]]
"""An acknowledgement batch, as the dataclass or a plain ``(first, last, types)`` tuple."""

_ACK_TYPE_VALUES = frozenset(int(t) for t in AcknowledgeType)


@dataclass(frozen=True, slots=True)
class InFlightRange:
    """A read-only view of one run of in-flight records (for metrics, admin and tests)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None
    deadline_ms: int | None


@dataclass(slots=True)
class Run:
    """Consecutive in-flight records that share every attribute. Mutable: the partition edits copies."""

    first: int
    last: int
    state: RecordState
    count: int
    owner: str | None = None
    deadline: int | None = None

    def piece(self, first: int, last: int) -> Run:
        """A copy of this run narrowed to ``[first, last]``."""
        return Run(first, last, self.state, self.count, self.owner, self.deadline)

    @property
    def size(self) -> int:
        """How many records the run holds."""
        return self.last - self.first + 1

    def same_attributes(self, other: Run) -> bool:
        """Whether ``other`` could be merged with this run if they were adjacent."""
        return (
            self.state == other.state
            and self.count == other.count
            and self.owner == other.owner
            and self.deadline == other.deadline
        )

    def view(self) -> InFlightRange:
        """The run as an immutable public value."""
        return InFlightRange(self.first, self.last, self.state, self.count, self.owner, self.deadline)


def coalesce(runs: list[Run]) -> list[Run]:
    """Merge adjacent runs with equal attributes, so storage stays proportional to distinct ranges."""
    out: list[Run] = []
    for run in runs:
        if out and out[-1].last + 1 == run.first and out[-1].same_attributes(run):
            out[-1].last = run.last
        else:
            out.append(run)
    return out


def overlaps(runs: Sequence[Run], ranges: Sequence[tuple[int, int]]) -> Iterator[tuple[Run, int, int]]:
    """Yield ``(run, lo, hi)`` for every intersection of sorted runs with sorted, disjoint ranges.

    A binary search for the first range, then a two-pointer walk: linear in what is visited, not in the
    runs before it.
    """
    i = first_overlapping(runs, ranges[0][0]) if ranges else 0
    for first, last in ranges:
        # Runs wholly before this range are before every later range too.
        while i < len(runs) and runs[i].last < first:
            i += 1
        j = i
        while j < len(runs) and runs[j].first <= last:
            run = runs[j]
            yield run, max(first, run.first), min(last, run.last)
            j += 1


def rewrite(
    runs: list[Run],
    segments: Sequence[tuple[int, int, object]],
    edit: Callable[[Run, object], Run | None],
) -> list[Run]:
    """Apply ``edit`` to every part of ``runs`` covered by ``segments``; return the new, coalesced list.

    ``segments`` are sorted, disjoint ``(first, last, payload)`` ranges; parts of them that fall in gaps are
    ignored. ``edit`` gets a fresh copy of the covered piece and the segment's payload, and returns the
    piece to keep (possibly changed) or None to drop it. Pieces outside every segment are kept as they
    are. One merged pass over the runs the segments touch, so a call with many per-offset
    acknowledgements stays linear, and one touching a few runs does not walk the rest in Python.
    """
    if not segments or not runs:
        return runs
    # Only runs overlapping the segments change, plus one neighbour each side that may merge with them.
    lo = max(0, first_overlapping(runs, segments[0][0]) - 1)
    hi = min(len(runs), bisect_right(runs, segments[-1][1], key=_first_of) + 1)
    return runs[:lo] + coalesce(_rewrite_slice(runs[lo:hi], segments, edit)) + runs[hi:]


def first_overlapping(runs: Sequence[Run], offset: int) -> int:
    """The index of the first run ending at or after ``offset`` (``len(runs)`` when none does)."""
    return bisect_left(runs, offset, key=_last_of)


def _first_of(run: Run) -> int:
    return run.first


def _last_of(run: Run) -> int:
    return run.last


def _rewrite_slice(
    runs: list[Run],
    segments: Sequence[tuple[int, int, object]],
    edit: Callable[[Run, object], Run | None],
) -> list[Run]:
    out: list[Run] = []
    i = 0
    for run in runs:
        while i < len(segments) and segments[i][1] < run.first:
            i += 1
        cursor = run.first
        while i < len(segments) and segments[i][0] <= run.last:
            first, last, payload = segments[i]
            lo, hi = max(first, run.first), min(last, run.last)
            if lo > cursor:
                out.append(run.piece(cursor, lo - 1))
            kept = edit(run.piece(lo, hi), payload)
            if kept is not None:
                out.append(kept)
            cursor = hi + 1
            if last > run.last:
                # The segment carries on into the next run; revisit it there.
                break
            i += 1
        if cursor <= run.last:
            out.append(run.piece(cursor, run.last))
    return out


def complement(ranges: Sequence[tuple[int, int]], first: int, last: int) -> list[tuple[int, int]]:
    """The parts of ``[first, last]`` that sorted, disjoint ``ranges`` do not cover."""
    holes: list[tuple[int, int]] = []
    cursor = first
    for lo, hi in ranges:
        if hi < cursor:
            continue
        if lo > last:
            break
        if lo > cursor:
            holes.append((cursor, lo - 1))
        cursor = max(cursor, hi + 1)
    if cursor <= last:
        holes.append((cursor, last))
    return holes


def checked_ranges(candidates: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Validate the broker's candidate ranges: a programming error on the broker's side raises."""
    out: list[tuple[int, int]] = []
    for first, last in candidates:
        if first > last or first < 0 or (out and first <= out[-1][1]):
            raise ValueError(f"candidate ranges must be sorted, disjoint and non-empty: {list(candidates)}")
        out.append((first, last))
    return out


def ack_segments(batches: Sequence[AckInput]) -> list[tuple[int, int, object]] | None:
    """Flatten acknowledgement batches into sorted ``(first, last, type)`` runs; None when malformed."""
    segments: list[tuple[int, int, object]] = []
    previous_last = -1
    for batch in batches:
        if isinstance(batch, AcknowledgementBatch):
            first, last, types = batch.first_offset, batch.last_offset, batch.acknowledge_types
        else:
            first, last, types = batch
        if first < 0 or last < first or first <= previous_last:
            return None
        if len(types) not in (1, last - first + 1) or any(t not in _ACK_TYPE_VALUES for t in types):
            return None
        previous_last = last
        if len(types) == 1:
            segments.append((first, last, AcknowledgeType(types[0])))
            continue
        # Per-offset types: group equal neighbours so a uniform array costs one segment.
        run_start = first
        for offset in range(first + 1, last + 2):
            if offset > last or types[offset - first] != types[run_start - first]:
                segments.append((run_start, offset - 1, AcknowledgeType(types[run_start - first])))
                run_start = offset
    return segments


def merge_acquired(granted: list[AcquiredRange]) -> list[AcquiredRange]:
    """Sort the acquired pieces and join contiguous ones that share a delivery count."""
    out: list[AcquiredRange] = []
    for piece in sorted(granted, key=lambda r: r.first_offset):
        last = out[-1] if out else None
        if last and last.last_offset + 1 == piece.first_offset and last.delivery_count == piece.delivery_count:
            out[-1] = AcquiredRange(last.first_offset, piece.last_offset, piece.delivery_count)
        else:
            out.append(piece)
    return out
