"""The sticky assignors' general path: members subscribe to different topics.

Keep all valid owned partitions; give each unowned partition (most constrained topics
first) to the least-loaded subscriber, ties to the lowest member id; then move partitions
from members holding ``n`` to subscribers holding ``<= n - 2`` until no such move exists
(each move lowers the sum of squares, so it ends).

The least-loaded placement is what a heap of (count, member id) gives one partition at a
time, but computed in runs of slices (:func:`_water_fill`): at a million partitions the
per-partition heap was most of the run time.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain, repeat

from .sticky_common import topic_of
from .sticky_index import PartitionMask
from .types import ClusterMetadata, Subscription, TopicPartition

# How many equally-loaded candidates the general path looks through for a rack match.
_RACK_TIE_SCAN = 16


@dataclass
class Claims:
    """Previous ownership as the cooperative protocol sees it: every valid partition some member
    of the newest generation owned, on topics it still subscribes to or not."""

    #: all claimed partitions; None when they are just the kept partitions and ``contested``
    claimed: set[TopicPartition] | None
    #: partitions claimed by two or more members
    contested: set[TopicPartition]
    #: member -> the partitions it claims
    by_member: dict[str, list[TopicPartition]]


def general(
    members: list[str],
    topic_sets: Mapping[str, frozenset[str]],
    ppt: Mapping[str, int],
    kept0: dict[str, list[TopicPartition]],
    owned: PartitionMask,
    claims: Claims,
    subscriptions: Mapping[str, Subscription],
    cluster: ClusterMetadata | None,
    cooperative: bool,
) -> dict[str, list[TopicPartition]]:
    """Unequal subscriptions: keep owned (``kept0``, all of them marked in ``owned``), least-loaded
    placement, then balancing moves."""
    topic_subs = _topic_subscribers(members, topic_sets, ppt)
    count = {m: len(kept0.get(m, ())) for m in members}
    new: dict[str, list[TopicPartition]] = {m: [] for m in members}
    rack = {m: subscriptions[m].rack_id for m in members}
    # Most constrained topics (fewest subscribers) first, as Java sorts by potential consumers.
    for t in sorted(topic_subs, key=lambda t: (len(topic_subs[t]), t)):
        if owned.complete(t):
            continue
        pool = owned.unmarked(t)
        if cluster is None:
            _water_fill(pool, topic_subs[t], count, new)
        else:
            _place_racked(pool, topic_subs[t], count, new, cluster, rack)

    if not _balanced(topic_subs, count):
        return _balance_and_collect(members, topic_subs, kept0, new, count, claims, cooperative)

    result: dict[str, list[TopicPartition]] = {}
    for m in members:
        kept, got = kept0.get(m, []), new[m]
        if cooperative:
            # Kept partitions are claimed by m itself, so only a contested claim blocks them;
            # unowned ones came from the pool and are never m's: any claim blocks them.
            if claims.contested:
                kept = [tp for tp in kept if tp not in claims.contested]
            blocked = claims.contested if claims.claimed is None else claims.claimed
            if blocked:
                got = [tp for tp in got if tp not in blocked]
        # Stable sort: per topic, kept partitions first, then new ones in the order placed.
        result[m] = sorted(kept + got, key=topic_of)
    return result


def _topic_subscribers(
    members: list[str], topic_sets: Mapping[str, frozenset[str]], ppt: Mapping[str, int]
) -> dict[str, list[str]]:
    """Topic -> its subscribers by member id. Worked out per distinct subscription, not per member
    and topic (a million steps at 2,000 members x 500 topics): topics with the same subscribers
    share one list."""
    groups: dict[frozenset[str], list[str]] = {}
    for m in members:
        groups.setdefault(topic_sets[m], []).append(m)
    topic_groups: dict[str, list[int]] = {}
    for i, ts in enumerate(groups):
        for t in ts:
            if t in ppt:
                topic_groups.setdefault(t, []).append(i)
    member_lists = list(groups.values())
    by_groups: dict[tuple[int, ...], list[str]] = {}
    topic_subs: dict[str, list[str]] = {}
    for t, gs in topic_groups.items():
        key = tuple(gs)
        subs = by_groups.get(key)
        if subs is None:
            subs = by_groups[key] = sorted(chain.from_iterable(member_lists[i] for i in gs))
        topic_subs[t] = subs
    return topic_subs


def _water_fill(
    pool: list[TopicPartition], subs: list[str], count: dict[str, int], new: dict[str, list[TopicPartition]]
) -> None:
    """Give out ``pool`` exactly as popping a heap of (count, member id) per partition would, but in
    runs: while the set of members at the lowest count stays the same (``k`` of them), the ``j``-th
    of them by id gets every ``k``-th partition from the ``j``-th on. ``subs`` is sorted by id."""
    levels = list(map(count.__getitem__, subs))
    order = subs
    if min(levels) != max(levels):
        order = sorted(subs, key=count.__getitem__)  # stable: ties stay in member id order
        levels = list(map(count.__getitem__, order))
    n, pos, i, extra = len(pool), 0, 0, 0
    level = levels[0]
    active: list[str] = []  # members at the current level, by id
    while pos < n:
        j = bisect_right(levels, level, i)
        if j > i:
            active += order[i:j]
            active.sort()  # two sorted runs: a linear merge
            i = j
        k = len(active)
        # Rounds until the next members join at their count (or the pool runs out).
        end = n if j == len(order) else min(n, pos + k * (levels[j] - level))
        full, extra = divmod(end - pos, k)
        _deal(pool[pos:end], active, full, extra, new)
        level += full
        pos = end
    # Everyone active ends at the level reached; the first ``extra`` (by id) got one more.
    count.update(zip(active, repeat(level)))
    count.update(zip(active[:extra], repeat(level + 1)))


def _deal(
    seg: list[TopicPartition], members: list[str], rounds: int, extra: int, new: dict[str, list[TopicPartition]]
) -> None:
    """Deal ``seg`` round-robin over ``members``: ``rounds`` full rounds, then one more each for the
    first ``extra``. This runs once per member per topic, the general path's hottest loop, so it
    is all C: the full rounds are cut into rows of one partition per member (``zip`` of one
    iterator ``k`` times) and transposed into one column per member."""
    k = len(members)
    rows = zip(*[iter(seg[: rounds * k])] * k, strict=True)
    deque(map(list.extend, map(new.__getitem__, members), zip(*rows, strict=True)), maxlen=0)
    if extra:
        deque(map(list.append, map(new.__getitem__, members[:extra]), seg[rounds * k :]), maxlen=0)


def _place_racked(
    pool: list[TopicPartition],
    subs: list[str],
    count: dict[str, int],
    new: dict[str, list[TopicPartition]],
    cluster: ClusterMetadata,
    rack: Mapping[str, str | None],
) -> None:
    """Least-loaded placement one partition at a time, preferring a member on the partition's rack
    among the equally loaded."""
    heap = [(count[m], m) for m in subs]
    heapq.heapify(heap)
    for tp in pool:
        c, m = heapq.heappop(heap)
        rs = cluster.racks(tp[0], tp[1])
        if rs and rack[m] not in rs:
            m, c = _rack_tie_break(heap, c, m, rs, rack)
        new[m].append(tp)
        count[m] = c + 1
        heapq.heappush(heap, (c + 1, m))


def _rack_tie_break(
    heap: list[tuple[int, str]], c: int, m: str, rs: frozenset[str], rack: Mapping[str, str | None]
) -> tuple[str, int]:
    """Among members as loaded as ``m``, prefer one on a rack of the partition (bounded scan)."""
    popped: list[tuple[int, str]] = []
    chosen = m
    while heap and heap[0][0] == c and len(popped) < _RACK_TIE_SCAN:
        cand = heapq.heappop(heap)
        if rack[cand[1]] in rs:
            chosen = cand[1]
            popped.append((c, m))
            break
        popped.append(cand)
    for e in popped:
        if e[1] != chosen:
            heapq.heappush(heap, e)
    return chosen, c


def _balanced(topic_subs: Mapping[str, list[str]], count: Mapping[str, int]) -> bool:
    """True if no balancing move can exist: on every shared topic its subscribers' counts differ
    by at most one (holders are subscribers). Checked in C loops, so the usual case costs little."""
    if max(count.values()) - min(count.values()) <= 1:
        return True
    get = count.__getitem__
    return all(max(map(get, subs)) - min(map(get, subs)) <= 1 for subs in topic_subs.values() if len(subs) > 1)


def _balance_and_collect(
    members: list[str],
    topic_subs: Mapping[str, list[str]],
    kept0: Mapping[str, list[TopicPartition]],
    new: Mapping[str, list[TopicPartition]],
    count: dict[str, int],
    claims: Claims,
    cooperative: bool,
) -> dict[str, list[TopicPartition]]:
    """Balancing moves on per-topic holdings (kept first, then new), and the result from them."""
    holdings: dict[str, dict[str, list[TopicPartition]]] = {}
    for m in members:
        h: dict[str, list[TopicPartition]] = {}
        for tp in chain(kept0.get(m, ()), new[m]):
            h.setdefault(tp[0], []).append(tp)
        holdings[m] = h
    _balance(topic_subs, holdings, count)

    claimed = claims.claimed
    if claimed is None:
        claimed = set(chain.from_iterable(claims.by_member.values()))
    result: dict[str, list[TopicPartition]] = {}
    for m in members:
        h = holdings[m]
        lst = [tp for t in sorted(h) for tp in h[t]]
        if cooperative and claimed:
            # A claimed partition stays only with its sole claimant.
            own = set(claims.by_member.get(m, ()))
            lst = [tp for tp in lst if tp not in claimed or (tp in own and tp not in claims.contested)]
        result[m] = lst
    return result


def _balance(
    topic_subs: Mapping[str, list[str]],
    holdings: dict[str, dict[str, list[TopicPartition]]],
    count: dict[str, int],
) -> None:
    """Move partitions until no subscriber of a topic holds 2+ fewer than a holder of that topic."""
    topics = [t for t in sorted(topic_subs) if len(topic_subs[t]) > 1]
    changed = True
    while changed:
        changed = False
        for t in topics:
            subs = topic_subs[t]
            holders = [m for m in subs if holdings[m].get(t)]
            if not holders:
                continue
            low = min(count[m] for m in subs)
            if max(count[m] for m in holders) - low <= 1:
                continue
            maxh = [(-count[m], m) for m in holders]
            minh = [(count[m], m) for m in subs]
            heapq.heapify(maxh)
            heapq.heapify(minh)
            while maxh and minh:
                negc, h = maxh[0]
                if -negc != count[h] or not holdings[h].get(t):
                    heapq.heappop(maxh)
                    continue
                c, a = minh[0]
                if c != count[a]:
                    heapq.heappop(minh)
                    continue
                if count[h] - count[a] <= 1:
                    break
                # The newest partition of h goes: owned ones were listed first, so stickiness wins.
                tp = holdings[h][t].pop()
                holdings[a].setdefault(t, []).append(tp)
                count[h] -= 1
                count[a] += 1
                heapq.heappush(maxh, (-count[h], h))
                heapq.heappush(maxh, (-count[a], a))
                heapq.heappush(minh, (count[a], a))
                heapq.heappush(minh, (count[h], h))
                changed = True
