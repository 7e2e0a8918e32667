"""Sets of partitions as bytearrays, for the sticky assignors' large groups.

A set of partitions of some topics is one bytearray per topic, a byte per partition: at a
million partitions a ``set`` of TopicPartitions costs a cache miss on every insert and lookup
(it was most of the reassignment time), the bytearrays take 1 MB, and every loop over
partitions below runs in C (``map``, ``compress``, ``bytearray.count``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from itertools import compress, repeat
from operator import setitem

from .sticky_common import new_tp, number_of, partitions_of, topic_of
from .types import TopicPartition

# bytes.translate table: 0 -> 1, anything else -> 0 (marked bytes become "not selected").
_FLIP = bytes([1] + [0] * 255)


class PartitionMask:
    """A set of partitions of ``topics`` (topic -> partition count), one byte per partition."""

    def __init__(self, counts: Mapping[str, int]) -> None:
        self.bytes = {t: bytearray(n) for t, n in counts.items()}

    def mark(self, parts: list[TopicPartition], value: int = 1) -> bool:
        """Set the byte of each of ``parts`` to ``value``; False (and the mask in an undefined
        state) if some partition is not one of the mask's: unknown topic or number out of range."""
        if not parts:
            return True
        if min(map(number_of, parts)) < 0:  # a negative index would wrap around
            return False
        try:
            setters = map(self.bytes.__getitem__, map(topic_of, parts))
            deque(map(setitem, setters, map(number_of, parts), repeat(value)), maxlen=0)
        except (KeyError, IndexError):
            return False
        return True

    def count(self) -> int:
        """How many partitions are marked."""
        return sum(b.count(1) for b in self.bytes.values())

    def unmarked(self, topic: str) -> list[TopicPartition]:
        """The partitions of ``topic`` not marked, in order."""
        b = self.bytes[topic]
        if b.find(1) < 0:  # nothing marked (a first assignment): skip the selection
            return list(partitions_of(topic, len(b)))
        free = compress(range(len(b)), b.translate(_FLIP))
        return list(map(new_tp, repeat(TopicPartition), zip(repeat(topic), free)))

    def unmarked_all(self, topics: Iterable[str]) -> list[TopicPartition]:
        """The partitions of ``topics`` not marked, topic by topic, in order."""
        out: list[TopicPartition] = []
        for t in topics:
            out += self.unmarked(t)
        return out

    def complete(self, topic: str) -> bool:
        """True if every partition of ``topic`` is marked."""
        return self.bytes[topic].find(0) < 0
