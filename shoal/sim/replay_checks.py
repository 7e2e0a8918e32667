"""``replay-state``: a group coordinator's state after replaying its log equals its state before
the crash.

Before a node crashes (or the whole cluster restarts), the checker takes the state of every
`__consumer_offsets` partition that node coordinates with no event under way (an event cut off
half-way was never answered, so what it changed may be lost). When a coordinator loads that
partition again, the state it replayed (before it acts on being loaded, e.g. expiring sessions)
must be the same. Compared: committed offsets, pending transactional offsets, KIP-848 consumer
groups whole (every field of theirs is written as records), and the persisted part of classic
groups (generation, protocol, leader, members and their assignments) when they are between
rebalances.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shoal.broker.metadata import OFFSETS_TOPIC
from shoal.coordinator.group.consumer.group import ConsumerGroup
from shoal.coordinator.group.group import ClassicGroup, GroupState

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.coordinator.group.shard import GroupCoordinatorShard
    from shoal.sim.trace import Trace


def coordinator_state(shard: GroupCoordinatorShard) -> dict[str, Any]:
    """What of ``shard`` its log must give back, as plain comparable values."""
    offsets = shard.offset_manager
    groups: dict[str, Any] = {}
    for gid, group in shard.groups.items():
        if isinstance(group, ConsumerGroup):
            groups[gid] = ("consumer", group.group_epoch, group.assignment_epoch, _partitions_by_member(group.target),
                           {mid: _member(m) for mid, m in group.members.items()})
        elif isinstance(group, ClassicGroup) and group.state in (GroupState.STABLE, GroupState.EMPTY):
            if group.generation_id == 0 and not group.members:
                continue  # a holder of standalone commits: no record of its own, only its offsets
            groups[gid] = ("classic", group.generation_id, group.protocol_type, group.protocol_name, group.leader_id,
                           {mid: (m.group_instance_id, m.assignment) for mid, m in group.members.items()})
        elif isinstance(group, ClassicGroup):
            groups[gid] = REBALANCING  # its in-memory generation is ahead of its records
    return {"offsets": {g: dict(o) for g, o in offsets.offsets.items() if o},
            "pending": {pid: dict(p) for pid, p in offsets.pending.items() if p},
            "groups": groups}


REBALANCING = "classic, rebalancing"


def _partitions_by_member(target: dict[str, Any]) -> dict[str, Any]:
    return {mid: _nonempty(p) for mid, p in target.items()}


def _nonempty(partitions: dict[Any, Any]) -> dict[Any, Any]:
    return {t: frozenset(p) for t, p in partitions.items() if p}


def _member(m: Any) -> tuple[Any, ...]:
    return (m.member_epoch, m.previous_member_epoch, m.state, m.instance_id, m.subscription_fields(),
            _nonempty(m.assigned), _nonempty(m.pending_revocation))


class ReplayChecker:
    """Takes states before crashes; compares them when the partitions are replayed."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.before: dict[int, dict[str, Any]] = {}  # offsets partition -> state before the crash
        self.compared = 0

    def watch(self, broker: Broker) -> None:
        """Hear of every replay of ``broker``'s group coordinators (again after a restart)."""
        broker.coordinators.replayed.append(self._replayed)

    def before_crash(self, broker: Broker, node_ids: list[int]) -> None:
        for node_id in node_ids:
            rt = broker.coordinators.runtimes.get(node_id)
            if rt is None:
                continue
            for partition, shard in rt.settled_shards().items():
                self.before[partition] = coordinator_state(shard)

    def before_move(self, broker: Broker, topic: str, partition: int) -> None:
        """An offsets partition's leadership is about to move: its coordinator's state now."""
        if topic != OFFSETS_TOPIC:
            return
        for rt in broker.coordinators.runtimes.values():
            shard = rt.settled_shards().get(partition)
            if shard is not None:
                self.before[partition] = coordinator_state(shard)

    def _replayed(self, partition: int, shard: GroupCoordinatorShard) -> None:
        before = self.before.pop(partition, None)
        if before is None:
            return
        self.compared += 1
        after = coordinator_state(shard)
        for gid, group in before["groups"].items():
            if group == REBALANCING:  # not comparable: what it will be is not written yet
                after["groups"].pop(gid, None)
        before["groups"] = {g: v for g, v in before["groups"].items() if v != REBALANCING}
        if after != before:
            self.trace.violation("replay-state", f"__consumer_offsets-{partition}: {_difference(before, after)}")


def _difference(before: dict[str, Any], after: dict[str, Any]) -> str:
    for part in ("offsets", "pending", "groups"):
        b, a = before[part], after[part]
        for key in sorted(set(b) | set(a), key=str):
            if b.get(key) != a.get(key):
                return f"{part} {key!r}: before the crash {b.get(key)!r}, after replay {a.get(key)!r}"
    return "differs"
