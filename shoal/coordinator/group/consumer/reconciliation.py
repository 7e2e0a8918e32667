"""Moving a member's current assignment towards its target (Kafka's CurrentAssignmentBuilder).

A partition is revoked from its owner before anyone else gets it: the member first keeps only the
partitions it owns that are still in its target (UNREVOKED_PARTITIONS until it reports the others
gone), then gets the target partitions no one owns any more; those still owned elsewhere wait
(UNRELEASED_PARTITIONS). Only once a member has revoked does it move to the target epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from uuid import UUID

from shoal.coordinator.group.consumer.member import ConsumerMember, MemberState, Partitions

OwnedPartitions = list[tuple[UUID, list[int]]] | None  # what the member reports it owns (None: not sent)
PartitionEpoch = Callable[[UUID, int], int]  # the epoch of a partition's owner, -1 if none


class FencedMemberEpoch(Exception):
    """The member must give up all its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


def owns_any(owned: OwnedPartitions, partitions: Partitions) -> bool:
    """Whether the member still reports one of `partitions`; an unknown report counts as yes."""
    if owned is None:
        return True
    return any(p in partitions.get(topic_id, ()) for topic_id, ps in owned for p in ps)


def reconcile(member: ConsumerMember, target_epoch: int, target: Partitions, partition_epoch: PartitionEpoch,
              owned: OwnedPartitions) -> ConsumerMember:
    """The member after one reconciliation step (the same object if nothing changes)."""
    state = member.state
    if state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if state == MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state == MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    # UNKNOWN: only a member that gave up everything may start again.
    if owned is None or owned:
        raise FencedMemberEpoch("The consumer group member is in a unknown state. "
                                "The member must abandon all its partitions and rejoin.")
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _with_epoch(member: ConsumerMember, epoch: int, **changes: object) -> ConsumerMember:
    return replace(member, member_epoch=epoch, previous_member_epoch=member.member_epoch, **changes)  # type: ignore[arg-type]


def _next(member: ConsumerMember, epoch: int, target_epoch: int, target: Partitions,
          partition_epoch: PartitionEpoch, owned: OwnedPartitions) -> ConsumerMember:
    assigned: Partitions = {}
    revoking: Partitions = {}
    pending: Partitions = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        kept = current & wanted
        gone = current - kept
        new = wanted - kept
        free = frozenset(p for p in new if partition_epoch(topic_id, p) == -1)
        unreleased = unreleased or free != new
        if kept:
            assigned[topic_id] = kept
        if gone:
            revoking[topic_id] = gone
        if free:
            pending[topic_id] = free
    if revoking and owns_any(owned, revoking):
        # Stay in the epoch until the member has let go of the revoked partitions.
        return _with_epoch(member, epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned,
                           pending_revocation=revoking)
    for topic_id, ps in pending.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with_epoch(member, target_epoch, state=state, assigned=assigned, pending_revocation={})
