"""The heterogeneous half of the `uniform` assignor: Kafka 4.0's
`UniformHeterogeneousAssignmentBuilder`, for groups whose members subscribe to different topics.

Three steps, as in Kafka:

1. every member keeps the partitions it holds of topics it still subscribes to;
2. the partitions nobody holds are dealt, topic by topic, to the topic's least loaded
   subscribers (counting every partition a member holds, of any topic);
3. topic by topic, partitions move from a topic's most loaded subscribers to its least loaded
   ones until their counts differ by at most one; the round over the topics repeats until one
   moves nothing, or 16 times at most (Kafka's bound: overlapping subscriptions can otherwise
   take long to settle, at the price of an almost-balanced result).

Topics are visited by partitions per subscriber (descending), then subscriber count
(ascending), then topic id, so the most constrained topics are placed first. Members are
numbered in sorted member-id order; ties between equally loaded members go to the lower number.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from uuid import UUID

from shoal.assignors.server._order import java_string_key, uuid_key
from shoal.assignors.server.spec import Assignment, MemberSpec, TopicSpec

# Kafka's MAX_ITERATION_COUNT: rounds over the topics in the final balancing step.
MAX_BALANCING_ROUNDS = 16

_NOBODY = -1


class _Group:
    """The assignment being built: who holds what, and how much each member holds."""

    def __init__(self, members: Mapping[str, MemberSpec], topics: Mapping[UUID, TopicSpec]) -> None:
        self.member_ids = sorted(members, key=java_string_key)
        self.num_partitions = {t: spec.num_partitions for t, spec in topics.items()}
        # Subscribers of each known topic, by member number, ascending.
        self.subscribers: dict[UUID, list[int]] = {}
        for index, member_id in enumerate(self.member_ids):
            for topic_id in sorted(members[member_id].subscribed_topic_ids, key=uuid_key):
                if topic_id in topics:
                    self.subscribers.setdefault(topic_id, []).append(index)
        self.owner = {t: [_NOBODY] * self.num_partitions[t] for t in self.subscribers}
        self.held: list[dict[UUID, set[int]]] = [{} for _ in self.member_ids]
        self.sizes = [0] * len(self.member_ids)

    def keep_current(self, members: Mapping[str, MemberSpec]) -> None:
        """Step 1: each member keeps what it holds of the topics it still subscribes to."""
        for index, member_id in enumerate(self.member_ids):
            member = members[member_id]
            for topic_id in sorted(member.assigned, key=uuid_key):
                if topic_id not in self.owner or topic_id not in member.subscribed_topic_ids:
                    continue  # unsubscribed or unknown topic: dropped
                owners = self.owner[topic_id]
                for p in sorted(member.assigned[topic_id]):
                    # Out-of-range ids cannot come from Kafka; a partition claimed twice in the
                    # input goes to its first claimant so the result stays an exact cover.
                    if 0 <= p < len(owners) and owners[p] == _NOBODY:
                        self.give(topic_id, p, index)

    def give(self, topic_id: UUID, partition: int, member: int) -> None:
        """Assign a partition to a member, taking it from its current holder if any."""
        owners = self.owner[topic_id]
        previous = owners[partition]
        if previous != _NOBODY:
            partitions = self.held[previous][topic_id]
            partitions.discard(partition)
            if not partitions:
                del self.held[previous][topic_id]
            self.sizes[previous] -= 1
        owners[partition] = member
        self.held[member].setdefault(topic_id, set()).add(partition)
        self.sizes[member] += 1

    def topic_order(self, topic_ids: Iterable[UUID]) -> list[UUID]:
        """Most partitions per subscriber first, then fewest subscribers, then topic id."""

        def key(topic_id: UUID) -> tuple[Fraction, int, tuple[int, int]]:
            count = len(self.subscribers[topic_id])
            return -Fraction(self.num_partitions[topic_id], count), count, uuid_key(topic_id)

        return sorted(topic_ids, key=key)

    def result(self) -> dict[str, Assignment]:
        return {
            member_id: {t: frozenset(ps) for t, ps in self.held[index].items()}
            for index, member_id in enumerate(self.member_ids)
        }


class _Balancer:
    """Kafka's MemberAssignmentBalancer: hands out the least loaded and the most loaded of one
    topic's subscribers, in turn, as partitions are given to and taken from them.

    The subscribers are sorted by load. The least loaded range [0, low_end) holds the members
    at the lowest level (`low_level`, the load they had before this round of gifts) and is dealt
    round-robin; once each has had one, the level rises and the range widens to the members now
    level with it. The most loaded range [high_start, high_end) works the same way from the top,
    downwards; members with nothing of the topic to give are swapped out of it. The topic is
    balanced once the two levels are at most one apart.
    """

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.order: list[int] = []
        self.low_end = self.low_next = 0
        self.low_level = 0
        self.high_start = self.high_end = self.high_next = 0
        self.high_level = 0

    def reset(self, members: list[int]) -> int:
        """Start over with these members; returns the gap between the most and least loaded."""
        sizes = self.sizes
        self.order = sorted(members, key=lambda m: (sizes[m], m))
        count = len(self.order)
        self.low_end = self.low_next = 0
        self.low_level = sizes[self.order[0]] - 1
        self.high_start = self.high_end = count
        self.high_level = sizes[self.order[-1]] + 1
        self.high_next = count - 1
        return sizes[self.order[-1]] - sizes[self.order[0]]

    def next_least_loaded(self) -> int:
        """The member to give the next partition to (there is always one)."""
        if self.low_next >= self.low_end:
            # Everyone in the range has had one more: raise the level and take in the members
            # that are now level with it.
            self.low_level += 1
            while self.low_end < len(self.order) and self.sizes[self.order[self.low_end]] == self.low_level:
                self.low_end += 1
            self.low_next = 0
        member = self.order[self.low_next]
        self.low_next += 1
        return member

    def next_most_loaded(self) -> int:
        """The member to take the next partition from, or -1 when nobody is left to give."""
        if self.high_next < self.high_start:
            if self.high_end <= self.high_start and self.high_start > 0:
                # The range was emptied by exclusions: restart it from the next member down,
                # whatever its load, so that it cannot stay empty.
                self.high_level = self.sizes[self.order[self.high_start - 1]]
            else:
                self.high_level -= 1
            while self.high_start > 0 and self.sizes[self.order[self.high_start - 1]] == self.high_level:
                self.high_start -= 1
            self.high_next = self.high_end - 1
        if self.high_next < 0:
            return -1
        member = self.order[self.high_next]
        self.high_next -= 1
        return member

    def exclude_last_most_loaded(self) -> None:
        """Drop the member `next_most_loaded` just returned from the most loaded range."""
        slot = self.high_next + 1
        last = self.high_end - 1
        self.order[slot], self.order[last] = self.order[last], self.order[slot]
        self.high_end -= 1

    def is_balanced(self) -> bool:
        return self.high_level - self.low_level <= 1


def _deal_unowned(group: _Group, balancer: _Balancer) -> None:
    """Step 2: deal the partitions nobody holds to each topic's least loaded subscribers."""
    unowned = {
        t: [p for p, holder in enumerate(owners) if holder == _NOBODY] for t, owners in group.owner.items()
    }
    for topic_id in group.topic_order(t for t, ps in unowned.items() if ps):
        balancer.reset(group.subscribers[topic_id])
        for p in unowned[topic_id]:
            group.give(topic_id, p, balancer.next_least_loaded())


