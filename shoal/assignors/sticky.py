"""The sticky assignors: "sticky" (eager, KIP-54/341) and "cooperative-sticky" (KIP-429).

Goals, in order: balance (partition counts differ by at most one where subscriptions
allow it), rack locality (KIP-881, when members and replicas have racks), stickiness
(partitions stay with their previous owner).

Two algorithms, as in Kafka's AbstractStickyAssignor:

- constrained (every member subscribes to the same topics): each member keeps up to its
  quota (floor or ceil of partitions/members) of what it owned; the rest is dealt out,
  least-loaded members first. O(P) with slices, no per-partition Python objects beyond
  the TopicPartitions of the result.
- general (unequal subscriptions): keep all valid owned partitions, give each unowned
  partition (most constrained topics first) to the least-loaded subscriber via a heap,
  then move partitions from members holding ``n`` to subscribers holding ``<= n - 2``
  until no such move exists (each move lowers the sum of squares, so it ends).

Cooperative: a partition whose previous owner is still a member is never given to
another member in the same rebalance; it is only dropped from the owner's assignment,
the owner revokes it, and the follow-up rebalance hands it out as unowned.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, filterfalse, repeat

from .base import PartitionAssignor, subscribed_partition_counts
from .sticky_user_data import (
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)
from .types import (
    COOPERATIVE,
    DEFAULT_GENERATION,
    EAGER,
    Assignment,
    ClusterMetadata,
    Subscription,
    TopicPartition,
)

_new_tp = tuple.__new__
# Sentinel owner for partitions claimed by several members of the same generation.
_MANY = "\x00many"
# How many equally-loaded candidates the general path looks through for a rack match.
_RACK_TIE_SCAN = 16

MemberData = tuple[Sequence[TopicPartition], int]


def _partitions_of(topic: str, n: int) -> Iterator[TopicPartition]:
    """topic-0 .. topic-(n-1) as TopicPartitions, built in C (no Python frame per partition)."""
    return map(_new_tp, repeat(TopicPartition, n), zip(repeat(topic, n), range(n), strict=True))


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    member_data: Mapping[str, MemberData],
    *,
    cooperative: bool,
    cluster: ClusterMetadata | None = None,
) -> dict[str, list[TopicPartition]]:
    """Sticky assignment. ``member_data[m]`` = (previously owned partitions, their generation)."""
    members = sorted(subscriptions)
    if not members:
        return {}
    topic_sets = {m: frozenset(subscriptions[m].topics) for m in members}
    first = topic_sets[members[0]]
    all_equal = all(ts == first for ts in topic_sets.values())

    # Only owners from the highest generation count (older claims are stale, as in Java).
    gens = {m: member_data[m][1] if m in member_data else DEFAULT_GENERATION for m in members}
    max_gen = max(gens.values())
    valid = [m for m in members if gens[m] == max_gen and m in member_data and member_data[m][0]]

    racks_on = cluster is not None and _use_racks(cluster, subscriptions, partitions_per_topic, topic_sets)

    if all_equal:
        counts = {t: partitions_per_topic[t] for t in first if t in partitions_per_topic}
        kept0: dict[str, list[TopicPartition]] = {}
        for m in valid:
            get = counts.get
            kept0[m] = [tp for tp in member_data[m][0] if 0 <= tp[1] < get(tp[0], 0)]
        owned_set, multi = _dedupe(kept0)
        topics = sorted(counts)
        if racks_on:
            assert cluster is not None
            return _constrained_racks(
                members, topics, counts, kept0, multi, subscriptions, cluster, cooperative
            )
        return _constrained(members, topics, counts, kept0, owned_set, multi, cooperative)

    kept0 = {}
    claims: dict[TopicPartition, str] = {}
    for m in valid:
        ts = topic_sets[m]
        lst = []
        for tp in member_data[m][0]:
            t, p = tp
            n = partitions_per_topic.get(t)
            if n is None or not 0 <= p < n:
                continue
            # Claims on topics the owner dropped still block a same-round transfer (cooperative).
            prev = claims.get(tp)
            claims[tp] = m if prev is None or prev == m else _MANY
            if t in ts:
                lst.append(tp)
        kept0[m] = lst
    _dedupe(kept0)
    return _general(
        members,
        topic_sets,
        partitions_per_topic,
        kept0,
        claims,
        subscriptions,
        cluster if racks_on else None,
        cooperative,
    )


def _dedupe(kept0: dict[str, list[TopicPartition]]) -> tuple[set[TopicPartition], set[TopicPartition]]:
    """Drop partitions claimed by several members (from all of them); returns (owned, multi)."""
    owned: set[TopicPartition] = set()
    total = 0
    for lst in kept0.values():
        owned.update(lst)
        total += len(lst)
    if len(owned) == total:
        return owned, set()
    owner: dict[TopicPartition, str] = {}
    multi: set[TopicPartition] = set()
    for m, lst in kept0.items():
        uniq = list(dict.fromkeys(lst))
        kept0[m] = uniq
        for tp in uniq:
            if owner.setdefault(tp, m) != m:
                multi.add(tp)
    if multi:
        for m, lst in kept0.items():
            kept0[m] = [tp for tp in lst if tp not in multi]
        owned -= multi
    return owned, multi


def _use_racks(
    cluster: ClusterMetadata,
    subscriptions: Mapping[str, Subscription],
    ppt: Mapping[str, int],
    topic_sets: Mapping[str, frozenset[str]],
) -> bool:
    """KIP-881: racks matter if members have racks and some partition is not on all of them."""
    consumer_racks = {s.rack_id for s in subscriptions.values() if s.rack_id is not None}
    if not consumer_racks or not cluster.has_racks:
        return False
    topics = set().union(*topic_sets.values())
    for t in topics:
        for p in range(ppt.get(t, 0)):
            rs = cluster.racks(t, p)
            if rs and not consumer_racks <= rs:
                return True
    return False


def _constrained(
    members: list[str],
    topics: list[str],
    counts: Mapping[str, int],
    kept0: dict[str, list[TopicPartition]],
    owned_set: set[TopicPartition],
    multi: set[TopicPartition],
    cooperative: bool,
) -> dict[str, list[TopicPartition]]:
    """All members subscribe to the same topics: quotas, then least-loaded-first dealing."""
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

    all_parts = chain.from_iterable(_partitions_of(t, counts[t]) for t in topics)
    if owned_set:
        if dropped:
            owned_set.difference_update(dropped)
        pool = list(filterfalse(owned_set.__contains__, all_parts))
    else:
        pool = list(all_parts)

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
        prev: dict[TopicPartition, str] = dict.fromkeys(multi, _MANY)
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
            for r in self.racks_of(tp[0], tp[1]):
                by_rack.setdefault(r, []).append(tp)
        cursor = dict.fromkeys(by_rack, 0)
        size, min_q, taken = self.size, self.min_q, self.taken
        queue = deque(sorted((m for m in self.members if size(m) < min_q and self.rack[m] in by_rack),
                             key=lambda m: (size(m), m)))
        while queue:
            m = queue.popleft()
            r = self.rack[m]
            lst = by_rack[r]  # type: ignore[index]
            i = cursor[r]  # type: ignore[index]
            while i < len(lst) and lst[i] in taken:
                i += 1
            cursor[r] = i  # type: ignore[index]
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


def _constrained_racks(
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
    free = [tp for t in topics for tp in _partitions_of(t, counts[t]) if tp not in quota.taken]
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


def _general(
    members: list[str],
    topic_sets: Mapping[str, frozenset[str]],
    ppt: Mapping[str, int],
    kept0: dict[str, list[TopicPartition]],
    claims: dict[TopicPartition, str],
    subscriptions: Mapping[str, Subscription],
    cluster: ClusterMetadata | None,
    cooperative: bool,
) -> dict[str, list[TopicPartition]]:
    """Unequal subscriptions: keep owned, least-loaded placement, then balancing moves."""
    topic_subs: dict[str, list[str]] = {}
    for m in members:
        for t in topic_sets[m]:
            if t in ppt:
                topic_subs.setdefault(t, []).append(m)

    holdings: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    count = dict.fromkeys(members, 0)
    kept_by_topic: dict[str, set[int]] = {}
    for m in members:
        h = holdings[m]
        for t, p in kept0.get(m, ()):
            h.setdefault(t, []).append(p)
            kept_by_topic.setdefault(t, set()).add(p)
        count[m] = len(kept0.get(m, ()))

    rack = {m: subscriptions[m].rack_id for m in members}
    # Most constrained topics (fewest subscribers) first, as Java sorts by potential consumers.
    for t in sorted(topic_subs, key=lambda t: (len(topic_subs[t]), t)):
        kp = kept_by_topic.get(t)
        n = ppt[t]
        parts = range(n) if not kp else [p for p in range(n) if p not in kp]
        if not parts:
            continue
        heap = [(count[m], m) for m in topic_subs[t]]
        heapq.heapify(heap)
        for p in parts:
            c, m = heapq.heappop(heap)
            if cluster is not None:
                rs = cluster.racks(t, p)
                if rs and rack[m] not in rs:
                    m, c = _rack_tie_break(heap, c, m, rs, rack)
            holdings[m].setdefault(t, []).append(p)
            count[m] = c + 1
            heapq.heappush(heap, (c + 1, m))

    _balance(topic_subs, holdings, count)

    result: dict[str, list[TopicPartition]] = {}
    for m in members:
        h = holdings[m]
        lst = [_new_tp(TopicPartition, (t, p)) for t in sorted(h) for p in h[t]]
        if cooperative:
            get = claims.get
            lst = [tp for tp in lst if get(tp, m) == m]
        result[m] = lst
    return result


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


def _balance(
    topic_subs: Mapping[str, list[str]],
    holdings: dict[str, dict[str, list[int]]],
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
                p = holdings[h][t].pop()
                holdings[a].setdefault(t, []).append(p)
                count[h] -= 1
                count[a] += 1
                heapq.heappush(maxh, (-count[h], h))
                heapq.heappush(maxh, (-count[a], a))
                heapq.heappush(minh, (count[a], a))
                heapq.heappush(minh, (count[h], h))
                changed = True


class _AbstractStickyAssignor(PartitionAssignor):
    """Shared state and entry points of the two sticky assignors."""

    _cooperative = False

    def __init__(self) -> None:
        self._partitions: list[TopicPartition] | None = None
        self._generation = DEFAULT_GENERATION

    def member_data(self, subscription: Subscription) -> MemberData:
        """(previously owned partitions, generation) of one member."""
        raise NotImplementedError

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        data = {m: self.member_data(s) for m, s in subscriptions.items()}
        return sticky_assign(partitions_per_topic, subscriptions, data, cooperative=self._cooperative)

    def assign_cluster(
        self, cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        ppt = subscribed_partition_counts(cluster, subscriptions)
        data = {m: self.member_data(s) for m, s in subscriptions.items()}
        result = sticky_assign(ppt, subscriptions, data, cooperative=self._cooperative, cluster=cluster)
        return {m: Assignment(ps) for m, ps in result.items()}

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._partitions = list(assignment.partitions)
        self._generation = generation


class StickyAssignor(_AbstractStickyAssignor):
    """Kafka's "sticky" strategy (eager): previous assignment travels in user data."""

    name = "sticky"
    supported_protocols = (EAGER,)

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        if self._partitions is None:
            return None
        return encode_sticky_user_data(self._partitions, self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        if subscription.user_data:
            parts, gen = decode_sticky_user_data(subscription.user_data)
            return parts, DEFAULT_GENERATION if gen is None else gen
        # No user data (e.g. built by hand through the simple API): use owned_partitions.
        return subscription.owned_partitions, subscription.generation_id


class CooperativeStickyAssignor(_AbstractStickyAssignor):
    """Kafka's "cooperative-sticky" strategy (KIP-429 incremental rebalancing)."""

    name = "cooperative-sticky"
    supported_protocols = (EAGER, COOPERATIVE)
    _cooperative = True

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        return encode_cooperative_user_data(self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        gen = subscription.generation_id
        if gen == DEFAULT_GENERATION:
            gen = decode_cooperative_user_data(subscription.user_data)
        return subscription.owned_partitions, gen
