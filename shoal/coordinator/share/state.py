"""A share-partition's persisted state, and how Kafka 4.4's share coordinator combines state batches.

Kafka's PersisterStateBatchCombiner: batches ending below the start offset are dropped, a batch that
straddles it is cut at it; where batches overlap, the one with the higher delivery count wins, then the
higher delivery state (0 Available < 2 Acknowledged < 4 Archived); adjacent ranges of equal
(state, count) are coalesced. Not "newest wins": a lower-count batch cannot undo a delivery.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class StateBatch(NamedTuple):
    """One persisted range of records (Kafka's ShareSnapshotValue.StateBatch)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass
class ShareState:
    """What the share coordinator keeps for one share-partition (group, topic id, partition).

    ``snapshot_epoch`` and the timestamps are the coordinator's own (callers' values are ignored on
    write); ``delivery_complete_count`` is KIP-1226's, -1 when unknown.
    """

    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    state_batches: list[StateBatch] = field(default_factory=list)
    delivery_complete_count: int = -1
    snapshot_epoch: int = 0
    create_timestamp: int = -1
    write_timestamp: int = -1


def as_batches(batches: Iterable[Any]) -> list[StateBatch]:
    """StateBatch values from tuples or from any object with the four attributes (sorted by offset)."""
    out = []
    for b in batches:
        if isinstance(b, tuple):
            out.append(StateBatch(*b))
        else:
            out.append(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count))
    return sorted(out)


def _prune(batches: Iterable[StateBatch], start_offset: int) -> list[StateBatch]:
    out = []
    for b in batches:
        if start_offset != -1 and b.last_offset < start_offset:
            continue
        if start_offset != -1 and b.first_offset < start_offset:
            b = b._replace(first_offset=start_offset)
        out.append(b)
    return out


def combine_batches(old: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int) -> list[StateBatch]:
    """Kafka's combineStateBatches(old, new, start offset) (see the module docstring)."""
    pruned = _prune(old, start_offset) + _prune(new, start_offset)
    if len(pruned) <= 1:
        return pruned
    points = sorted({b.first_offset for b in pruned} | {b.last_offset + 1 for b in pruned})
    out: list[StateBatch] = []
    for lo, hi in zip(points, points[1:], strict=False):
        covering = [(b.delivery_count, b.delivery_state) for b in pruned if b.first_offset <= lo and b.last_offset >= lo]
        if not covering:
            continue
        count, state = max(covering)
        last = out[-1] if out else None
        if last is not None and last.last_offset + 1 == lo and (last.delivery_state, last.delivery_count) == (
                state, count):
            out[-1] = last._replace(last_offset=hi - 1)
        else:
            out.append(StateBatch(lo, hi - 1, state, count))
    return out