def _balance_topic(group: _Group, balancer: _Balancer, topic_id: UUID) -> int:
    """Step 3 for one topic: move its partitions from its most to its least loaded subscribers
    until they are within one of each other. Returns how many partitions moved."""
    if balancer.reset(group.subscribers[topic_id]) <= 1:
        return 0
    owners = group.owner[topic_id]
    # The topic's partitions grouped by holder, so a holder's last one is found in O(1).
    partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
    start: dict[int, int] = {}
    end: dict[int, int] = {}  # exclusive
    for position, p in enumerate(partitions):
        start.setdefault(owners[p], position)
        end[owners[p]] = position + 1

    moved = 0
    while not balancer.is_balanced():
        giver = balancer.next_most_loaded()
        while giver != -1 and end.get(giver, 0) - start.get(giver, 0) <= 0:
            balancer.exclude_last_most_loaded()  # holds none of this topic (any more)
            giver = balancer.next_most_loaded()
        if giver == -1:
            break  # the topic's partitions ran out before its subscribers balanced
        end[giver] -= 1
        partition = partitions[end[giver]]
        taker = balancer.next_least_loaded()
        if balancer.is_balanced():
            break
        group.give(topic_id, partition, taker)
        moved += 1
    return moved


def _balance(group: _Group, balancer: _Balancer) -> None:
    """Step 3: rounds over the topics that have two or more subscribers, until a full round
    moves nothing or MAX_BALANCING_ROUNDS rounds have run."""
    order = group.topic_order(t for t, subs in group.subscribers.items() if len(subs) >= 2)
    last_changed = -1  # the last topic that moved anything (or the first visited)
    for _ in range(MAX_BALANCING_ROUNDS):
        for index, topic_id in enumerate(order):
            if index == last_changed:
                return  # a whole round since the last move: nothing more will move
            if _balance_topic(group, balancer, topic_id) > 0 or last_changed == -1:
                last_changed = index


def assign_heterogeneous(
    members: Mapping[str, MemberSpec], topics: Mapping[UUID, TopicSpec]
) -> dict[str, Assignment]:
    """Kafka's heterogeneous uniform builder: keep, deal what is left, then balance per topic."""
    group = _Group(members, topics)
    if not group.subscribers:
        return group.result()
    group.keep_current(members)
    balancer = _Balancer(group.sizes)
    _deal_unowned(group, balancer)
    _balance(group, balancer)
    return group.result()
