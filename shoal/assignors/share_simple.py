"""The share groups' `simple` assignor (KIP-932; Kafka's SimpleAssignor), as a pure function.

Every partition of the subscribed topics is assigned. With fewer members than partitions each
partition goes to one member; with more members than partitions a partition is shared: each
partition has ``desired sharing = ceil(members / partitions)`` members, and each member a desired
count of assignments (the ``sharing * partitions`` assignments spread over the members, counts
differing by at most one). Balance comes first, then stickiness: a member keeps what it had as
long as neither its partition nor itself is over its desired count.

Homogeneous subscriptions (every member subscribes to the same topics) are balanced over all the
subscribed partitions at once (Kafka's SimpleHomogeneousAssignmentBuilder); heterogeneous ones topic
by topic, among the members subscribed to it (SimpleHeterogeneousAssignmentBuilder).

Kafka's builders walk Java hash maps, so which member gives up or takes which partition on a tie is
Kafka's hash order; here ties go by sorted member id and (topic id, partition) order, so the result is
deterministic and has Kafka's shape (sizes, sharing, stickiness), not always its exact choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from math import ceil
from uuid import UUID

from shoal.assignors.server.spec import Assignment, GroupSpec, SubscriptionType, TopicSpec

TP = tuple[UUID, int]


def desired_counts(num_members: int, num_partitions: int) -> tuple[int, list[int]]:
    """(desired sharing of each partition, desired assignment count of each member by index)."""
    if num_members == 0 or num_partitions == 0:
        return 0, [0] * num_members
    sharing = (num_members + num_partitions - 1) // num_partitions
    precise = Fraction(sharing * num_partitions, num_members)
    return sharing, [ceil(precise * (i + 1)) - ceil(precise * i) for i in range(num_members)]


def spread(members: list[str], partitions: list[TP], old: Mapping[str, set[TP]]) -> dict[str, set[TP]]:
    """Assign `partitions` (in order) to `members` (in order), sticking to `old` where balance allows."""
    sharing, counts = desired_counts(len(members), len(partitions))
    desired = dict(zip(members, counts, strict=True))
    targets = set(partitions)
    held: dict[str, set[TP]] = {m: set(old.get(m, set())) & targets for m in members}
    holders: dict[TP, list[str]] = {tp: [] for tp in partitions}
    for m in members:
        for tp in sorted(held[m]):
            holders[tp].append(m)
    _revoke_overshared(partitions, holders, held, desired, sharing)
    _revoke_overfilled(members, holders, held, desired)
    _assign_remaining(members, partitions, holders, held, desired, sharing)
    return held


def _revoke_overshared(partitions: list[TP], holders: dict[TP, list[str]], held: dict[str, set[TP]],
                       desired: dict[str, int], sharing: int) -> None:
    """A partition held by more members than its sharing loses the most overfilled of them first."""
    for tp in partitions:
        while len(holders[tp]) > sharing:
            victim = max(holders[tp], key=lambda m: (len(held[m]) - desired[m], m))
            holders[tp].remove(victim)
            held[victim].discard(tp)


def _revoke_overfilled(members: list[str], holders: dict[TP, list[str]], held: dict[str, set[TP]],
                       desired: dict[str, int]) -> None:
    """A member over its desired count gives up its most shared partitions (then its last ones)."""
    for m in members:
        while len(held[m]) > desired[m]:
            tp = max(held[m], key=lambda t: (len(holders[t]), t))
            held[m].discard(tp)
            holders[tp].remove(m)


def _assign_remaining(members: list[str], partitions: list[TP], holders: dict[TP, list[str]],
                      held: dict[str, set[TP]], desired: dict[str, int], sharing: int) -> None:
    """Partitions short of their sharing go round-robin to members short of their count; a partition
    that every short member already holds stays short (Kafka tolerates that slight imbalance)."""
    cursor = 0
    for tp in partitions:
        while len(holders[tp]) < sharing:
            unfilled = [m for m in members if len(held[m]) < desired[m]]
            if not unfilled:
                return
            candidates = [m for m in unfilled if m not in holders[tp]]
            if not candidates:
                break
            # the next short member at or after the cursor, in member order
            order = sorted(candidates, key=lambda m: (members.index(m) < cursor, members.index(m)))
            chosen = order[0]
            holders[tp].append(chosen)
            held[chosen].add(tp)
            cursor = (members.index(chosen) + 1) % len(members)


def _as_assignment(partitions: set[TP]) -> Assignment:
    out: dict[UUID, set[int]] = {}
    for topic_id, p in partitions:
        out.setdefault(topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


class SimpleAssignor:
    """Kafka's share-group assignor `simple` (group.share.assignors' default)."""

    name = "simple"

    def assign(self, group: GroupSpec, topics: Mapping[UUID, TopicSpec]) -> dict[str, Assignment]:
        """member id -> topic id -> partitions, an entry (maybe {}) for every member. Subscribed
        topics missing from `topics` have nothing to assign."""
        members = sorted(group.members)
        old = {m: {(t, p) for t, ps in group.members[m].assigned.items() for p in ps} for m in members}
        result: dict[str, set[TP]] = {m: set() for m in members}
        if group.subscription_type == SubscriptionType.HOMOGENEOUS and members:
            subscribed = group.members[members[0]].subscribed_topic_ids
            parts = _partitions(subscribed, topics)
            result.update(spread(members, parts, old))
        else:
            for topic_id in sorted({t for m in group.members.values() for t in m.subscribed_topic_ids}):
                subscribers = [m for m in members if topic_id in group.members[m].subscribed_topic_ids]
                parts = _partitions({topic_id}, topics)
                topic_old = {m: {tp for tp in old[m] if tp[0] == topic_id} for m in subscribers}
                for m, tps in spread(subscribers, parts, topic_old).items():
                    result[m] |= tps
        return {m: _as_assignment(tps) for m, tps in result.items()}


def _partitions(topic_ids: frozenset[UUID] | set[UUID], topics: Mapping[UUID, TopicSpec]) -> list[TP]:
    return [(t, p) for t in sorted(topic_ids) if t in topics for p in range(topics[t].num_partitions)]


SHARE_ASSIGNORS: dict[str, SimpleAssignor] = {SimpleAssignor.name: SimpleAssignor()}
