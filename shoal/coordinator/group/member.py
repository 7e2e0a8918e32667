"""A member of a classic group (Kafka's ClassicGroupMember / MemberMetadata)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shoal.coordinator.group.protocol_vote import first_supported


@dataclass(eq=False, slots=True)
class PendingRequest:
    """A parked JoinGroup or SyncGroup waiting for the group to move on."""

    token: Any
    api_version: int


@dataclass(eq=False, slots=True)
class ClassicMember:
    """One member: identity, timeouts, protocols and its current assignment.

    `join_waiter` / `sync_waiter` are the parked requests (Kafka's awaiting
    join/sync callbacks); they are live-only state and never persisted.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    # (name, metadata) in the member's order of preference.
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    is_new: bool = False
    join_waiter: PendingRequest | None = None
    sync_waiter: PendingRequest | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata (Kafka's `matches`)."""
        if len(protocols) != len(self.protocols):
            return False
        return all(a[0] == b[0] and bytes(a[1]) == bytes(b[1]) for a, b in zip(protocols, self.protocols, strict=True))

    def vote(self, candidates: set[str]) -> str:
        """The first of this member's protocols that is among `candidates`."""
        choice = first_supported(self.protocol_names(), candidates)
        if choice is None:
            raise ValueError(f"member {self.member_id} does not support any of {sorted(candidates)}")
        return choice

    def has_satisfied_heartbeat(self) -> bool:
        """True if an expiring heartbeat timer must not remove this member.

        New members can expire while awaiting join; members parked in a
        rebalance (join or sync) automatically satisfy heartbeats.
        """
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync
