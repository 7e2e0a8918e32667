"""The member side of a share group (KIP-932): ShareGroupHeartbeat (API 76) to the group coordinator.

A share member heartbeats much as a KIP-848 consumer does, with less to do: it joins with
member epoch 0 and a member id it made itself (as Java's share consumer: ``Uuid.randomUuid()``,
whose text is the base64url form), then heartbeats at the interval the broker returns. An
assignment (topic ids and partitions) replaces the previous one at once: share partitions are
never revoked with a callback, since several members fetch from one partition and the broker
tracks every record's owner. Fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) it rejoins with
epoch 0; leaving is one heartbeat with epoch -1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from shoal.protocol.errors import ErrorCode, error_name
from shoal.protocol.generated.api_keys import ApiKey

from .cluster import KafkaClient, now_ms
from .consumer_member import new_member_id
from .errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from .member_offsets import COORDINATOR_ERRORS
from .membership import MemberBase
from .protocol import request_class
from .structs import TopicPartition
from .subscription import SubscriptionState

log = logging.getLogger(__name__)

JOIN_EPOCH, LEAVE_EPOCH = 0, -1
#: Kafka 4.x brokers serve ShareGroupHeartbeat v1 only (v0 was the early-access version).
HEARTBEAT_VERSION = 1
FENCED = (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID)
UNSUPPORTED_MESSAGE = "the broker does not serve share groups (ShareGroupHeartbeat v1, KIP-932)"

Assignment = dict[uuid.UUID, frozenset[int]]


async def _no_listener(_method: str, _partitions: list[TopicPartition]) -> None:
    """Share consumers have no rebalance listener."""


class ShareMember(MemberBase):
    """One share-group member (Java's ShareMembershipManager and ShareHeartbeatRequestManager)."""

    def __init__(self, client: KafkaClient, subs: SubscriptionState, config: dict[str, Any]) -> None:
        super().__init__(client, subs, config, _no_listener)
        self.member_id = new_member_id()
        self.member_epoch = JOIN_EPOCH
        self.rack_id: str | None = config.get("client.rack") or None
        self.active = False  # subscribed: heartbeats go out
        self.assignment: Assignment = {}
        self.heartbeat_interval_ms = 0
        self.heartbeats_sent = 0
        self.next_heartbeat_ms = 0
        self.failures = 0
        self._sent_topics: tuple[str, ...] | None = None
        self._wakeup = asyncio.Event()
        #: Called when the assignment changes (the consumer updates its share sessions).
        self.on_assignment: Callable[[], None] | None = None

    # MemberBase's abstract parts: share groups neither rebalance nor commit offsets.
    def _rebalancing(self) -> bool:
        return False

    def _in_group(self) -> bool:
        return self.member_epoch > 0

    @property
    def group_generation(self) -> tuple[int, str]:
        return (self.member_epoch, self.member_id) if self.member_epoch > 0 else (-1, "")

    def poll(self) -> None:
        """From the consumer's poll: a fatal heartbeat error surfaces (once); heartbeats run."""
        self._start_poll()
        if not self.active:
            self.active = True
            self._transition_to_joining()
        elif tuple(sorted(self.subs.topics)) != self._sent_topics:
            self._wakeup.set()  # the new subscription goes out at once
            self.next_heartbeat_ms = 0
        self._ensure_heartbeat_task()

    def _transition_to_joining(self) -> None:
        self.member_epoch = JOIN_EPOCH
        self._sent_topics = None
        self.next_heartbeat_ms = 0
        self._wakeup.set()

    def _set_assignment(self, assignment: Assignment) -> None:
        if assignment != self.assignment:
            self.assignment = assignment
            if self.on_assignment is not None:
                self.on_assignment()

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            wait = max(0, self.next_heartbeat_ms - now_ms())
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), wait / 1000)
            self._wakeup.clear()
            if self._closed:
                return
            if not self.active or self.fatal is not None:
                self.next_heartbeat_ms = now_ms() + 1000
                continue
            if now_ms() >= self.next_heartbeat_ms:
                await self.heartbeat_once()

    def build_heartbeat(self) -> Any:
        """The next heartbeat: the subscription when joining or when it changed, else only the epoch."""
        cls = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)
        req = cls(group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch)
        topics = tuple(sorted(self.subs.topics))
        if self.member_epoch == JOIN_EPOCH:
            req.rack_id = self.rack_id
        if self.member_epoch == JOIN_EPOCH or topics != self._sent_topics:
            req.subscribed_topic_names = list(topics)
            self._sent_topics = topics
        return req

    async def heartbeat_once(self) -> None:
        """Send one heartbeat and apply the response."""
        try:
            version = await self.group_version_up_to(ApiKey.SHARE_GROUP_HEARTBEAT, HEARTBEAT_VERSION)
            if version < HEARTBEAT_VERSION:
                self._fail(KafkaError(ErrorCode.UNSUPPORTED_VERSION, UNSUPPORTED_MESSAGE))
                return
            req = self.build_heartbeat()
            self.heartbeats_sent += 1
            resp = await self.send_group(req, version=version)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
            self._sent_topics = None
            self._backoff(f"heartbeat: {e!r}")
            return
        except KafkaError as e:  # FindCoordinator refused (authorization, ...)
            self._fail(e)
            return
        if self._closed or not self.active:
            return
        if resp.error_code:
            self._on_error(resp.error_code, resp.error_message)
            return
        self.failures = 0
        if self.member_epoch == JOIN_EPOCH and resp.member_epoch > 0:
            log.info("share group %s: member %s joined with epoch %d", self.group_id, self.member_id,
                     resp.member_epoch)
        if resp.member_id:
            self.member_id = resp.member_id
        self.member_epoch = resp.member_epoch
        self.heartbeat_interval_ms = resp.heartbeat_interval_ms
        self.next_heartbeat_ms = now_ms() + max(resp.heartbeat_interval_ms, 0)
        if resp.assignment is not None:
            # Applied at once: share groups have no revocation step.
            self._set_assignment({t.topic_id: frozenset(t.partitions) for t in resp.assignment.topic_partitions})

    def _backoff(self, why: str) -> None:
        self.failures += 1
        base = self.config["retry.backoff.ms"]
        delay = min(base * 2 ** min(self.failures - 1, 10), self.config.get("retry.backoff.max.ms", 1000))
        self.next_heartbeat_ms = now_ms() + int(delay)
        log.debug("share group %s: %s; next heartbeat in %d ms", self.group_id, why, delay)

    def _on_error(self, code: int, message: str | None) -> None:
        name = error_name(code)
        self._sent_topics = None
        if code in COORDINATOR_ERRORS:
            self.coordinator_dead(f"heartbeat {name}")
            self._backoff(f"heartbeat {name}")
        elif code in FENCED:
            log.info("share group %s: member %s epoch %d fenced (%s); rejoining",
                     self.group_id, self.member_id, self.member_epoch, name)
            self._set_assignment({})
            self._transition_to_joining()
        elif code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT):
            self._backoff(f"heartbeat {name}")
        elif code == ErrorCode.UNSUPPORTED_VERSION:
            self._fail(KafkaError(code, UNSUPPORTED_MESSAGE))
        else:
            # GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED, GROUP_MAX_SIZE_REACHED,
            # INVALID_REQUEST and anything unexpected: the application sees it on its next poll.
            self._fail(error_for(code, f"ShareGroupHeartbeat for group {self.group_id}: {name}"
                                       + (f": {message}" if message else "")))

    def _fail(self, err: BaseException) -> None:
        log.error("share group %s: %s", self.group_id, err)
        self.fatal = err
        if self.wakeup is not None:
            self.wakeup()

    async def leave(self) -> None:
        """Stop heartbeating and leave the group (epoch -1): the broker reassigns at once."""
        was_active, self.active = self.active, False
        if self._hb_task is not None:
            self._hb_task.cancel()
            with contextlib.suppress(BaseException):
                await self._hb_task
            self._hb_task = None
        if was_active and self.heartbeats_sent:
            cls = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)
            req = cls(group_id=self.group_id, member_id=self.member_id, member_epoch=LEAVE_EPOCH)
            log.info("share group %s: member %s leaving", self.group_id, self.member_id)
            try:
                resp = await self.send_group(req, version=HEARTBEAT_VERSION,
                                             timeout_ms=min(self.config["request.timeout.ms"], 5000))
                if resp.error_code:
                    log.info("share group %s: leave answered %s", self.group_id, error_name(resp.error_code))
            except Exception as e:  # noqa: BLE001 - leaving is best effort (the session timeout ends it anyway)
                log.debug("share leave heartbeat failed: %r", e)
        self.member_epoch = JOIN_EPOCH
        self._sent_topics = None
        self.heartbeats_sent = 0
        self._set_assignment({})

    async def close(self, *, leave: bool = True) -> None:
        if leave:
            await self.leave()
        self._closed = True
        self._wakeup.set()
        if self._hb_task is not None:
            self._hb_task.cancel()
            with contextlib.suppress(BaseException):
                await self._hb_task
