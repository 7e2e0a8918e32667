"""Which partition of a coordinator topic a key lives in (Kafka's partitionFor).

Groups map to `__consumer_offsets` and transactional ids to
`__transaction_state` by the same rule: abs(String.hashCode(key)) % partitions.
"""

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


def partition_for(key: str, num_partitions: int) -> int:
    """abs(hashCode(key)) % num_partitions, exactly as Kafka computes it."""
    return java_utils_abs(java_string_hash(key)) % num_partitions
