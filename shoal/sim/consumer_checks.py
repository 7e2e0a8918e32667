"""The invariant of KIP-848 consumer groups: a partition is revoked before it is reassigned.

``consumer-exclusive``: the coordinator never gives a partition to a member while another member
still owns it. A member owns what an answer assigned it until a heartbeat of it no longer
reports it (a join, epoch 0, reports nothing), or it leaves, or it is fenced (an UNKNOWN_MEMBER_ID or
FENCED_MEMBER_EPOCH answer). A late duplicate of one of its heartbeats that the coordinator accepts
counts as a report too: the coordinator cannot tell it from the member.
The coordinator may also take partitions back on its own: from a member silent past its session
timeout, or one that has not revoked within its rebalance timeout since it was asked. Those
deadlines are honoured with a margin, so that only a transfer that no timeout explains fails.
They are measured on the monotonic clock (`shoal.clock.monotonic_ms`), as the coordinator's timers
run: a forward step of the wall clock (`clock-jump`) must not expire anyone early.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shoal.clock import monotonic_ms
from shoal.protocol.generated.api_keys import ApiKey
from shoal.sim.consumer_groups import FENCED, REBALANCE_TIMEOUT_MS, SESSION_TIMEOUT_MS

if TYPE_CHECKING:
    from shoal.sim.trace import Trace

_MARGIN_MS = 250
Partition = tuple[str, uuid.UUID, int]  # group, topic id, partition


@dataclass
class _Ownership:
    member: str
    asked_to_revoke_ms: int | None = None


@dataclass
class ConsumerChecker:
    trace: Trace
    owners: dict[Partition, _Ownership] = field(default_factory=dict)
    last_heartbeat_ms: dict[tuple[str, str], int] = field(default_factory=dict)
    transfers: int = 0
    overdue: set[tuple[str, str]] = field(default_factory=set)  # members past a revocation deadline
    ghosts: set[int] = field(default_factory=set)  # tokens of duplicate deliveries (the network's)

    def observe(self, node_id: int, token: int, api_key: int, version: int, request: Any, response: Any,
                phase: str) -> None:
        if api_key != ApiKey.CONSUMER_GROUP_HEARTBEAT:
            return
        group, member = request.group_id, request.member_id
        if phase == "start":
            if token not in self.ghosts:
                self._reported(group, member, request)
            return
        if response is None:
            return
        now = monotonic_ms()  # the coordinator's timers ignore the wall clock's jumps
        if response.error_code in FENCED:
            self._release(group, member, lambda _p: True)
            return
        if response.error_code != 0:
            return
        if token in self.ghosts:
            # A stale copy of an earlier heartbeat, delivered late on another connection: the coordinator
            # believed it (as Kafka does one of the member's previous epoch that reports a subset of its
            # assignment), so what it reported counts for what the coordinator may give away.
            self._reported(group, member, request)
        self.last_heartbeat_ms[(group, member)] = now
        if response.assignment is not None:
            self._assigned(group, member, {(group, t.topic_id, p) for t in response.assignment.topic_partitions
                                           for p in t.partitions}, now)

    def _reported(self, group: str, member: str, request: Any) -> None:
        """What a heartbeat tells the coordinator the member still owns."""
        if request.member_epoch <= 0:  # leaving, or joining afresh: a new life for the member
            self.overdue.discard((group, member))
        if request.member_epoch < 0:
            self._release(group, member, lambda _p: True)
        elif request.topic_partitions is not None:  # (a join, epoch 0, reports owning nothing)
            reported = {(group, t.topic_id, p) for t in request.topic_partitions for p in t.partitions}
            self._release(group, member, lambda p: p not in reported)

    def _release(self, group: str, member: str, which: Any) -> None:
        for p in [p for p, o in self.owners.items() if p[0] == group and o.member == member and which(p)]:
            del self.owners[p]

    def _assigned(self, group: str, member: str, assigned: set[Partition], now: int) -> None:
        for p, o in self.owners.items():  # what the member holds but was not given again: to revoke
            if p[0] == group and o.member == member and p not in assigned and o.asked_to_revoke_ms is None:
                o.asked_to_revoke_ms = now
        for p in assigned:
            owner = self.owners.get(p)
            if owner is not None and owner.member != member and not self._may_take_back(group, owner, now):
                self.trace.violation("consumer-exclusive", f"group {group}: partition {p[2]} given to "
                                                           f"{member[:8]} while {owner.member[:8]} still owns it")
            if owner is None or owner.member != member:
                self.transfers += owner is not None
                self.owners[p] = _Ownership(member)

    def _may_take_back(self, group: str, o: _Ownership, now: int) -> bool:
        """Whether the coordinator may have fenced ``o``'s member by now: silent past its session, or
        slower than its rebalance timeout to revoke any partition (fencing takes all it owns)."""
        last = self.last_heartbeat_ms.get((group, o.member), 0)
        if now - last >= SESSION_TIMEOUT_MS - _MARGIN_MS or (group, o.member) in self.overdue:
            return True
        if any(p[0] == group and other.member == o.member and other.asked_to_revoke_ms is not None
               and now - other.asked_to_revoke_ms >= REBALANCE_TIMEOUT_MS - _MARGIN_MS
               for p, other in self.owners.items()):
            self.overdue.add((group, o.member))  # remembered: its other partitions may follow later
            return True
        return False
