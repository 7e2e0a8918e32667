"""What the consumer needs of its group membership, whichever protocol runs it.

``group.protocol=classic`` gives :class:`~shoal.client.coordinator.ConsumerCoordinator`
(JoinGroup/SyncGroup/Heartbeat); ``group.protocol=consumer`` gives
:class:`~shoal.client.consumer_member.ConsumerMember` (KIP-848's ConsumerGroupHeartbeat).
The consumer talks to either through :class:`GroupMembership` and builds it with
:func:`make_membership`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from .cluster import KafkaClient
from .structs import OffsetAndMetadata, TopicPartition
from .subscription import SubscriptionState

ListenerInvoker = Callable[[str, list[TopicPartition]], Awaitable[None]]

CLASSIC, CONSUMER = "classic", "consumer"

# Settings the consumer protocol has no use for: the broker assigns, and the broker sets the
# session timeout and heartbeat interval (Java refuses them too when set explicitly).
CLASSIC_ONLY_SETTINGS = ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms")
CONSUMER_ONLY_SETTINGS = ("group.remote.assignor",)


class GroupMembership(Protocol):
    """A consumer's membership of its group (Java: the coordinator or the membership manager)."""

    group_id: str
    coordinator_id: int | None
    #: Set by the consumer: wakes a poll waiting for records when the member has work for it.
    wakeup: Callable[[], None] | None

    async def poll(self, timeout_ms: int) -> None:
        """Called from every consumer poll: liveness, (re)joining, reconciling, auto-commit."""
        ...

    async def close(self, *, leave: bool = True) -> None:
        """Commit (auto-commit), give the partitions back (listener), leave the group."""
        ...

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: int | None = None) -> None:
        """Commit ``offsets`` as this member."""
        ...

    async def fetch_committed(self, partitions: list[TopicPartition],
                              timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions``."""
        ...

    def busy(self) -> bool:
        """Whether membership work is pending (poll then waits in short slices)."""
        ...

    def on_metadata_update(self, partition_counts: Callable[[Iterable[str]], dict[str, int]]) -> None:
        """Metadata was refreshed (the classic leader rejoins when partition counts change)."""
        ...

    @property
    def group_generation(self) -> tuple[int, str]:
        """(generation or member epoch, member id); (-1, "") outside the group."""
        ...


def group_protocol(config: dict[str, Any]) -> str:
    """The configured ``group.protocol``, lower-cased and checked."""
    proto = str(config.get("group.protocol") or CLASSIC).strip().lower()
    if proto not in (CLASSIC, CONSUMER):
        raise ValueError(f"invalid group.protocol {config.get('group.protocol')!r}: use 'classic' or 'consumer'")
    return proto


def check_protocol_settings(config: dict[str, Any], user_keys: Iterable[str]) -> str:
    """Refuse settings the chosen protocol does not use, as Java's consumer does; the protocol."""
    proto = group_protocol(config)
    config["group.protocol"] = proto
    given = set(user_keys)
    refused = CLASSIC_ONLY_SETTINGS if proto == CONSUMER else CONSUMER_ONLY_SETTINGS
    for key in refused:
        if key in given and config.get(key) is not None:
            raise ValueError(f"{key} cannot be set when group.protocol={proto}"
                             + (" (the broker assigns partitions and sets the session timeout and heartbeat "
                                "interval; group.remote.assignor picks the broker's assignor)"
                                if proto == CONSUMER else ""))
    return proto


def make_membership(client: KafkaClient, subs: SubscriptionState, config: dict[str, Any],
                    assignors: list[Any], invoke_listener: ListenerInvoker) -> GroupMembership:
    """The member implementation ``group.protocol`` asks for."""
    if group_protocol(config) == CONSUMER:
        from .consumer_member import ConsumerMember

        return ConsumerMember(client, subs, config, invoke_listener)
    from .coordinator import ConsumerCoordinator

    return ConsumerCoordinator(client, subs, config, assignors, invoke_listener)


log = logging.getLogger(__name__)


def log_commit_failure(task: asyncio.Task) -> None:
    """Done-callback of an asynchronous auto-commit: its failure is logged, not raised."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("async auto-commit failed: %r", task.exception())
