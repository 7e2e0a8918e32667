"""Java's default partitioner: murmur2 of the key; sticky partition for null keys (KIP-480)."""

from __future__ import annotations

import random

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit hash, bit-for-bit as in Java."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Java's producer picks for a non-null key."""
    return to_positive(murmur2(key)) % num_partitions


class DefaultPartitioner:
    """Keyed records: murmur2.  Null keys: stick to one partition until its batch closes."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._sticky: dict[str, int] = {}
        self._rng = rng or random.Random()

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, available: list[int] | None = None
    ) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        p = self._sticky.get(topic)
        if p is None or p >= num_partitions:
            p = self._next(topic, num_partitions, available, None)
        return p

    def on_new_batch(self, topic: str, num_partitions: int, prev_partition: int, available: list[int] | None = None) -> None:
        """A batch for the sticky partition filled up: move on to another partition."""
        if self._sticky.get(topic) == prev_partition:
            self._next(topic, num_partitions, available, prev_partition)

    def _next(self, topic: str, n: int, available: list[int] | None, prev: int | None) -> int:
        choices = [p for p in (available or range(n)) if p != prev] or list(available or range(n))
        p = self._rng.choice(choices)
        self._sticky[topic] = p
        return p
