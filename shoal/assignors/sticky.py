"""The sticky assignors: "sticky" (eager, KIP-54/341) and "cooperative-sticky" (KIP-429).

Goals, in order: balance (partition counts differ by at most one where subscriptions
allow it), rack locality (KIP-881, when members and replicas have racks), stickiness
(partitions stay with their previous owner).

Two algorithms, as in Kafka's AbstractStickyAssignor:

- constrained (every member subscribes to the same topics), in :mod:`.sticky_constrained`:
  each member keeps up to its quota (floor or ceil of partitions/members) of what it owned;
  the rest is dealt out, least-loaded members first.
- general (unequal subscriptions), in :mod:`.sticky_general`: keep all valid owned
  partitions, give each unowned partition (most constrained topics first) to the
  least-loaded subscriber, then move partitions from members holding ``n`` to
  subscribers holding ``<= n - 2`` until no such move exists.

This module validates the previous ownership and picks the path. At a million
partitions the work per partition is kept to C loops (map, slices, sorts, and sets of
partitions as bytearrays, :mod:`.sticky_index`), and the cyclic garbage collector is
paused (:func:`_gc_paused`).

Cooperative: a partition whose previous owner is still a member is never given to
another member in the same rebalance; it is only dropped from the owner's assignment,
the owner revokes it, and the follow-up rebalance hands it out as unowned.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from itertools import chain

from .base import PartitionAssignor, subscribed_partition_counts
from .sticky_common import MemberData, topic_of
from .sticky_constrained import constrained, constrained_racks
from .sticky_general import Claims, general
from .sticky_index import PartitionMask
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

__all__ = ["CooperativeStickyAssignor", "MemberData", "StickyAssignor", "sticky_assign"]


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector. An assignment allocates about one object per partition
    and makes no reference cycles; with the collector on, CPython re-scans the whole growing heap
    several times over, which was up to half the run time at a million partitions."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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
    topic_sets = _topic_sets(members, subscriptions)
    first = topic_sets[members[0]]
    all_equal = all(ts is first or ts == first for ts in topic_sets.values())

    # Only owners from the highest generation count (older claims are stale, as in Java).
    gens = {m: member_data[m][1] if m in member_data else DEFAULT_GENERATION for m in members}
    max_gen = max(gens.values())
    valid = [m for m in members if gens[m] == max_gen and m in member_data and member_data[m][0]]

    racks_on = cluster is not None and _use_racks(cluster, subscriptions, partitions_per_topic, topic_sets)

    if not all_equal:
        return _assign_unequal(
            members, topic_sets, partitions_per_topic, valid, member_data, subscriptions,
            cluster if racks_on else None, cooperative,
        )
    counts = {t: partitions_per_topic[t] for t in first if t in partitions_per_topic}
    topics = sorted(counts)
    if racks_on:
        assert cluster is not None
        kept0 = _kept_equal(valid, member_data, counts)
        return constrained_racks(
            members, topics, counts, kept0, _dedupe(kept0)[1], subscriptions, cluster, cooperative
        )
    kept0 = {m: list(member_data[m][0]) for m in valid}
    mask = _owned_mask(counts, kept0)
    multi: set[TopicPartition] = set()
    if mask is None:
        # Some owned partition no longer exists (its topic shrank or is gone) or has two owners.
        kept0 = _kept_equal(valid, member_data, counts)
        _, multi = _dedupe(kept0)
        mask = _owned_mask(counts, kept0)
        assert mask is not None
    return constrained(members, topics, counts, kept0, mask, multi, cooperative)


def _assign_unequal(
    members: list[str],
    topic_sets: Mapping[str, frozenset[str]],
    ppt: Mapping[str, int],
    valid: list[str],
    member_data: Mapping[str, MemberData],
    subscriptions: Mapping[str, Subscription],
    cluster: ClusterMetadata | None,
    cooperative: bool,
) -> dict[str, list[TopicPartition]]:
    """The general path: validate and dedupe the owned partitions, then :func:`general`."""
    subscribed = set().union(*topic_sets.values())
    counts = {t: n for t, n in ppt.items() if t in subscribed}
    kept0, claimed, dropped_topics = _kept_unequal(valid, member_data, topic_sets, ppt, check_each=False)
    mask = _owned_mask(counts, kept0)
    multi: set[TopicPartition] = set()
    if mask is None:
        # Some owned partition no longer exists (its topic shrank or is gone) or has two owners.
        kept0, claimed, dropped_topics = _kept_unequal(valid, member_data, topic_sets, ppt, check_each=True)
        _, multi = _dedupe(kept0)
        mask = _owned_mask(counts, kept0)
        assert mask is not None
    claims = _claims(claimed, multi, dropped_topics) if cooperative else Claims(None, set(), {})
    return general(members, topic_sets, ppt, kept0, mask, claims, subscriptions, cluster, cooperative)


def _owned_mask(counts: Mapping[str, int], kept0: Mapping[str, list[TopicPartition]]) -> PartitionMask | None:
    """The owned partitions as a mask of the partitions of ``counts``; None if some partition no
    longer exists or is owned twice, which the caller then sorts out partition by partition."""
    parts = list(chain.from_iterable(kept0.values()))
    mask = PartitionMask(counts)
    if not mask.mark(parts) or mask.count() != len(parts):
        return None
    return mask


def _topic_sets(members: list[str], subscriptions: Mapping[str, Subscription]) -> dict[str, frozenset[str]]:
    """Each member's topics as a set, one set per distinct topic list: members mostly share their
    subscription, and hashing a tuple of (already hashed) names is far cheaper than building a set."""
    shared: dict[tuple[str, ...], frozenset[str]] = {}
    sets: dict[str, frozenset[str]] = {}
    for m in members:
        key = tuple(subscriptions[m].topics)
        ts = shared.get(key)
        if ts is None:
            ts = shared[key] = frozenset(key)
        sets[m] = ts
    return sets


def _kept_equal(
    valid: list[str], member_data: Mapping[str, MemberData], counts: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    """Each member's owned partitions that still exist (all members share the topics ``counts``)."""
    get = counts.get
    return {m: [tp for tp in member_data[m][0] if 0 <= tp[1] < get(tp[0], 0)] for m in valid}


