"""The rebalance listener interface (Java's ConsumerRebalanceListener)."""

from __future__ import annotations

from .structs import TopicPartition


class ConsumerRebalanceListener:
    """Override the callbacks you need.  For the async consumer they may be coroutines.

    - ``on_partitions_revoked``: before rejoining (eager: every owned partition;
      cooperative: only those moving away), and on close; commit here.
    - ``on_partitions_assigned``: after SyncGroup (cooperative: only the new ones).
    - ``on_partitions_lost``: the member lost its generation (session expiry, fenced,
      poll timeout); the partitions may already belong to others, so do not commit.
      Defaults to ``on_partitions_revoked`` as in Java.
    """

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, lost: list[TopicPartition]) -> object:
        return self.on_partitions_revoked(lost)
