"""Which `__consumer_offsets` partition a group lives in (Kafka's partitionFor)."""

from __future__ import annotations

from shoal.coordinator.partitioning import java_string_hash, java_utils_abs, partition_for

__all__ = ["group_partition", "java_string_hash", "java_utils_abs"]


def group_partition(group_id: str, num_partitions: int) -> int:
    """abs(hashCode(group_id)) % num_partitions, exactly as Kafka computes it."""
    return partition_for(group_id, num_partitions)
