"""The assignor interface, shaped like Java's ConsumerPartitionAssignor / AbstractPartitionAssignor.

A custom assignor subclasses :class:`PartitionAssignor`, sets ``name`` and overrides
either ``assign`` (the AbstractPartitionAssignor form: partition counts in, partition
lists out) or ``assign_cluster`` (the ConsumerPartitionAssignor form: cluster metadata
in, :class:`Assignment` with user data out). The other one is derived.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .types import EAGER, Assignment, ClusterMetadata, Subscription, TopicPartition


class PartitionAssignor:
    """Base class of every assignor (built-in or custom)."""

    #: The protocol name members advertise in JoinGroup ("range", "sticky", ...).
    name: str = ""
    #: Rebalance protocols this assignor supports, in preference order lowest first.
    supported_protocols: tuple[str, ...] = (EAGER,)
    #: Version of the assignor's own user data (Java's ``version()``).
    version: int = 0

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        # Each form is derived from the other: a subclass must provide at least one.
        if cls.assign is PartitionAssignor.assign and cls.assign_cluster is PartitionAssignor.assign_cluster:
            raise TypeError(f"{cls.__name__} must override assign() or assign_cluster()")

    @property
    def rebalance_protocol(self) -> str:
        """The strongest protocol supported: "COOPERATIVE" if supported, else "EAGER"."""
        return self.supported_protocols[-1]

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        """User data to put in this member's Subscription (None: none)."""
        return None

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        """Called on every member when it receives its assignment for ``generation``."""

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        """Assign partitions; every member id is a key of the result (empty list if nothing)."""
        full = self.assign_cluster(ClusterMetadata(partitions_per_topic), subscriptions)
        return {m: list(full[m].partitions) if m in full else [] for m in subscriptions}

    def assign_cluster(
        self, cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """Assign with full cluster metadata (replica racks); the leader's entry point."""
        ppt = subscribed_partition_counts(cluster, subscriptions)
        simple = self.assign(ppt, subscriptions)
        return {m: Assignment(list(simple.get(m, ()))) for m in subscriptions}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r}>"


def subscribed_partition_counts(
    cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
) -> dict[str, int]:
    """Partition counts of the topics someone subscribes to and the cluster knows (Java drops the rest)."""
    counts = cluster.partitions_per_topic
    topics: set[str] = set()
    for sub in subscriptions.values():
        topics.update(sub.topics)
    return {t: counts[t] for t in sorted(topics) if t in counts}
