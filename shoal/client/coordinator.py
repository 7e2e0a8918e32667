"""Classic consumer-group membership: find the coordinator, join, sync, heartbeat, commit."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from shoal.assignors.types import COOPERATIVE, EAGER, Subscription
from shoal.assignors.types import ClusterMetadata as AssignorCluster
from shoal.protocol.errors import ErrorCode, error_name
from shoal.protocol.generated.api_keys import ApiKey

from . import assignment as ap
from .cluster import KafkaClient, now_ms
from .errors import (
    CommitFailedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RebalanceInProgressError,
    error_for,
)
from .membership import log_commit_failure
from .protocol import request_class
from .structs import OffsetAndMetadata, TopicPartition
from .subscription import SubscriptionState

log = logging.getLogger(__name__)

COORDINATOR_ERRORS = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)
RETRY_ERRORS = COORDINATOR_ERRORS + (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT)
GENERATION_ERRORS = (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID)

ListenerInvoker = Callable[[str, list[TopicPartition]], Awaitable[None]]


class ConsumerCoordinator:
    """The member side of the classic group protocol (Java's ConsumerCoordinator)."""

    def __init__(
        self,
        client: KafkaClient,
        subs: SubscriptionState,
        config: dict[str, Any],
        assignors: list[Any],
        invoke_listener: ListenerInvoker,
    ) -> None:
        self.client = client
        self.subs = subs
        self.config = config
        self.group_id: str = config["group.id"]
        self.instance_id: str | None = config.get("group.instance.id") or None
        self.assignors = assignors
        self.invoke_listener = invoke_listener
        # The protocol every configured assignor supports (Java: the highest common one).
        common = set.intersection(*(set(a.supported_protocols) for a in assignors))
        self.protocol_kind = COOPERATIVE if COOPERATIVE in common else EAGER
        self.coordinator_id: int | None = None
        self.generation = -1
        self.member_id = ""
        self.protocol_name: str | None = None
        self.is_leader = False
        self.rejoin_needed = True
        self.rejoining = False  # JoinGroup/SyncGroup in progress
        self.joined_once = False
        self.generation_lost = False  # the member was kicked out: owned partitions are lost
        self.left_for_poll_timeout = False
        self.last_poll_ms = now_ms()
        self.last_heartbeat_ok_ms = now_ms()
        self.last_auto_commit_ms = now_ms()
        self._join_task: asyncio.Task | None = None
        self._hb_task: asyncio.Task | None = None
        self._hb_wakeup = asyncio.Event()
        self._join_prepared = False
        self._closed = False
        self.group_subscription: set[str] = set()
        self._known_counts: dict[str, int] | None = None
        self.wakeup: Callable[[], None] | None = None  # unused: classic work happens inside poll
        self.fatal: BaseException | None = None

    # -- coordinator discovery -------------------------------------------------------

    async def ensure_coordinator(self, timeout_ms: int | None = None) -> int:
        if self.coordinator_id is None:
            deadline = now_ms() + (timeout_ms if timeout_ms is not None else self.config["default.api.timeout.ms"])
            self.coordinator_id = await self.client.find_coordinator(self.group_id, 0, deadline)
            self.last_heartbeat_ok_ms = now_ms()
        return self.coordinator_id

    def coordinator_dead(self, why: str) -> None:
        if self.coordinator_id is not None:
            log.info("group %s: marking coordinator %s dead (%s)", self.group_id, self.coordinator_id, why)
            self.client.close_node_purpose(self.coordinator_id, "group")
            self.coordinator_id = None

    async def _send(self, request: Any, timeout_ms: int | None = None) -> Any:
        node = await self.ensure_coordinator()
        try:
            conn = await self.client.conn(node, purpose="group")
            return await conn.send(request, timeout_ms=timeout_ms)
        except (KafkaConnectionError, KafkaTimeoutError, OSError):
            self.coordinator_dead("connection failure")
            raise

    async def _version(self, api_key: int) -> int:
        node = await self.ensure_coordinator()
        conn = await self.client.conn(node, purpose="group")
        return conn.version_for(api_key)

    # -- the GroupMembership face ---------------------------------------------------------

    @property
    def group_generation(self) -> tuple[int, str]:
        """(generation, member id)."""
        return self.generation, self.member_id

    def busy(self) -> bool:
        """Joining, lost or without a coordinator."""
        return self.need_rejoin() or self.generation_lost or self.coordinator_id is None

    def on_metadata_update(self, partition_counts: Callable[[Iterable[str]], dict[str, int]]) -> None:
        """The leader rejoins when a subscribed topic's partition count changes."""
        if not (self.is_leader and self.group_subscription):
            return
        counts = partition_counts(self.group_subscription)
        if self._known_counts not in (None, counts):
            self.rejoin_needed = True
        self._known_counts = counts

    # -- the poll-driven part -----------------------------------------------------------

    def need_rejoin(self) -> bool:
        if not self.subs.has_auto_assignment:
            return False
        return self.rejoin_needed or self.generation < 0 or self.subs.needs_rejoin_for_subscription

    async def poll(self, timeout_ms: int) -> None:
        """Called from the consumer's poll: record liveness, (re)join, auto-commit."""
        if self.fatal is not None:
            err, self.fatal = self.fatal, None
            raise err
        self.last_poll_ms = now_ms()
        if self.subs.has_auto_assignment:
            if self.generation_lost and not self.rejoining:
                await self._lose_partitions()
            if self.need_rejoin():
                if self._join_task is None or self._join_task.done():
                    self._join_task = asyncio.get_running_loop().create_task(self._ensure_active_group())
                done, _ = await asyncio.wait({self._join_task}, timeout=max(timeout_ms, 0) / 1000)
                if self._join_task in done:
                    task, self._join_task = self._join_task, None
                    task.result()
            if self._hb_task is None or self._hb_task.done():
                self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        await self.maybe_auto_commit()

    async def maybe_auto_commit(self) -> None:
        if not self.config["enable.auto.commit"] or self.rejoining:
            return
        if now_ms() - self.last_auto_commit_ms < self.config["auto.commit.interval.ms"]:
            return
        self.last_auto_commit_ms = now_ms()
        offsets = self.subs.consumed_offsets()
        if not offsets or (self.subs.has_auto_assignment and self.generation < 0):
            return
        task = asyncio.get_running_loop().create_task(self.commit(offsets))
        task.add_done_callback(log_commit_failure)

    async def _lose_partitions(self) -> None:
        owned = self.subs.assigned()
        self.generation_lost = False
        if owned:
            self.subs.set_assignment([])
            await self.invoke_listener("on_partitions_lost", owned)

    async def _ensure_active_group(self) -> None:
        self.rejoining = True
        try:
            if not self._join_prepared:
                await self._on_join_prepare()
                self._join_prepared = True
            while not self._closed:
                await self.ensure_coordinator()
                assignment = await self._join_and_sync()
                if assignment is None:
                    await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
                    continue
                self._join_prepared = False
                self.rejoining = False
                await self._on_join_complete(assignment)
                return
        finally:
            self.rejoining = False

    async def _on_join_prepare(self) -> None:
        """Before JoinGroup: commit what was consumed, then revoke (or declare lost)."""
        if self.config["enable.auto.commit"] and self.generation >= 0:
            offsets = self.subs.consumed_offsets()
            if offsets:
                try:
                    await self.commit(offsets)
                except Exception as e:  # noqa: BLE001 - the rebalance proceeds anyway
                    log.warning("group %s: auto-commit before rejoin failed: %r", self.group_id, e)
        owned = self.subs.assigned()
        if self.generation < 0 and self.joined_once or self.generation_lost:
            self.generation_lost = False
            if owned:
                self.subs.set_assignment([])
                await self.invoke_listener("on_partitions_lost", owned)
        elif self.protocol_kind == EAGER:
            self.subs.set_assignment([])
            if owned or self.joined_once:
                await self.invoke_listener("on_partitions_revoked", owned)
        else:
            gone = [tp for tp in owned if tp.topic not in self.subs.topics]
            if gone:
                self.subs.set_assignment([tp for tp in owned if tp not in gone])
                await self.invoke_listener("on_partitions_revoked", gone)
        self.subs.needs_rejoin_for_subscription = False

    def _subscription_metadata(self, assignor: Any) -> bytes:
        topics = sorted(self.subs.topics)
        sub = Subscription(
            topics=topics,
            user_data=assignor.subscription_user_data(topics),
            owned_partitions=sorted(self.subs.assigned()),
            generation_id=self.generation,
            rack_id=self.config.get("client.rack") or None,
        )
        return ap.encode_subscription(sub)

    async def _join_and_sync(self) -> list[TopicPartition] | None:
        """One JoinGroup + SyncGroup round; None means retry."""
        jcls = request_class(ApiKey.JOIN_GROUP)
        rebalance_timeout = self.config["max.poll.interval.ms"]
        req = jcls(
            group_id=self.group_id,
            session_timeout_ms=self.config["session.timeout.ms"],
            rebalance_timeout_ms=rebalance_timeout,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocols=[
                jcls.JoinGroupRequestProtocol(name=a.name, metadata=self._subscription_metadata(a))
                for a in self.assignors
            ],
            reason="shoal-python rejoin" if self.joined_once else None,
        )
        try:
            resp = await self._send(req, timeout_ms=max(self.config["request.timeout.ms"], rebalance_timeout + 5000))
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
            log.debug("JoinGroup failed: %r", e)
            return None
        code = resp.error_code
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            return await self._join_and_sync()
        if code != 0:
            self._handle_group_error(code, "JoinGroup")
            return None
        self.generation = resp.generation_id
        self.member_id = resp.member_id
        self.protocol_name = resp.protocol_name
        self.is_leader = resp.leader == resp.member_id
        self.joined_once = True
        assignments: list[Any] = []
        scls = request_class(ApiKey.SYNC_GROUP)
        if self.is_leader and not getattr(resp, "skip_assignment", False):
            try:
                assignments = await self._perform_assignment(resp, scls)
            except Exception as e:  # noqa: BLE001 - a broken assignor must not kill the consumer loop
                log.exception("group %s: assignment failed", self.group_id)
                self.fatal = e
                raise
        sreq = scls(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocol_name=self.protocol_name,
            assignments=assignments,
        )
        try:
            sresp = await self._send(sreq)
        except (KafkaConnectionError, KafkaTimeoutError, OSError):
            return None
        if sresp.error_code != 0:
            self._handle_group_error(sresp.error_code, "SyncGroup")
            return None
        assignment = ap.decode_assignment(bytes(sresp.assignment)) if sresp.assignment else None
        assignor = self._assignor(self.protocol_name)
        if assignment is None:
            from shoal.assignors.types import Assignment

            assignment = Assignment([])
        with contextlib.suppress(Exception):
            assignor.on_assignment(assignment, self.generation)
        self.rejoin_needed = False
        self.last_heartbeat_ok_ms = now_ms()
        return [TopicPartition(tp.topic, tp.partition) for tp in assignment.partitions]

    def _assignor(self, name: str | None) -> Any:
        for a in self.assignors:
            if a.name == name:
                return a
        raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"group elected unknown assignor {name!r}")

    async def _perform_assignment(self, resp: Any, scls: Any) -> list[Any]:
        assignor = self._assignor(resp.protocol_name)
        subscriptions: dict[str, Subscription] = {}
        for m in resp.members:
            sub = ap.decode_subscription(bytes(m.metadata))
            sub.group_instance_id = m.group_instance_id
            subscriptions[m.member_id] = sub
        topics = set().union(*(set(s.topics) for s in subscriptions.values()))
        self.group_subscription = topics
        self.client.add_topics(topics)
        await self.client.refresh_metadata(sorted(topics))
        cluster = self.client.cluster
        replicas: dict[str, list[list[int]]] = {}
        for t in topics:
            info = cluster.topics.get(t)
            if info is None or info.error_code or not info.leaders:
                continue
            replicas[t] = [info.replicas.get(p, [info.leaders[p]]) for p in sorted(info.leaders)]
        node_racks = {n: b.rack for n, b in cluster.brokers.items()}
        meta = AssignorCluster.from_replicas(replicas, node_racks)
        result = assignor.assign_cluster(meta, subscriptions)
        log.info("group %s generation %s: leader assigned %s", self.group_id, self.generation,
                 {m: sorted(a.partitions) for m, a in result.items()})
        return [scls.SyncGroupRequestAssignment(member_id=m, assignment=ap.encode_assignment(a))
                for m, a in result.items()]

    def _handle_group_error(self, code: int, what: str) -> None:
        log.info("group %s: %s error %s", self.group_id, what, error_name(code))
        if code in COORDINATOR_ERRORS:
            self.coordinator_dead(f"{what} {error_name(code)}")
        elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self.reset_generation(lost=True)
        elif code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.rejoin_needed = True
        elif code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNKNOWN_SERVER_ERROR):
            pass
        else:
            # FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, GROUP_MAX_SIZE_REACHED, auth...: fatal
            err = error_for(code, f"{what} for group {self.group_id}")
            self.fatal = err
            raise err

    async def _on_join_complete(self, assigned: list[TopicPartition]) -> None:
        owned = set(self.subs.assigned())
        new = set(assigned)
        if self.protocol_kind == COOPERATIVE:
            revoked = sorted(owned - new)
            added = sorted(new - owned)
            if revoked:
                await self.invoke_listener("on_partitions_revoked", revoked)
            self.subs.set_assignment(sorted(new))
            await self.invoke_listener("on_partitions_assigned", added)
            if revoked:
                self.rejoin_needed = True  # give the revoked partitions to their new owners
        else:
            self.subs.set_assignment(sorted(new))
            await self.invoke_listener("on_partitions_assigned", sorted(new))
        self.last_auto_commit_ms = now_ms()
        self._hb_wakeup.set()

    def reset_generation(self, *, lost: bool) -> None:
        self.generation = -1
        self.member_id = ""
        self.rejoin_needed = True
        if lost and self.subs.assigned():
            self.generation_lost = True

    # -- heartbeat -------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        hcls = request_class(ApiKey.HEARTBEAT)
        interval = self.config["heartbeat.interval.ms"] / 1000
        while not self._closed:
            self._hb_wakeup.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._hb_wakeup.wait(), interval)
            if self._closed:
                return
            if not self.subs.has_auto_assignment or self.generation < 0:
                continue
            if now_ms() - self.last_poll_ms > self.config["max.poll.interval.ms"]:
                log.warning(
                    "group %s: consumer poll timeout has expired (max.poll.interval.ms=%s); leaving the group",
                    self.group_id, self.config["max.poll.interval.ms"],
                )
                await self.maybe_leave_group("consumer poll timeout has expired")
                self.left_for_poll_timeout = True
                continue
            if self.rejoining or self.coordinator_id is None:
                if self.coordinator_id is None and not self.rejoining:
                    with contextlib.suppress(Exception):
                        await self.ensure_coordinator(self.config["request.timeout.ms"])
                continue
            req = hcls(group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
                       group_instance_id=self.instance_id)
            gen = self.generation
            try:
                resp = await self._send(req)
            except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
                log.debug("heartbeat failed: %r", e)
                self._check_session()
                continue
            if gen != self.generation:
                continue
            code = resp.error_code
            if code == 0:
                self.last_heartbeat_ok_ms = now_ms()
            elif code == ErrorCode.REBALANCE_IN_PROGRESS:
                self.last_heartbeat_ok_ms = now_ms()
                self.rejoin_needed = True
            elif code in GENERATION_ERRORS:
                log.info("group %s: heartbeat %s: partitions lost", self.group_id, error_name(code))
                self.reset_generation(lost=True)
                if code == ErrorCode.FENCED_INSTANCE_ID:
                    self.fatal = error_for(code, "static member fenced by another instance")
            elif code in COORDINATOR_ERRORS:
                self.coordinator_dead(f"heartbeat {error_name(code)}")
            else:
                log.warning("group %s: heartbeat error %s", self.group_id, error_name(code))

    def _check_session(self) -> None:
        if now_ms() - self.last_heartbeat_ok_ms > self.config["session.timeout.ms"]:
            self.coordinator_dead("no heartbeat within session.timeout.ms")

    async def maybe_leave_group(self, reason: str) -> None:
        """Send LeaveGroup (dynamic members only) and forget the generation."""
        if self.generation >= 0 and self.member_id and self.instance_id is None and self.coordinator_id is not None:
            lcls = request_class(ApiKey.LEAVE_GROUP)
            try:
                v = await self._version(ApiKey.LEAVE_GROUP)
                if v >= 3:
                    req = lcls(group_id=self.group_id, members=[
                        lcls.MemberIdentity(member_id=self.member_id, group_instance_id=None,
                                            reason=reason if v >= 5 else None)])
                else:
                    req = lcls(group_id=self.group_id, member_id=self.member_id)
                await self._send(req, timeout_ms=min(self.config["request.timeout.ms"], 5000))
            except Exception as e:  # noqa: BLE001 - leaving is best effort
                log.debug("LeaveGroup failed: %r", e)
        self.reset_generation(lost=True)

    # -- offsets ---------------------------------------------------------------------

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: int | None = None) -> None:
        """OffsetCommit; raises CommitFailedError if this member lost its generation."""
        if not offsets:
            return
        subscribed = self.subs.has_auto_assignment
        if subscribed and (self.generation < 0 or not self.member_id):
            if self.rejoining:
                raise RebalanceInProgressError()
            raise CommitFailedError()
        ccls = request_class(ApiKey.OFFSET_COMMIT)
        deadline = now_ms() + (timeout_ms if timeout_ms is not None else self.config["default.api.timeout.ms"])
        by_topic: dict[str, list[Any]] = {}
        for tp, om in offsets.items():
            if isinstance(om, int):
                om = OffsetAndMetadata(om)
            by_topic.setdefault(tp.topic, []).append(ccls.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata))
        while True:
            req = ccls(
                group_id=self.group_id,
                generation_id_or_member_epoch=self.generation if subscribed else -1,
                member_id=self.member_id if subscribed else "",
                group_instance_id=self.instance_id if subscribed else None,
                topics=[ccls.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
            )
            try:
                resp = await self._send(req)
            except (KafkaConnectionError, KafkaTimeoutError, OSError):
                retry = True
            else:
                retry = self._commit_needs_retry(resp)
            if not retry:
                return
            if now_ms() >= deadline:
                raise KafkaTimeoutError("offset commit timed out")
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    def _commit_needs_retry(self, resp: Any) -> bool:
        """Whether an OffsetCommit response asks for a retry; raises for an error that ends the commit."""
        retry = False
        for t in resp.topics:
            for p in t.partitions:
                code = p.error_code
                if code == 0:
                    continue
                if code in RETRY_ERRORS:
                    if code in COORDINATOR_ERRORS:
                        self.coordinator_dead(f"OffsetCommit {error_name(code)}")
                    retry = True
                elif code == ErrorCode.REBALANCE_IN_PROGRESS:
                    self.rejoin_needed = True
                    raise RebalanceInProgressError()
                elif code in GENERATION_ERRORS:
                    self.reset_generation(lost=True)
                    raise CommitFailedError()
                else:
                    raise error_for(code, f"OffsetCommit {t.name}-{p.partition_index}")
        return retry

    async def fetch_committed(
        self, partitions: list[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        fcls = request_class(ApiKey.OFFSET_FETCH)
        deadline = now_ms() + (timeout_ms if timeout_ms is not None else self.config["default.api.timeout.ms"])
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        while True:
            require_stable = await self._version(ApiKey.OFFSET_FETCH) >= 7
            req = fcls(group_id=self.group_id, require_stable=require_stable,
                       topics=[fcls.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()])
            try:
                resp = await self._send(req)
            except (KafkaConnectionError, KafkaTimeoutError, OSError):
                resp = None
            if resp is not None:
                code = getattr(resp, "error_code", 0)
                retry = code in RETRY_ERRORS
                if code in COORDINATOR_ERRORS:
                    self.coordinator_dead(f"OffsetFetch {error_name(code)}")
                elif code and not retry:
                    raise error_for(code, "OffsetFetch")
                out: dict[TopicPartition, OffsetAndMetadata | None] = {}
                for t in resp.topics:
                    for p in t.partitions:
                        if p.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT or p.error_code in RETRY_ERRORS:
                            retry = True
                            continue
                        if p.error_code:
                            raise error_for(p.error_code, f"OffsetFetch {t.name}-{p.partition_index}")
                        tp = TopicPartition(t.name, p.partition_index)
                        out[tp] = (OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                     getattr(p, "committed_leader_epoch", -1))
                                   if p.committed_offset >= 0 else None)
                if not retry:
                    return out
            if now_ms() >= deadline:
                raise KafkaTimeoutError("offset fetch timed out")
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    # -- shutdown --------------------------------------------------------------------

    async def close(self, *, leave: bool = True) -> None:
        """Commit (auto-commit), call revoke, leave the group (dynamic members)."""
        if self._join_task is not None and not self._join_task.done():
            self._join_task.cancel()
            with contextlib.suppress(BaseException):
                await self._join_task
        if self.subs.has_auto_assignment and self.generation >= 0:
            if self.config["enable.auto.commit"]:
                try:
                    await self.commit(self.subs.consumed_offsets(), timeout_ms=self.config["request.timeout.ms"])
                except Exception as e:  # noqa: BLE001
                    log.warning("group %s: final auto-commit failed: %r", self.group_id, e)
            owned = self.subs.assigned()
            if owned:
                with contextlib.suppress(Exception):
                    await self.invoke_listener("on_partitions_revoked", owned)
            if leave:
                await self.maybe_leave_group("the consumer is being closed")
        elif self.subs.has_auto_assignment and self.generation_lost and self.subs.assigned():
            with contextlib.suppress(Exception):
                await self.invoke_listener("on_partitions_lost", self.subs.assigned())
        self._closed = True
        self._hb_wakeup.set()
        if self._hb_task is not None:
            self._hb_task.cancel()
            with contextlib.suppress(BaseException):
                await self._hb_task
