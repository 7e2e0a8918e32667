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

from .cluster import KafkaClient, now_ms
from .errors import KafkaConnectionError, KafkaTimeoutError
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

    async def close(self, *, leave: bool = True) -> None:
        """Commit (auto-commit), give the partitions back (listener), leave the group."""

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: int | None = None) -> None:
        """Commit ``offsets`` as this member."""

    async def fetch_committed(self, partitions: list[TopicPartition],
                              timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions``."""

    def busy(self) -> bool:
        """Whether membership work is pending (poll then waits in short slices)."""

    def on_metadata_update(self, partition_counts: Callable[[Iterable[str]], dict[str, int]]) -> None:
        """Metadata was refreshed (the classic leader rejoins when partition counts change)."""

    @property
    def group_generation(self) -> tuple[int, str]:
        """(generation or member epoch, member id); (-1, "") outside the group."""


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


class MemberBase:
    """What both members share: the group coordinator connection (which member_offsets' requests
    go through), the start of every poll, the heartbeat task and auto-commit."""

    def __init__(self, client: KafkaClient, subs: SubscriptionState, config: dict[str, Any],
                 invoke_listener: ListenerInvoker) -> None:
        self.client = client
        self.subs = subs
        self.config = config
        self.group_id: str = config["group.id"]
        self.instance_id: str | None = config.get("group.instance.id") or None
        self.invoke_listener = invoke_listener
        self.coordinator_id: int | None = None
        self.fatal: BaseException | None = None
        self.last_poll_ms = now_ms()
        self.last_auto_commit_ms = now_ms()
        self._hb_task: asyncio.Task | None = None
        self._closed = False
        # Set by the consumer: the KIP-848 member wakes a waiting poll with it (classic work happens inside poll).
        self.wakeup: Callable[[], None] | None = None

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: int | None = None) -> None:
        raise NotImplementedError

    def commit_error(self, code: int, what: str) -> Exception:
        """The error to raise for a commit the broker refused with ``code`` (not a retriable one)."""
        raise NotImplementedError

    async def _heartbeat_loop(self) -> None:
        raise NotImplementedError

    def _rebalancing(self) -> bool:
        """Whether a rebalance (classic) or reconciliation (consumer protocol) is under way."""
        raise NotImplementedError

    def _in_group(self) -> bool:
        """Whether the member holds a generation or epoch its commits can carry."""
        raise NotImplementedError

    # -- the group coordinator --------------------------------------------------------------

    async def ensure_coordinator(self, timeout_ms: int | None = None) -> int:
        if self.coordinator_id is None:
            deadline = now_ms() + (timeout_ms if timeout_ms is not None else self.config["default.api.timeout.ms"])
            self.coordinator_id = await self.client.find_coordinator(self.group_id, 0, deadline)
            self._coordinator_found()
        return self.coordinator_id

    def _coordinator_found(self) -> None:
        """Called when a coordinator lookup succeeds."""

    def coordinator_dead(self, why: str) -> None:
        """Forget the coordinator: the next request looks it up again."""
        if self.coordinator_id is not None:
            log.info("group %s: marking coordinator %s dead (%s)", self.group_id, self.coordinator_id, why)
            self.client.close_node_purpose(self.coordinator_id, "group")
            self.coordinator_id = None

    async def send_group(self, request: Any, version: int | None = None, timeout_ms: int | None = None) -> Any:
        """Send to the group coordinator (finding it first)."""
        node = await self.ensure_coordinator()
        try:
            conn = await self.client.conn(node, purpose="group")
            return await conn.send(request, version=version, timeout_ms=timeout_ms)
        except (KafkaConnectionError, KafkaTimeoutError, OSError):
            self.coordinator_dead("connection failure")
            raise

    async def group_version_up_to(self, api_key: int, highest: int) -> int:
        """The highest common version of ``api_key`` with the coordinator, up to ``highest``."""
        node = await self.ensure_coordinator()
        conn = await self.client.conn(node, purpose="group")
        return conn.version_up_to(api_key, highest)

    # -- poll and auto-commit ---------------------------------------------------------------

    def _start_poll(self) -> None:
        """The start of every poll: a fatal error reaches the application (once); the member is alive."""
        if self.fatal is not None:
            err, self.fatal = self.fatal, None
            raise err
        self.last_poll_ms = now_ms()

    def _ensure_heartbeat_task(self) -> None:
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def maybe_auto_commit(self) -> None:
        """Commit what was consumed in the background, every auto.commit.interval.ms."""
        if not self.config["enable.auto.commit"] or self._rebalancing():
            return
        if now_ms() - self.last_auto_commit_ms < self.config["auto.commit.interval.ms"]:
            return
        self.last_auto_commit_ms = now_ms()
        offsets = self.subs.consumed_offsets()
        if offsets and (not self.subs.has_auto_assignment or self._in_group()):
            task = asyncio.get_running_loop().create_task(self.commit(offsets))
            task.add_done_callback(log_commit_failure)

    async def _commit_consumed(self, what: str, timeout_ms: int | None = None) -> None:
        """Commit what was consumed before a rebalance step or close; a failure is logged (``what`` names it)."""
        offsets = self.subs.consumed_offsets()
        if not offsets:
            return
        try:
            await self.commit(offsets, timeout_ms=timeout_ms)
        except Exception as e:  # noqa: BLE001 - the rebalance (or close) proceeds anyway
            log.warning("group %s: %s failed: %r", self.group_id, what, e)
