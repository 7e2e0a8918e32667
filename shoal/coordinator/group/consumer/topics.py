"""What the consumer group type needs to know of the cluster's topics: a narrow, read-only view."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID


@dataclass(frozen=True)
class TopicMeta:
    """A topic as the group coordinator sees it: id, name, partition count and the racks of each
    partition's replicas (empty when brokers have no rack)."""

    topic_id: UUID
    name: str
    num_partitions: int
    partition_racks: dict[int, frozenset[str]] = field(default_factory=dict, compare=False, hash=False)


class TopicsView(Protocol):
    """Topic lookups by name and by id (the broker's cluster metadata, or a test's dict), and every
    topic's name (what regex subscriptions are resolved against)."""

    def by_name(self, name: str) -> TopicMeta | None: ...
    def by_id(self, topic_id: UUID) -> TopicMeta | None: ...
    def names(self) -> Iterable[str]: ...


class StaticTopics:
    """A TopicsView over a fixed set of topics (tests, and a shard with no broker)."""

    def __init__(self, topics: list[TopicMeta] | None = None) -> None:
        self._by_name: dict[str, TopicMeta] = {}
        self._by_id: dict[UUID, TopicMeta] = {}
        for t in topics or []:
            self.put(t)

    def put(self, topic: TopicMeta) -> None:
        self.remove(topic.name)
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def remove(self, name: str) -> None:
        old = self._by_name.pop(name, None)
        if old is not None:
            self._by_id.pop(old.topic_id, None)

    def by_name(self, name: str) -> TopicMeta | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: UUID) -> TopicMeta | None:
        return self._by_id.get(topic_id)

    def names(self) -> Iterable[str]:
        return list(self._by_name)
