"""The `uniform` server-side assignor, as Kafka 4.0's group coordinator `UniformAssignor`
(Kafka's default for consumer groups).

It aims, in this order, for balance (members' partition counts differ by at most one, among
the members that could take a partition) and stickiness (a member keeps what it has unless
balance or its subscription says otherwise). Like Kafka, it picks one of two builders:

- every member subscribes to the same topics: the homogeneous builder here, a quota per
  member (total // members, the first total % members members one more) and a single pass;
- otherwise: `uniform_heterogeneous`, which balances topic by topic.

Racks: the uniform builders of Kafka 4.0 (the reference this follows) never read the members' or
the partitions' racks, so `MemberSpec.rack_id` and `TopicSpec.partition_racks` are ignored here
too; a rack-aware uniform assignor would be a deliberate departure from Kafka.

Members are taken in sorted member-id order. Kafka iterates a Java HashMap of member ids, whose
order is an accident of hashing; its tests pin sorted order, and so do we.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from shoal.assignors.server._order import java_hash_set_order, java_string_key, uuid_key
from shoal.assignors.server.spec import Assignment, GroupSpec, MemberSpec, SubscriptionType, TopicSpec
from shoal.assignors.server.uniform_heterogeneous import assign_heterogeneous


class UniformAssignor:
    """Kafka's server-side `uniform` assignor: balanced, then sticky."""

    name = "uniform"

    def assign(self, group: GroupSpec, topics: Mapping[UUID, TopicSpec]) -> dict[str, Assignment]:
        """Every member's assignment; each member maps to {} if it gets nothing."""
        if not group.members:
            return {}
        # Kafka decides by the subscribed topic *names*, unknown topics included; when those
        # differ but the known topics coincide, the heterogeneous builder balances just as well.
        if group.subscription_type is SubscriptionType.HOMOGENEOUS:
            result = assign_homogeneous(group.members, topics)
        else:
            result = assign_heterogeneous(group.members, topics)
        return {member_id: result[member_id] for member_id in group.members}


def _valid_partitions(partitions: frozenset[int], num_partitions: int) -> list[int]:
    # Ascending, so that which partitions are kept over a quota does not depend on how the set
    # was built. Ids past the topic's end cannot come from Kafka (partitions only grow) but are
    # dropped rather than handed back.
    return sorted(p for p in partitions if 0 <= p < num_partitions)


def _unowned_partitions(
    members: Mapping[str, MemberSpec], topics: Mapping[UUID, TopicSpec], subscribed: list[UUID]
) -> list[tuple[UUID, int]]:
    """The partitions no member currently holds, topic by topic in `subscribed` order: the head
    of the list the homogeneous builder deals (partitions revoked over quota come after)."""
    subscribed_set = frozenset(subscribed)
    owned = {t: bytearray(topics[t].num_partitions) for t in subscribed}
    for member in members.values():
        for topic_id, partitions in member.assigned.items():
            if topic_id in subscribed_set:
                for p in _valid_partitions(partitions, topics[topic_id].num_partitions):
                    owned[topic_id][p] = 1
    return [(t, p) for t in subscribed for p in range(topics[t].num_partitions) if not owned[t][p]]


def assign_homogeneous(
    members: Mapping[str, MemberSpec], topics: Mapping[UUID, TopicSpec]
) -> dict[str, Assignment]:
    """Kafka's `UniformHomogeneousAssignmentBuilder`: for a group whose members all subscribe to
    the same topics. Each member keeps up to its quota of its current partitions; what is left
    is dealt, in one list, to the members still under quota."""
    member_ids = sorted(members, key=java_string_key)
    subscribed = [t for t in java_hash_set_order(members[member_ids[0]].subscribed_topic_ids) if t in topics]
    if not subscribed:
        return {member_id: {} for member_id in member_ids}

    total = sum(topics[t].num_partitions for t in subscribed)
    min_quota, extra = divmod(total, len(member_ids))
    subscribed_set = frozenset(subscribed)

    to_deal = _unowned_partitions(members, topics, subscribed)

    kept: dict[str, dict[UUID, list[int]]] = {}
    taken: dict[UUID, set[int]] = {t: set() for t in subscribed}
    room: list[tuple[str, int]] = []  # members under quota, with how many more they take
    revoked: list[tuple[UUID, int]] = []
    for index, member_id in enumerate(member_ids):
        # Kafka gives the extra partitions to the first members in its order, not to those that
        # already hold more, so a re-run is stable but a join can shift an extra elsewhere.
        quota = min_quota + 1 if index < extra else min_quota
        mine: dict[UUID, list[int]] = {}
        assigned = members[member_id].assigned
        # Kafka walks the member's map in its own iteration order, which decides what is
        # revoked over quota; topic id order is canonical (the input dict's order cannot
        # matter) and is the order Kafka's worked examples build those maps in.
        for topic_id in sorted((t for t in assigned if t in subscribed_set), key=uuid_key):
            for p in _valid_partitions(assigned[topic_id], topics[topic_id].num_partitions):
                if p in taken[topic_id]:
                    continue  # claimed twice in the input: the first claimant keeps it
                if quota > 0:
                    quota -= 1
                    taken[topic_id].add(p)
                    mine.setdefault(topic_id, []).append(p)
                else:
                    revoked.append((topic_id, p))
        kept[member_id] = mine
        if quota > 0:
            room.append((member_id, quota))

    # With duplicate claims in the input, a partition can be revoked from one member and kept by
    # another, or revoked twice; deal each such partition once, and only if nobody kept it.
    for topic_id, p in revoked:
        if p not in taken[topic_id]:
            taken[topic_id].add(p)
            to_deal.append((topic_id, p))
    position = 0
    for member_id, wanted in room:
        mine = kept[member_id]
        for topic_id, p in to_deal[position : position + wanted]:
            mine.setdefault(topic_id, []).append(p)
        position += wanted
    if position < len(to_deal):  # cannot happen: the quotas add up to the partition count
        raise AssertionError("uniform assignor left partitions unassigned")

    return {member_id: {t: frozenset(ps) for t, ps in kept[member_id].items()} for member_id in member_ids}
