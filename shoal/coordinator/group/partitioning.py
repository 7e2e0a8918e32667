"""Which `__consumer_offsets` partition a group lives in (Kafka's partitionFor)."""

from __future__ import annotations


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, int32 overflow."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_utils_abs(n: int) -> int:
    """Kafka's Utils.abs: like Math.abs but Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(2**31) else abs(n)


def group_partition(group_id: str, num_partitions: int) -> int:
    """abs(hashCode(group_id)) % num_partitions, exactly as Kafka computes it."""
    return java_utils_abs(java_string_hash(group_id)) % num_partitions