def _kept_unequal(
    valid: list[str],
    member_data: Mapping[str, MemberData],
    topic_sets: Mapping[str, frozenset[str]],
    ppt: Mapping[str, int],
    *,
    check_each: bool,
) -> tuple[dict[str, list[TopicPartition]], dict[str, list[TopicPartition]], bool]:
    """(each member's owned partitions that exist, on topics it subscribes to; each member's owned
    partitions that exist, also on topics it dropped: those still block a same-round transfer;
    whether any member claims a partition on a topic it dropped). Unless ``check_each``, the
    partition numbers of lists whose topics are all fine are left for :func:`_owned_mask` to check."""
    kept0: dict[str, list[TopicPartition]] = {}
    claimed: dict[str, list[TopicPartition]] = {}
    dropped_topics = False
    for m in valid:
        owned = member_data[m][0]
        ts = topic_sets[m]
        if not check_each and set(map(topic_of, owned)) <= ts:
            kept0[m] = claimed[m] = list(owned)
            continue
        kept, claims = [], []
        for tp in owned:
            n = ppt.get(tp[0])
            if n is None or not 0 <= tp[1] < n:
                continue
            claims.append(tp)
            if tp[0] in ts:
                kept.append(tp)
        kept0[m], claimed[m] = kept, claims
        dropped_topics = dropped_topics or len(claims) > len(kept)
    return kept0, claimed, dropped_topics


def _claims(claimed: dict[str, list[TopicPartition]], multi: set[TopicPartition], dropped_topics: bool) -> Claims:
    """The cooperative view of ``claimed`` (member -> claimed partitions). ``multi``: the kept
    partitions with two owners; unless some claim is on a topic its owner dropped, those are all
    the contested claims, found without another pass over the partitions."""
    if not dropped_topics:
        return Claims(None, multi, claimed)
    # A member's own duplicates are one claim; two members claiming a partition contest it.
    per_partition = Counter(chain.from_iterable(map(set, claimed.values())))
    contested = {tp for tp, n in per_partition.items() if n > 1}
    return Claims(set(per_partition), contested, claimed)


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
        with _gc_paused():
            data = {m: self.member_data(s) for m, s in subscriptions.items()}
            return sticky_assign(partitions_per_topic, subscriptions, data, cooperative=self._cooperative)

    def assign_cluster(
        self, cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        ppt = subscribed_partition_counts(cluster, subscriptions)
        with _gc_paused():
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
