"""RangeAssignor: per topic, contiguous ranges of partitions to the members subscribed to it.

Members are ordered as Java orders them (group.instance.id first, then member id), so
partition N of every topic with the same partition count and subscribers goes to the
same member (co-partitioning). With KIP-881 racks, partitions whose replicas are on a
member's rack are handed out first, within the same per-member quotas, so balance is
never traded for locality.
"""

from __future__ import annotations

from collections.abc import Mapping

from .base import PartitionAssignor, subscribed_partition_counts
from .types import Assignment, ClusterMetadata, Subscription, TopicPartition, member_sort_key

_new_tp = tuple.__new__


class RangeAssignor(PartitionAssignor):
    """Kafka's "range" strategy (eager)."""

    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        return _range(partitions_per_topic, subscriptions, None)

    def assign_cluster(
        self, cluster: ClusterMetadata, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        ppt = subscribed_partition_counts(cluster, subscriptions)
        racks = cluster if cluster.has_racks else None
        result = _range(ppt, subscriptions, racks)
        return {m: Assignment(ps) for m, ps in result.items()}


def _range(
    ppt: Mapping[str, int], subscriptions: Mapping[str, Subscription], cluster: ClusterMetadata | None
) -> dict[str, list[TopicPartition]]:
    order = sorted(subscriptions, key=lambda m: member_sort_key(m, subscriptions[m]))
    result: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    members_per_topic: dict[str, list[str]] = {}
    for m in order:
        for t in dict.fromkeys(subscriptions[m].topics):
            if t in ppt:
                members_per_topic.setdefault(t, []).append(m)

    # Co-partitioned topics (same count, same subscribers) are assigned as one unit so
    # rack-aware choices keep partition N of each of them on the same member.
    groups: dict[tuple[int, tuple[str, ...]], list[str]] = {}
    for t in sorted(members_per_topic):
        groups.setdefault((ppt[t], tuple(members_per_topic[t])), []).append(t)

    for (n, members), topics in groups.items():
        if n <= 0:
            continue
        owner = _rack_aware_owners(n, members, topics, subscriptions, cluster) if cluster else None
        if owner is None:
            k = len(members)
            per, extra = divmod(n, k)
            for i, m in enumerate(members):
                start = per * i + min(i, extra)
                length = per + (1 if i < extra else 0)
                if length:
                    dest = result[m]
                    for t in topics:
                        dest.extend(_new_tp(TopicPartition, (t, p)) for p in range(start, start + length))
        else:
            for m in members:
                dest = result[m]
                mine = owner[m]
                for t in topics:
                    dest.extend(_new_tp(TopicPartition, (t, p)) for p in mine)
    return result


def _rack_aware_owners(
    n: int,
    members: tuple[str, ...],
    topics: list[str],
    subscriptions: Mapping[str, Subscription],
    cluster: ClusterMetadata,
) -> dict[str, list[int]] | None:
    """Partition numbers per member, rack-matched first; None when racks cannot help."""
    member_racks = {m: subscriptions[m].rack_id for m in members}
    consumer_racks = {r for r in member_racks.values() if r is not None}
    if not consumer_racks:
        return None
    # Racks of "partition p" of the group: a member matches only if it is local for every topic.
    part_racks: list[frozenset[str]] = []
    for p in range(n):
        rs: frozenset[str] | None = None
        for t in topics:
            r = cluster.racks(t, p)
            rs = r if rs is None else rs & r
        part_racks.append(rs or frozenset())
    if not any(part_racks) or all(consumer_racks <= rs for rs in part_racks):
        return None  # no rack info, or every rack holds every partition: locality is free

    k = len(members)
    per, extra = divmod(n, k)
    counts = dict.fromkeys(members, 0)
    owner: dict[str, list[int]] = {m: [] for m in members}
    unassigned = list(range(n))
    extras_left = extra

    def hand_out(match_racks: bool) -> None:
        nonlocal unassigned, extras_left
        for m in members:
            if not unassigned:
                return
            room = per + (1 if extras_left > 0 else 0) - counts[m]
            if room <= 0:
                continue
            rack = member_racks[m]
            if match_racks:
                if rack is None:
                    continue
                chosen = [p for p in unassigned if rack in part_racks[p]][:room]
            else:
                chosen = unassigned[:room]
            if not chosen:
                continue
            owner[m].extend(chosen)
            counts[m] += len(chosen)
            if counts[m] > per:
                extras_left -= 1
            taken = set(chosen)
            unassigned = [p for p in unassigned if p not in taken]

    hand_out(True)
    hand_out(False)
    for m in members:
        owner[m].sort()
    return owner
