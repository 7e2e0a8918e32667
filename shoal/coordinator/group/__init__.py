"""The group coordinator (sans-IO): shard, group types, offsets, records."""

from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.shard import CoordinatorResult, GroupCoordinatorShard, ShardRequest
from shoal.coordinator.group.state import GroupState
from shoal.coordinator.group.types import Group, GroupType

__all__ = [
    "CoordinatorResult",
    "Group",
    "GroupConfig",
    "GroupCoordinatorShard",
    "GroupState",
    "GroupType",
    "ShardRequest",
]
