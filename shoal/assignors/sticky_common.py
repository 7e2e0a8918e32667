"""Small helpers shared by the sticky assignor modules."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, repeat
from operator import itemgetter

from .types import TopicPartition

new_tp = tuple.__new__
# Sentinel owner for partitions claimed by several members of the same generation.
MANY = "\x00many"

MemberData = tuple[Sequence[TopicPartition], int]

#: Sort / map keys that run in C: a partition's topic and its number.
topic_of = itemgetter(0)
number_of = itemgetter(1)


def partitions_of(topic: str, n: int) -> Iterator[TopicPartition]:
    """topic-0 .. topic-(n-1) as TopicPartitions, built in C (no Python frame per partition)."""
    return map(new_tp, repeat(TopicPartition, n), zip(repeat(topic, n), range(n), strict=True))


def all_partitions(topics: Iterable[str], counts: Mapping[str, int]) -> Iterator[TopicPartition]:
    """Every partition of ``topics``, topic by topic, in order."""
    return chain.from_iterable(partitions_of(t, counts[t]) for t in topics)

