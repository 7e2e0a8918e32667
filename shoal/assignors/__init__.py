"""Partition assignors: pure functions from subscriptions and partitions to an assignment.

Simple API (ported from Java's AbstractPartitionAssignor)::

    from shoal.assignors import lookup, Subscription
    lookup("range").assign({"t0": 3}, {"C0": Subscription(["t0"]), "C1": Subscription(["t0"])})

No IO and nothing else of shoal is imported here, except the generated consumer
protocol codecs in :mod:`shoal.assignors.consumer_protocol`.
"""

from .base import PartitionAssignor
from .examples import BroadcastAssignor, RandomAssignor
from .range import RangeAssignor
from .registry import lookup, names, register, unregister
from .roundrobin import RoundRobinAssignor
from .sticky import CooperativeStickyAssignor, StickyAssignor
from .types import (
    COOPERATIVE,
    DEFAULT_GENERATION,
    EAGER,
    Assignment,
    ClusterMetadata,
    Subscription,
    TopicPartition,
)

__all__ = [
    "COOPERATIVE",
    "DEFAULT_GENERATION",
    "EAGER",
    "Assignment",
    "BroadcastAssignor",
    "ClusterMetadata",
    "CooperativeStickyAssignor",
    "PartitionAssignor",
    "RandomAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "TopicPartition",
    "lookup",
    "names",
    "register",
    "unregister",
]
