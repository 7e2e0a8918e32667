"""Example custom assignors (from the consumer-group write-up): Random and Broadcast."""

from __future__ import annotations

import random
from collections.abc import Mapping

from .base import PartitionAssignor
from .types import Subscription, TopicPartition


class RandomAssignor(PartitionAssignor):
    """Each partition to a random member subscribed to its topic; ``seed`` makes it repeatable."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        result: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = sorted(subscriptions)  # sorted so a seed gives the same result for any dict order
        for topic in sorted(partitions_per_topic):
            subscribed = [m for m in members if topic in subscriptions[m].topics]
            if not subscribed:
                continue
            for p in range(partitions_per_topic[topic]):
                result[self._rng.choice(subscribed)].append(TopicPartition(topic, p))
        return result


class BroadcastAssignor(PartitionAssignor):
    """Every partition of a topic to every member subscribed to it (each member reads everything)."""

    name = "broadcast"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        result: dict[str, list[TopicPartition]] = {}
        for m, sub in subscriptions.items():
            topics = sorted(t for t in set(sub.topics) if t in partitions_per_topic)
            result[m] = [TopicPartition(t, p) for t in topics for p in range(partitions_per_topic[t])]
        return result
