"""The sticky assignors' constrained path: every member subscribes to the same topics.

Each member keeps up to its quota (floor or ceil of partitions/members) of what it owned;
the rest is dealt out, least-loaded members first. O(P) with slices, no per-partition
Python objects beyond the TopicPartitions of the result. With KIP-881 racks, rack-matched
partitions are kept and dealt first (see :func:`constrained_racks`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from .sticky_common import MANY, all_partitions, partitions_of
from .sticky_index import PartitionMask
from .types import ClusterMetadata, Subscription, TopicPartition


def constrained(
    members: list[str],
    topics: list[str],
    counts: Mapping[str, int],
    kept0: dict[str, list[TopicPartition]],
    owned: PartitionMask,
    multi: set[TopicPartition],
    cooperative: bool,
) -> dict[str, list[TopicPartition]]:
    """All members subscribe to the same topics: quotas, then least-loaded-first dealing.
    ``owned``: the partitions in ``kept0``."""
    total = sum(counts.values())
    n_members = len(members)
    min_q, extra = divmod(total, n_members)
    max_q = min_q + (1 if extra else 0)
    slots = extra  # members still allowed to end at max_q

    kept: dict[str, list[TopicPartition]] = {}
    dropped: list[TopicPartition] = []
    for m in members:
        lst = kept0.get(m, [])
        n = len(lst)
        keep, slots = _quota_keep(n, min_q, max_q, slots)
        if keep < n:
            dropped.extend(lst[keep:])
            lst = lst[:keep]
        kept[m] = lst

    owned.mark(dropped, 0)
    pool = owned.unmarked_all(topics) if any(kept.values()) else list(all_partitions(topics, counts))

    new: dict[str, list[TopicPartition]] = {}
    # Least-loaded first (ties by member id): reproduces the StickyAssignor javadoc examples.
    under = sorted((m for m in members if len(kept[m]) < min_q), key=lambda m: (len(kept[m]), m))
    deficits = [min_q - len(kept[m]) for m in under]
    pos = _deal_rounds(under, deficits, pool, new)

    rest = pool[pos:]
    if rest:
        # One extra each to members at min_q: those already there first, then in the order they got there.
        cands = sorted((m for m in members if len(kept[m]) <= min_q), key=lambda m: (min_q - len(kept[m]), m))
        if len(rest) > len(cands):  # cannot happen: quotas add up to the partition count
            raise AssertionError("sticky: more partitions left than members at min quota")
        for tp, m in zip(rest, cands, strict=False):
            new.setdefault(m, []).append(tp)

    if cooperative and (dropped or multi):
        held = set(dropped)
        held |= multi
        for m, lst in new.items():
            new[m] = [tp for tp in lst if tp not in held]
    return {m: kept[m] + new[m] if m in new else kept[m] for m in members}


def _quota_keep(n: int, min_q: int, max_q: int, slots: int) -> tuple[int, int]:
    """How many of its ``n`` owned partitions a member keeps, and the ``max_q`` slots then left."""
    if n > min_q and slots > 0:
        return max_q, slots - 1
    return min(n, min_q), slots


def _deal_rounds(
    order: list[str], deficits: list[int], pool: list[TopicPartition], new: dict[str, list[TopicPartition]]
) -> int:
    """Deal ``pool`` round-robin over ``order`` (deficits non-increasing), each member until its deficit
    is met. Done with one slice per member per run of rounds with the same active members.
    Returns how many pool entries were used."""
    k = len(order)
    pos = 0
    done_rounds = 0
    while k > 0:
        upto = deficits[k - 1]  # all of order[:k] stay active until this round
        rounds = upto - done_rounds
        if rounds > 0:
            end = pos + k * rounds
            for j in range(k):
                chunk = pool[pos + j : end : k]
                lst = new.get(order[j])
                if lst is None:
                    new[order[j]] = chunk
                else:
                    lst.extend(chunk)
            pos = end
            done_rounds = upto
        while k > 0 and deficits[k - 1] <= done_rounds:
            k -= 1
    return pos


class _RackQuota:
    """The racked constrained path's state, shared by its steps: each member's kept and new
    partitions against the quotas (``min_q``; ``max_q`` for ``slots`` members)."""

    def __init__(self, members: list[str], rack: dict[str, str | None], cluster: ClusterMetadata,
                 min_q: int, max_q: int, slots: int) -> None:
        self.members, self.rack, self.racks_of = members, rack, cluster.racks
        self.min_q, self.max_q, self.slots = min_q, max_q, slots
        self.kept: dict[str, list[TopicPartition]] = {}
        self.new: dict[str, list[TopicPartition]] = {m: [] for m in members}
        self.taken: set[TopicPartition] = set()

    def size(self, m: str) -> int:
        return len(self.kept[m]) + len(self.new[m])

    def mismatch(self, m: str, tp: TopicPartition) -> bool:
        r = self.rack[m]
        if r is None:
            return False
        rs = self.racks_of(tp[0], tp[1])
        return bool(rs) and r not in rs

    def keep_on_rack(self, kept0: dict[str, list[TopicPartition]], multi: set[TopicPartition],
                     ) -> tuple[dict[TopicPartition, str], dict[str, list[TopicPartition]]]:
        """1. each member keeps its owned partitions on its rack, within quota: (previous owners,
        each member's owned partitions off its rack)."""
        prev: dict[TopicPartition, str] = dict.fromkeys(multi, MANY)
        off_rack: dict[str, list[TopicPartition]] = {}
        for m in self.members:
            lst = kept0.get(m, [])
            for tp in lst:
                prev[tp] = m
            on = [tp for tp in lst if not self.mismatch(m, tp)]
            off_rack[m] = [tp for tp in lst if self.mismatch(m, tp)]
            keep, self.slots = _quota_keep(len(on), self.min_q, self.max_q, self.slots)
            self.kept[m] = on[:keep]
        for lst in self.kept.values():
            self.taken.update(lst)
        return prev, off_rack

    def fill_on_rack(self, free: list[TopicPartition]) -> None:
        """2. rack-matched fill, round robin least-loaded first; a member leaves when its rack runs dry."""
        by_rack: dict[str, list[TopicPartition]] = {}
        for tp in free:
            for rk in self.racks_of(tp[0], tp[1]):
                by_rack.setdefault(rk, []).append(tp)
        cursor = dict.fromkeys(by_rack, 0)
        size, min_q, taken = self.size, self.min_q, self.taken
        queue = deque(sorted((m for m in self.members if size(m) < min_q and self.rack[m] in by_rack),
                             key=lambda m: (size(m), m)))
        while queue:
            m = queue.popleft()
            r = self.rack[m]
            assert r is not None  # only members on a rack of some free partition are queued
            lst = by_rack[r]
            i = cursor[r]
            while i < len(lst) and lst[i] in taken:
                i += 1
            cursor[r] = i
            if i == len(lst):
                continue
            taken.add(lst[i])
            self.new[m].append(lst[i])
            if size(m) < min_q:
                queue.append(m)

    def take_back(self, off_rack: dict[str, list[TopicPartition]]) -> None:
        """3. owners take back their off-rack partitions that nobody on a matching rack took."""
        for m in self.members:
            for tp in off_rack[m]:
                if tp in self.taken:
                    continue
                s = self.size(m)
                if s < self.min_q or (s == self.min_q and s < self.max_q and self.slots > 0):
                    if s == self.min_q:
                        self.slots -= 1
                    self.kept[m].append(tp)
                    self.taken.add(tp)

    def place_extras(self, leftover: list[TopicPartition]) -> None:
        """4b. one extra partition each to members at min quota, one on the partition's rack first."""
        min_q, rack = self.min_q, self.rack
        cands = [m for m in sorted(self.members, key=lambda m: (min_q - len(self.kept[m]), m))
                 if self.size(m) == min_q]
        order = {m: i for i, m in enumerate(cands)}
        per_rack: dict[str, deque[str]] = {}
        for m in cands:
            if rack[m] is not None:
                per_rack.setdefault(rack[m], deque()).append(m)  # type: ignore[arg-type]
        anyq = deque(cands)
        used: set[str] = set()
        for tp in leftover:
            best: str | None = None
            for r in self.racks_of(tp[0], tp[1]):
                q = per_rack.get(r)
                while q and q[0] in used:
                    q.popleft()
                if q and (best is None or order[q[0]] < order[best]):
                    best = q[0]
            if best is None:
                while anyq and anyq[0] in used:
                    anyq.popleft()
                if not anyq:
                    raise AssertionError("sticky: more partitions left than members at min quota")
                best = anyq[0]
            used.add(best)
            self.new[best].append(tp)


def constrained_racks(
    members: list[str],
    topics: list[str],
    counts: Mapping[str, int],
    kept0: dict[str, list[TopicPartition]],
    multi: set[TopicPartition],
    subscriptions: Mapping[str, Subscription],
    cluster: ClusterMetadata,
    cooperative: bool,
) -> dict[str, list[TopicPartition]]:
    """Constrained path with KIP-881 racks: balance first, then locality, then stickiness.

    1. keep owned partitions on the member's rack (within quota);
    2. fill members below min quota with unowned partitions on their rack;
    3. give owners back their off-rack owned partitions that are still free;
    4. deal the rest as usual, and the extras preferring a member on the partition's rack.
    """
    min_q, extra = divmod(sum(counts.values()), len(members))
    quota = _RackQuota(members, {m: subscriptions[m].rack_id for m in members}, cluster,
                       min_q, min_q + (1 if extra else 0), extra)
    prev, off_rack = quota.keep_on_rack(kept0, multi)
    free = [tp for t in topics for tp in partitions_of(t, counts[t]) if tp not in quota.taken]
    quota.fill_on_rack(free)
    quota.take_back(off_rack)

    # 4. the rest: fill to min_q round robin, then one extra each, on-rack members first.
    rest = [tp for tp in free if tp not in quota.taken]
    under = sorted((m for m in members if quota.size(m) < min_q), key=lambda m: (quota.size(m), m))
    pos = _deal_rounds(under, [min_q - quota.size(m) for m in under], rest, quota.new)
    if rest[pos:]:
        quota.place_extras(rest[pos:])

    new = quota.new
    if cooperative:
        for m, lst in new.items():
            new[m] = [tp for tp in lst if prev.get(tp, m) == m]
    return {m: quota.kept[m] + new[m] for m in members}
