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

import logging
from collections.abc import Callable
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.waits import wait_event

from .cluster import KafkaClient, cancel_and_wait, now_ms
from .consumer_member import JOIN_EPOCH, LEAVE_EPOCH, Assignment, EpochMember
from .errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from .protocol import request_class
from .structs import TopicPartition
from .subscription import SubscriptionState

log = logging.getLogger(__name__)

#: Kafka 4.x brokers serve ShareGroupHeartbeat v1 only (v0 was the early-access version).
HEARTBEAT_VERSION = 1


async def _no_listener(_method: str, _partitions: list[TopicPartition]) -> None:
    """Share consumers have no rebalance listener."""


class ShareMember(EpochMember):
    """One share-group member (Java's ShareMembershipManager and ShareHeartbeatRequestManager)."""

    kind, heartbeat_api = "share group", "ShareGroupHeartbeat"
    unsupported_message = "the broker does not serve share groups (ShareGroupHeartbeat v1, KIP-932)"
    retry_errors = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT)

    def __init__(self, client: KafkaClient, subs: SubscriptionState, config: dict[str, Any]) -> None:
        super().__init__(client, subs, config, _no_listener)
        self.active = False  # subscribed: heartbeats go out
        self.assignment: Assignment = {}
        #: Called when the assignment changes (the consumer updates its share sessions).
        self.on_assignment: Callable[[], None] | None = None

    def poll(self) -> None:
        """From the consumer's poll: a fatal heartbeat error surfaces (once); heartbeats run."""
        self._start_poll()
        if not self.active:
            self.active = True
            self._transition_to_joining()
        elif tuple(sorted(self.subs.topics)) != self.sent.topics:
            self._wakeup.set()  # the new subscription goes out at once
            self.next_heartbeat_ms = 0
        self._ensure_heartbeat_task()

    def transition_to_fenced(self) -> None:
        """Fenced: the assignment is gone at once (the broker released the records); join again."""
        self._set_assignment({})
        self._transition_to_joining()

    def _set_assignment(self, assignment: Assignment) -> None:
        if assignment != self.assignment:
            self.assignment = assignment
            if self.on_assignment is not None:
                self.on_assignment()

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            wait = max(0, self.next_heartbeat_ms - now_ms())
            await wait_event(self._wakeup, wait / 1000)
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
        if self.member_epoch == JOIN_EPOCH or topics != self.sent.topics:
            req.subscribed_topic_names = list(topics)
            self.sent.topics = topics
        return req

    async def heartbeat_once(self) -> None:
        """Send one heartbeat and apply the response."""
        try:
            version = await self.group_version_up_to(ApiKey.SHARE_GROUP_HEARTBEAT, HEARTBEAT_VERSION)
            if version < HEARTBEAT_VERSION:
                self._fail(KafkaError(ErrorCode.UNSUPPORTED_VERSION, self.unsupported_message))
                return
            req = self.build_heartbeat()
            self.heartbeats_sent += 1
            resp = await self.send_group(req, version=version)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
            self.sent.reset()
            self._backoff(f"heartbeat: {e!r}")
            return
        except KafkaError as e:  # FindCoordinator refused (authorization, ...)
            self._fail(e)
            return
        if self._closed or not self.active:
            return
        if resp.error_code:
            self.on_heartbeat_error(resp.error_code, resp.error_message)
            return
        self._heartbeat_answered(resp)
        if resp.assignment is not None:
            # Applied at once: share groups have no revocation step.
            self._set_assignment({t.topic_id: frozenset(t.partitions) for t in resp.assignment.topic_partitions})

    async def leave(self) -> None:
        """Stop heartbeating and leave the group (epoch -1): the broker reassigns at once."""
        was_active, self.active = self.active, False
        await cancel_and_wait(self._hb_task)
        self._hb_task = None
        if was_active and self.heartbeats_sent:
            cls = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)
            req = cls(group_id=self.group_id, member_id=self.member_id, member_epoch=LEAVE_EPOCH)
            await self._leave_heartbeat(req, ApiKey.SHARE_GROUP_HEARTBEAT, HEARTBEAT_VERSION, "leaving")
        self.member_epoch = JOIN_EPOCH
        self.sent.reset()
        self.heartbeats_sent = 0
        self._set_assignment({})

    async def close(self, *, leave: bool = True) -> None:
        if leave:
            await self.leave()
        self._closed = True
        self._wakeup.set()
        await cancel_and_wait(self._hb_task)
