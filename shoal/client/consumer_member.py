"""The member side of the consumer group protocol (KIP-848, ``group.protocol=consumer``).

A background task sends ConsumerGroupHeartbeat (API 68) to the group coordinator: the first
with member epoch 0 and every field, later ones only what changed, each after the interval
the broker returns, and at once when a reconciliation finishes (the acknowledgement carries
the owned partitions). Assignments arrive as topic ids; the consumer's ``poll`` reconciles
them, as Java's consumer runs its callbacks in poll: resolve the ids to names through
Metadata, commit (auto-commit), ``on_partitions_revoked`` for the partitions taken away,
``on_partitions_assigned`` for the new ones, then acknowledge. A fenced member
(FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) gets ``on_partitions_lost`` and rejoins with epoch
0; closing sends epoch -1 (dynamic member) or -2 (static member, which will be back).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import enum
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from shoal.protocol.errors import ErrorCode, error_name
from shoal.protocol.generated.api_keys import ApiKey
from shoal.waits import wait_event

from .cluster import ClusterMetadata, KafkaClient, cancel_and_wait, now_ms
from .errors import (
    CommitFailedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for,
)
from .member_offsets import (
    COORDINATOR_ERRORS,
    MEMBERSHIP_ERRORS,
    MemberIdentity,
    commit_offsets,
    fetch_offsets,
)
from .membership import ListenerInvoker, MemberBase
from .protocol import request_class
from .structs import OffsetAndMetadata, TopicPartition
from .subscription import SubscriptionState

log = logging.getLogger(__name__)

JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2
#: ConsumerGroupHeartbeat v1 adds SubscribedTopicRegex.
REGEX_VERSION = 1
UNSUPPORTED_MESSAGE = ("the broker does not support group.protocol=consumer (ConsumerGroupHeartbeat, KIP-848); "
                       "set group.protocol=classic until the cluster is upgraded")
FENCING_ERRORS = (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID)

Assignment = dict[uuid.UUID, frozenset[int]]


class MemberState(enum.Enum):
    """Where the member is (Java's MemberState, without the callback-waiting substates)."""

    UNSUBSCRIBED = "unsubscribed"    # not in the group, not trying to be
    JOINING = "joining"              # heartbeat with epoch 0 and every field
    RECONCILING = "reconciling"      # a target assignment differs from what the member owns
    ACKNOWLEDGING = "acknowledging"  # reconciled: the next heartbeat (sent at once) says so
    STABLE = "stable"                # owns its target assignment
    FENCED = "fenced"                # epoch fenced by the broker: lose the partitions, then rejoin
    STALE = "stale"                  # left for a poll timeout: lose the partitions on the next poll
    FATAL = "fatal"                  # an error the application must see; no more heartbeats


SENDING_STATES = (MemberState.JOINING, MemberState.RECONCILING, MemberState.ACKNOWLEDGING, MemberState.STABLE)


def new_member_id() -> str:
    """A member id as Kafka 4 clients make their own: a random UUID, base64url without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def resolve_assignment(cluster: ClusterMetadata, target: Assignment
                       ) -> tuple[Assignment, dict[TopicPartition, uuid.UUID], set[uuid.UUID]]:
    """The part of ``target`` whose topic ids metadata names, its partitions by name, and the unknown ids."""
    names = {info.topic_id: name for name, info in cluster.topics.items()
             if isinstance(info.topic_id, uuid.UUID) and info.topic_id.int}
    resolved: Assignment = {}
    by_name: dict[TopicPartition, uuid.UUID] = {}
    unknown: set[uuid.UUID] = set()
    for tid, parts in target.items():
        name = names.get(tid)
        if name is None:
            unknown.add(tid)
            continue
        resolved[tid] = parts
        by_name.update({TopicPartition(name, p): tid for p in parts})
    return resolved, by_name, unknown


@dataclass
class SentFields:
    """What the last heartbeats told the broker (None: nothing yet); a field is sent again when it changes."""

    rebalance_timeout_ms: int = -1
    topics: tuple[str, ...] | None = None
    regex: str | None = None
    assignor: str | None = None
    owned: tuple[int, Assignment] | None = None  # (local assignment epoch, partitions)

    def reset(self) -> None:
        self.rebalance_timeout_ms, self.topics, self.regex, self.assignor, self.owned = -1, None, None, None, None


class EpochMember(MemberBase):
    """What the consumer-protocol and share-group (KIP-932) members share: a member id of their own
    making, a member epoch, and heartbeats at the interval the broker returns (backing off after failures)."""

    #: How log lines name the group, and the heartbeat API (named in errors the application sees).
    kind, heartbeat_api = "group", "ConsumerGroupHeartbeat"
    #: What a member says when the broker does not serve its heartbeat.
    unsupported_message = UNSUPPORTED_MESSAGE
    #: Heartbeat errors retried after a backoff (besides the coordinator's).
    retry_errors: tuple[int, ...] = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,)

    def __init__(self, client: KafkaClient, subs: SubscriptionState, config: dict[str, Any],
                 invoke_listener: ListenerInvoker) -> None:
        super().__init__(client, subs, config, invoke_listener)
        self.rack_id: str | None = config.get("client.rack") or None
        self.member_id = new_member_id()
        self.member_epoch = JOIN_EPOCH
        self.next_heartbeat_ms = 0
        self.heartbeat_interval_ms = 0  # the last interval the coordinator asked for (its group config's)
        self.failures = 0
        self.heartbeats_sent = 0
        self.sent = SentFields()
        self._wakeup = asyncio.Event()

    def transition_to_fenced(self) -> None:
        raise NotImplementedError

    def _transition_to_joining(self) -> None:
        self.member_epoch = JOIN_EPOCH
        self.sent.reset()
        self.next_heartbeat_ms = 0
        self._wakeup.set()

    def _backoff(self, why: str) -> None:
        """A heartbeat attempt failed: the next one after an exponential backoff."""
        self.failures += 1
        base = self.config["retry.backoff.ms"]
        delay = min(base * 2 ** min(self.failures - 1, 10), self.config.get("retry.backoff.max.ms", 1000))
        self.next_heartbeat_ms = now_ms() + int(delay)
        log.debug("%s %s: %s; next heartbeat in %d ms", self.kind, self.group_id, why, delay)

    def _heartbeat_answered(self, resp: Any) -> None:
        """Take the member id, epoch and next heartbeat time a successful heartbeat response gives."""
        self.failures = 0
        if resp.member_id:
            self.member_id = resp.member_id
        if self.member_epoch == JOIN_EPOCH and resp.member_epoch > 0:
            log.info("%s %s: member %s joined with epoch %d", self.kind, self.group_id, self.member_id,
                     resp.member_epoch)
        self.member_epoch = resp.member_epoch
        self.heartbeat_interval_ms = resp.heartbeat_interval_ms
        self.next_heartbeat_ms = now_ms() + max(resp.heartbeat_interval_ms, 0)

    def on_heartbeat_error(self, code: int, message: str | None) -> None:
        """Apply a heartbeat error as Java's heartbeat managers do."""
        self.sent.reset()
        name = error_name(code)
        if code in COORDINATOR_ERRORS:
            log.info("%s %s: heartbeat %s; finding the coordinator again", self.kind, self.group_id, name)
            self.coordinator_dead(f"heartbeat {name}")
            self._backoff(f"heartbeat {name}")  # a short backoff: FindCoordinator may still point here
        elif code in FENCING_ERRORS:
            log.info("%s %s: member %s epoch %d fenced (%s); rejoining",
                     self.kind, self.group_id, self.member_id, self.member_epoch, name)
            self.transition_to_fenced()
        elif code in self.retry_errors:
            self._backoff(f"heartbeat {name}")
        elif code == ErrorCode.UNSUPPORTED_VERSION:
            self._fail(KafkaError(code, self.unsupported_message))
        else:
            # GROUP_MAX_SIZE_REACHED, authorization failures, INVALID_REQUEST, for the consumer protocol
            # UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION, FENCED_INSTANCE_ID and UNRELEASED_INSTANCE_ID
            # (the instance id is still held by a member that has not left: Java 4.4 fails too), and anything
            # unexpected: the application sees it.
            self._fail(error_for(code, f"{self.heartbeat_api} for group {self.group_id}: {name}"
                                       + (f": {message}" if message else "")))

    def _fail(self, err: BaseException) -> None:
        """An error the application must see (on its next poll); no more heartbeats."""
        log.error("%s %s: %s", self.kind, self.group_id, err)
        self.fatal = err
        self._wake_poll()

    def _wake_poll(self) -> None:
        if self.wakeup is not None:
            self.wakeup()

    async def _leave_heartbeat(self, req: Any, api_key: int, highest: int, reason: str) -> None:
        """Send the leave heartbeat ``req``: best effort (the session timeout ends the membership anyway)."""
        log.info("%s %s: member %s leaving with epoch %d (%s)", self.kind, self.group_id, self.member_id,
                 req.member_epoch, reason)
        try:
            version = await self.group_version_up_to(api_key, highest)
            if version >= 0:
                resp = await self.send_group(req, version=version,
                                             timeout_ms=min(self.config["request.timeout.ms"], 5000))
                if resp.error_code:
                    log.info("%s %s: leave heartbeat answered %s", self.kind, self.group_id,
                             error_name(resp.error_code))
        except Exception as e:  # noqa: BLE001 - leaving is best effort
            log.debug("leave heartbeat failed: %r", e)


class ConsumerMember(EpochMember):
    """A consumer-protocol member (Java's ConsumerMembershipManager and ConsumerHeartbeatRequestManager)."""

    def __init__(self, client: KafkaClient, subs: SubscriptionState, config: dict[str, Any],
                 invoke_listener: ListenerInvoker) -> None:
        super().__init__(client, subs, config, invoke_listener)
        self.server_assignor: str | None = config.get("group.remote.assignor") or None
        self.state = MemberState.UNSUBSCRIBED
        self.target: Assignment | None = None  # the broker's latest assignment
        self.current: Assignment = {}  # what the member owns (reconciled)
        self.local_epoch = 0  # bumped with every reconciled assignment, so it is acknowledged
        self.join_seq = 0  # bumped when the member is fenced or leaves: reconciliations in flight stop
        self._last_metadata_ms = 0

    # -- the GroupMembership face -------------------------------------------------------

    @property
    def group_generation(self) -> tuple[int, str]:
        if self.member_epoch > 0 and self.state in SENDING_STATES:
            return self.member_epoch, self.member_id
        return -1, ""

    def busy(self) -> bool:
        return self.subs.has_auto_assignment and (
            self.state in (MemberState.JOINING, MemberState.RECONCILING, MemberState.FENCED, MemberState.STALE)
            or self.coordinator_id is None)

    def on_metadata_update(self, partition_counts: Callable[[Iterable[str]], dict[str, int]]) -> None:
        """Nothing to do: the broker watches partition counts and topics matching a regex."""

    def identity(self) -> MemberIdentity:
        """The member id and epoch offset requests carry (-1 and "" outside the group)."""
        if self.subs.has_auto_assignment and self.member_epoch > 0 and self.state in SENDING_STATES:
            return MemberIdentity(self.member_epoch, self.member_id, self.instance_id)
        return MemberIdentity(-1, "", None)

    async def poll(self, timeout_ms: int) -> None:
        """From the consumer's poll: start (or restart) membership, reconcile, auto-commit."""
        self._start_poll()
        if self.subs.has_auto_assignment:
            if self.state in (MemberState.FENCED, MemberState.STALE):
                await self._lose_partitions()
            if self.state is MemberState.UNSUBSCRIBED:
                self._transition_to_joining()
            if self.subs.needs_rejoin_for_subscription:
                self.subs.needs_rejoin_for_subscription = False
                self.next_heartbeat_ms = 0
                self._wakeup.set()  # the changed subscription goes out with the next heartbeat
            self._ensure_heartbeat_task()
            if self.state is MemberState.RECONCILING:
                await self.reconcile()
        await self.maybe_auto_commit()

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: int | None = None) -> None:
        if not offsets:
            return
        if self.subs.has_auto_assignment and self.identity().member_epoch < 0:
            raise CommitFailedError("commit failed: this member is not in the group (joining, fenced or left)")
        await commit_offsets(self, offsets, self.identity, timeout_ms)

    def commit_error(self, code: int, what: str) -> Exception:
        return CommitFailedError() if code in MEMBERSHIP_ERRORS else error_for(code, what)

    async def fetch_committed(self, partitions: list[TopicPartition],
                              timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await fetch_offsets(self, partitions, self.identity, timeout_ms)

    def _rebalancing(self) -> bool:
        return self.state is MemberState.RECONCILING

    def _in_group(self) -> bool:
        return self.identity().member_epoch > 0

    # -- heartbeats ----------------------------------------------------------------------

    def _transition_to_joining(self) -> None:
        self.state = MemberState.JOINING
        super()._transition_to_joining()

    def build_heartbeat(self, version: int) -> Any:
        """The next ConsumerGroupHeartbeat: every field when joining, else only what changed."""
        hcls = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        req = hcls(group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
                   instance_id=self.instance_id)
        joining = self.state is MemberState.JOINING
        if joining:
            req.rack_id = self.rack_id
        timeout = self.config["max.poll.interval.ms"]
        if joining or self.sent.rebalance_timeout_ms != timeout:
            req.rebalance_timeout_ms = self.sent.rebalance_timeout_ms = timeout
        self._subscription_fields(req, version, joining)
        if self.server_assignor is not None and (joining or self.sent.assignor != self.server_assignor):
            req.server_assignor = self.sent.assignor = self.server_assignor
        owned = self._owned()
        if joining or self.sent.owned != owned:
            # Joining: always empty (the member released everything before it (re)joins).
            req.topic_partitions = [hcls.TopicPartitions(topic_id=t, partitions=sorted(ps))
                                    for t, ps in sorted(self.current.items(), key=lambda kv: str(kv[0]))]
            self.sent.owned = owned
        return req

    def _owned(self) -> tuple[int, Assignment]:
        return self.local_epoch, self.current

    def _subscription_fields(self, req: Any, version: int, joining: bool) -> None:
        pattern = self.subs.pattern
        if pattern is not None and version >= REGEX_VERSION:
            regex = pattern.pattern
            if joining or self.sent.regex != regex:
                req.subscribed_topic_regex = self.sent.regex = regex
            return
        # Topic names (a pattern on a broker without v1: the names it matches here).
        topics = tuple(sorted(self.subs.topics))
        if joining or self.sent.topics != topics:
            req.subscribed_topic_names = list(topics)
            self.sent.topics = topics

    def _heartbeat_due_in_ms(self) -> int:
        """How long until the next heartbeat (0: now): the interval, or at once to join or acknowledge."""
        if self.state in (MemberState.JOINING, MemberState.ACKNOWLEDGING) and not self.failures:
            return 0
        return max(0, self.next_heartbeat_ms - now_ms())

    async def _heartbeat_loop(self) -> None:
        poll_interval = self.config["max.poll.interval.ms"]
        while not self._closed:
            # Wake for the next heartbeat, or when the poll timer runs out (then leave, as Java does).
            wait = self._heartbeat_due_in_ms()
            if self.state in SENDING_STATES:
                wait = min(wait, max(0, self.last_poll_ms + poll_interval + 1 - now_ms()))
            await wait_event(self._wakeup, wait / 1000)
            self._wakeup.clear()
            if self._closed:
                return
            if self.state not in SENDING_STATES or not self.subs.has_auto_assignment:
                self.next_heartbeat_ms = now_ms() + 1000
                continue
            if now_ms() - self.last_poll_ms > poll_interval:
                await self._leave_for_poll_timeout()
            elif self._heartbeat_due_in_ms() == 0:
                await self.heartbeat_once()

    async def heartbeat_once(self) -> None:
        """Send one heartbeat and apply its response."""
        try:
            version = await self.group_version_up_to(ApiKey.CONSUMER_GROUP_HEARTBEAT, REGEX_VERSION)
        except (KafkaConnectionError, KafkaTimeoutError, OSError, KafkaError) as e:
            self._backoff(f"coordinator: {e!r}")
            return
        if version < 0:
            self._fail(KafkaError(ErrorCode.UNSUPPORTED_VERSION, self.unsupported_message))
            return
        req = self.build_heartbeat(version)
        seq = self.join_seq
        self.heartbeats_sent += 1
        try:
            resp = await self.send_group(req, version=version)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
            self.sent.reset()
            self._backoff(f"heartbeat: {e!r}")
            return
        if seq != self.join_seq or self.state not in SENDING_STATES:
            return  # fenced, left or closed meanwhile: this answer is about a membership gone
        if resp.error_code:
            self.on_heartbeat_error(resp.error_code, resp.error_message)
        else:
            self.on_heartbeat_success(resp, req.topic_partitions is not None)

    def on_heartbeat_success(self, resp: Any, acknowledged: bool) -> None:
        """Apply a successful heartbeat response (``acknowledged``: it carried the owned partitions)."""
        self._heartbeat_answered(resp)
        if resp.assignment is not None:
            self.target = {tp.topic_id: frozenset(tp.partitions) for tp in resp.assignment.topic_partitions}
        if not self.reconciled():
            self.state = MemberState.RECONCILING
            self._wake_poll()
        elif self.state is not MemberState.ACKNOWLEDGING or acknowledged or self.sent.owned == self._owned():
            self.state = MemberState.STABLE

    def reconciled(self) -> bool:
        return self.target is None or self.target == self.current

    def _fail(self, err: BaseException) -> None:
        self.state = MemberState.FATAL
        super()._fail(err)

    def transition_to_fenced(self) -> None:
        """The broker fenced this member: no heartbeats until poll has dropped the partitions."""
        self.join_seq += 1
        self.member_epoch = JOIN_EPOCH
        self.state = MemberState.FENCED
        self.next_heartbeat_ms = 0
        self._wake_poll()

    async def _lose_partitions(self) -> None:
        """Fenced or stale: ``on_partitions_lost`` for what was owned, then join again with epoch 0."""
        owned = self.subs.assigned()
        self.subs.set_assignment([])
        self.current, self.target = {}, None
        self.local_epoch += 1
        if owned:
            await self.invoke_listener("on_partitions_lost", sorted(owned))
        self._transition_to_joining()

    async def _leave_for_poll_timeout(self) -> None:
        log.warning("group %s: consumer poll timeout has expired (max.poll.interval.ms=%s); leaving the group",
                    self.group_id, self.config["max.poll.interval.ms"])
        await self._send_leave("consumer poll timeout has expired")
        self.state = MemberState.STALE
        self._wake_poll()

    # -- reconciliation -------------------------------------------------------------------

    async def reconcile(self) -> None:
        """Bring the owned partitions to the target: commit, revoke, assign, acknowledge."""
        if self.target is None:
            return
        resolved, by_name, unknown = resolve_assignment(self.client.cluster, self.target)
        if unknown:
            await self._refresh_for(unknown)
            resolved, by_name, unknown = resolve_assignment(self.client.cluster, self.target)
        if resolved == self.current:
            if unknown:
                return  # nothing new can be reconciled until metadata names the rest
            self.local_epoch += 1  # acknowledge again what is owned
            self.state = MemberState.ACKNOWLEDGING
            self._wakeup.set()
            return
        seq = self.join_seq
        owned = set(self.subs.assigned())
        assigned = set(by_name)
        revoked, added = sorted(owned - assigned), sorted(assigned - owned)
        log.info("group %s: member %s epoch %d reconciling: assigned %s, revoked %s, added %s",
                 self.group_id, self.member_id, self.member_epoch, sorted(assigned), revoked, added)
        if self.config["enable.auto.commit"]:
            await self._commit_consumed("auto-commit before reconciling", self.config["request.timeout.ms"])
        if seq != self.join_seq:
            return
        if revoked:
            await self.invoke_listener("on_partitions_revoked", revoked)
            if seq != self.join_seq:
                return
            self.subs.set_assignment(sorted(owned - set(revoked)))
        self.subs.set_assignment(sorted(assigned))
        await self.invoke_listener("on_partitions_assigned", added)
        if seq != self.join_seq:
            return
        self.current = resolved
        self.local_epoch += 1
        # Acknowledge what was reconciled; a part still unresolved brings the member back to RECONCILING.
        self.state = MemberState.ACKNOWLEDGING
        self.last_auto_commit_ms = now_ms()
        self._wakeup.set()

    async def _refresh_for(self, unknown: set[uuid.UUID]) -> None:
        if now_ms() - self._last_metadata_ms < max(self.config["retry.backoff.ms"], 500):
            return
        self._last_metadata_ms = now_ms()
        log.debug("group %s: assignment names unknown topic ids %s; refreshing metadata", self.group_id, unknown)
        try:
            await self.client.refresh_metadata()
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
            log.debug("metadata refresh failed: %r", e)

    # -- leaving ---------------------------------------------------------------------------

    async def _send_leave(self, reason: str) -> None:
        """The leave heartbeat: epoch -1, or -2 for a static member (which keeps its assignment a while)."""
        if not self.heartbeats_sent:
            return  # the broker never heard of this member
        epoch = STATIC_LEAVE_EPOCH if self.instance_id is not None else LEAVE_EPOCH
        hcls = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        req = hcls(group_id=self.group_id, member_id=self.member_id, member_epoch=epoch, instance_id=self.instance_id)
        self.join_seq += 1
        await self._leave_heartbeat(req, ApiKey.CONSUMER_GROUP_HEARTBEAT, REGEX_VERSION, reason)
        self.member_epoch = JOIN_EPOCH
        self.sent.reset()

    async def close(self, *, leave: bool = True) -> None:
        """Commit (auto-commit), revoke (lost, if fenced), leave the group, stop heartbeating."""
        in_group = self.subs.has_auto_assignment and self.state in SENDING_STATES
        if self._hb_task is not None:
            self._closed = True
            self._wakeup.set()
            await cancel_and_wait(self._hb_task)
        if in_group and self.config["enable.auto.commit"] and self.identity().member_epoch > 0:
            await self._commit_consumed("final auto-commit", self.config["request.timeout.ms"])
        owned = sorted(self.subs.assigned()) if self.subs.has_auto_assignment else []
        if owned:
            lost = self.state in (MemberState.FENCED, MemberState.STALE)
            with contextlib.suppress(Exception):
                await self.invoke_listener("on_partitions_lost" if lost else "on_partitions_revoked", owned)
            self.subs.set_assignment([])
        self.current, self.target = {}, None
        if in_group and leave:
            await self._send_leave("the consumer is being closed")
        self._closed = True
        self.state = MemberState.UNSUBSCRIBED
