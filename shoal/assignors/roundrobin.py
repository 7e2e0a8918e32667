"""RoundRobinAssignor: all partitions in (topic, partition) order dealt to members in turn.

A circular cursor walks the members in Java's order; each partition goes to the next
member (from the cursor) that subscribes to its topic, and the cursor moves past it.
"""

from __future__ import annotations

from collections.abc import Mapping

from .base import PartitionAssignor
from .types import Subscription, TopicPartition, member_sort_key

_new_tp = tuple.__new__


class RoundRobinAssignor(PartitionAssignor):
    """Kafka's "roundrobin" strategy (eager)."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        order = sorted(subscriptions, key=lambda m: member_sort_key(m, subscriptions[m]))
        result: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        k = len(order)
        if not k:
            return result
        topic_sets = [frozenset(subscriptions[m].topics) for m in order]
        topics = sorted({t for ts in topic_sets for t in ts if t in partitions_per_topic})
        lists = [result[m] for m in order]
        cursor = 0
        if all(ts == topic_sets[0] for ts in topic_sets):
            # Everyone subscribes to everything: partition i of the global order goes to member i mod k.
            flat = [_new_tp(TopicPartition, (t, p)) for t in topics for p in range(partitions_per_topic[t])]
            for i, dest in enumerate(lists):
                dest.extend(flat[i::k])
            return result
        for t in topics:
            subscribed = [t in ts for ts in topic_sets]
            for p in range(partitions_per_topic[t]):
                while not subscribed[cursor]:
                    cursor = (cursor + 1) % k
                lists[cursor].append(_new_tp(TopicPartition, (t, p)))
                cursor = (cursor + 1) % k
        return result
