"""The `range` server-side assignor, as Kafka 4.0's group coordinator `RangeAssignor`.

For every topic, its subscribers are put in one fixed order and handed contiguous ranges of
partitions: each gets `partitions // subscribers`, and the first `partitions % subscribers` one
more. The order puts static members (those with an instance id) first, by instance id, and
then dynamic members by member id. That is all the stickiness it has: the current assignment
is not read, but a static member that rejoins under a new member id sorts where it did before
and so gets the same ranges back. When every member subscribes to the same topics and the topics
have the same number of partitions, a member gets the same partition numbers of every topic
(co-partitioning, what stream joins want).

Racks are ignored, as Kafka 4.0's server-side RangeAssignor ignores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from shoal.assignors.server._order import java_string_key
from shoal.assignors.server.spec import Assignment, GroupSpec, MemberSpec, TopicSpec


def range_member_order(members: Mapping[str, MemberSpec]) -> list[str]:
    """Member ids in the order `range` deals out partitions: static members first, sorted by
    instance id; then dynamic members, sorted by member id (both in Java's string order)."""

    def key(member_id: str) -> tuple[int, bytes, bytes]:
        instance_id = members[member_id].instance_id
        member_key = java_string_key(member_id)
        if instance_id is not None:
            # Two members claiming one instance id should not happen; break the tie by member
            # id so the order never depends on the mapping's order.
            return 0, java_string_key(instance_id), member_key
        return 1, member_key, b""

    return sorted(members, key=key)


class RangeAssignor:
    """Kafka's server-side `range` assignor: per-topic contiguous ranges, co-partitioned."""

    name = "range"

    def assign(self, group: GroupSpec, topics: Mapping[UUID, TopicSpec]) -> dict[str, Assignment]:
        """Every member's assignment; each member maps to {} if it gets nothing."""
        order = range_member_order(group.members)

        # Kafka counts, per topic, the members subscribed to it; a homogeneous group is just
        # the case where that is every member, so one pass covers both of Kafka's code paths.
        subscriber_counts: dict[UUID, int] = {}
        for member_id in order:
            for topic_id in group.members[member_id].subscribed_topic_ids:
                if topic_id in topics:
                    subscriber_counts[topic_id] = subscriber_counts.get(topic_id, 0) + 1

        # Per topic: where the next range starts and how many extra partitions remain to hand
        # out, one each, to the first subscribers in `order`.
        next_start = dict.fromkeys(subscriber_counts, 0)
        extras_left = {t: topics[t].num_partitions % n for t, n in subscriber_counts.items()}

        result: dict[str, Assignment] = {}
        for member_id in order:
            assignment: Assignment = {}
            for topic_id in group.members[member_id].subscribed_topic_ids:
                if topic_id not in subscriber_counts:
                    continue  # not in the metadata: nothing to assign
                num_partitions = topics[topic_id].num_partitions
                quota = num_partitions // subscriber_counts[topic_id]
                if extras_left[topic_id] > 0:
                    quota += 1
                    extras_left[topic_id] -= 1
                start = next_start[topic_id]
                end = min(start + quota, num_partitions)
                next_start[topic_id] = end
                if start < end:
                    assignment[topic_id] = frozenset(range(start, end))
            result[member_id] = assignment
        # Report members in the caller's order, which is the natural one to read.
        return {member_id: result[member_id] for member_id in group.members}
