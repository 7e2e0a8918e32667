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


def hash_map_order(keys: list, hashes: list[int], initial_capacity: int) -> list:
    """``keys`` (distinct, in insertion order, with their 32-bit Java hash codes) in the order a
    java.util.HashMap created with ``initial_capacity`` iterates them: by bucket (the spread hash
    masked by the table size, which doubles past 3/4 full), then by insertion within a bucket."""
    cap = 1
    while cap < max(1, initial_capacity):
        cap *= 2
    for size in range(1, len(keys) + 1):
        if size > int(cap * 0.75):
            cap *= 2
    buckets = [(h ^ (h >> 16)) & (cap - 1) for h in hashes]
    return [k for _, _, k in sorted(zip(buckets, range(len(keys)), keys, strict=True))]


def java_utils_abs(n: int) -> int:
    """Kafka's Utils.abs: like Math.abs but Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(2**31) else abs(n)


def partition_for(key: str, num_partitions: int) -> int:
    """abs(hashCode(key)) % num_partitions, exactly as Kafka computes it."""
    return java_utils_abs(java_string_hash(key)) % num_partitions
