"""The classic group coordinator (sans-IO): shard, groups, offsets, records."""

from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.partitioning import group_partition
from shoal.coordinator.group.shard import CoordinatorResult, GroupCoordinatorShard, RequestContext
from shoal.coordinator.group.state import GroupState

__all__ = [
    "CoordinatorResult",
    "GroupConfig",
    "GroupCoordinatorShard",
    "GroupState",
    "RequestContext",
    "group_partition",
]
