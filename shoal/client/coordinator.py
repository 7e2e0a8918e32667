"""Classic consumer-group membership: find the coordinator, join, sync, heartbeat, commit."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from shoal.assignors.types import COOPERATIVE, EAGER, Assignment, Subscription
from shoal.assignors.types import ClusterMetadata as AssignorCluster
from shoal.protocol.errors import ErrorCode, error_name
from shoal.protocol.generated.api_keys import ApiKey
from shoal.waits import wait_event

from . import assignment as ap
from .cluster import KafkaClient, cancel_and_wait, now_ms
from .errors import (
    CommitFailedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RebalanceInProgressError,
    error_for,
)
from .member_offsets import COORDINATOR_ERRORS, MemberIdentity, commit_offsets, fetch_offsets
from .membership import ListenerInvoker, MemberBase
from .protocol import CLIENT_MAX_VERSIONS, request_class
from .structs import OffsetAndMetadata, TopicPartition
from .subscription import SubscriptionState

log = logging.getLogger(__name__)

GENERATION_ERRORS = (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID)


class ConsumerCoordinator(MemberBase):
    """The member side of the classic group protocol (Java's ConsumerCoordinator)."""

    def __init__(
        self,
        client: KafkaClient,
        subs: SubscriptionState,
        config: dict[str, Any],
        assignors: list[Any],
        invoke_listener: ListenerInvoker,
    ) -> None:
        super().__init__(client, subs, config, invoke_listener)
        self.assignors = assignors
        # The protocol every configured assignor supports (Java: the highest common one).
        common = set.intersection(*(set(a.supported_protocols) for a in assignors))
        self.protocol_kind = COOPERATIVE if COOPERATIVE in common else EAGER
        self.generation = -1
        self.member_id = ""
        self.protocol_name: str | None = None
        self.is_leader = False
        self.rejoin_needed = True
        self.rejoining = False  # JoinGroup/SyncGroup in progress
        self.joined_once = False
        self.generation_lost = False  # the member was kicked out: owned partitions are lost
        self.last_heartbeat_ok_ms = now_ms()
        self._join_task: asyncio.Task | None = None
        self._hb_wakeup = asyncio.Event()
        self._join_prepared = False
        self.group_subscription: set[str] = set()
        self._known_counts: dict[str, int] | None = None

    def _coordinator_found(self) -> None:
        self.last_heartbeat_ok_ms = now_ms()

    # -- the GroupMembership face ---------------------------------------------------------

    @property
    def group_generation(self) -> tuple[int, str]:
        return self.generation, self.member_id

    def busy(self) -> bool:
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
        self._start_poll()
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
            self._ensure_heartbeat_task()
        await self.maybe_auto_commit()

    def _rebalancing(self) -> bool:
        return self.rejoining

    def _in_group(self) -> bool:
        return self.generation >= 0

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
            await self._commit_consumed("auto-commit before rejoin")
        owned = self.subs.assigned()
        if self.generation < 0 and self.joined_once or self.generation_lost:
            await self._lose_partitions()
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
            resp = await self.send_group(req, timeout_ms=max(self.config["request.timeout.ms"], rebalance_timeout + 5000))
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
            sresp = await self.send_group(sreq)
        except (KafkaConnectionError, KafkaTimeoutError, OSError):
            return None
        if sresp.error_code != 0:
            self._handle_group_error(sresp.error_code, "SyncGroup")
            return None
        assignment = ap.decode_assignment(bytes(sresp.assignment)) if sresp.assignment else Assignment([])
        assignor = self._assignor(self.protocol_name)
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
            await wait_event(self._hb_wakeup, interval)
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
                resp = await self.send_group(req)
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
                v = await self.group_version_up_to(ApiKey.LEAVE_GROUP, 5)
                if v >= 3:
                    req = lcls(group_id=self.group_id, members=[
                        lcls.MemberIdentity(member_id=self.member_id, group_instance_id=None,
                                            reason=reason if v >= 5 else None)])
                else:
                    req = lcls(group_id=self.group_id, member_id=self.member_id)
                await self.send_group(req, timeout_ms=min(self.config["request.timeout.ms"], 5000))
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
        await commit_offsets(self, offsets, self.identity, timeout_ms)

    def identity(self) -> MemberIdentity:
        """The generation and member id commits carry (-1 and "" for a consumer with assigned partitions)."""
        if self.subs.has_auto_assignment:
            return MemberIdentity(self.generation, self.member_id, self.instance_id)
        return MemberIdentity(-1, "", None)

    def commit_error(self, code: int, what: str) -> Exception:
        """The error that ends a commit refused with ``code`` (a rebalance or a lost generation: rejoin)."""
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.rejoin_needed = True
            return RebalanceInProgressError()
        if code in GENERATION_ERRORS:
            self.reset_generation(lost=True)
            return CommitFailedError()
        return error_for(code, what)

    async def fetch_committed(
        self, partitions: list[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        # OffsetFetch up to v7: the classic member does not name itself in offset fetches.
        return await fetch_offsets(self, partitions, self.identity, timeout_ms,
                                   CLIENT_MAX_VERSIONS[ApiKey.OFFSET_FETCH])

    # -- shutdown --------------------------------------------------------------------

    async def close(self, *, leave: bool = True) -> None:
        """Commit (auto-commit), call revoke, leave the group (dynamic members)."""
        await cancel_and_wait(self._join_task)
        if self.subs.has_auto_assignment and self.generation >= 0:
            if self.config["enable.auto.commit"]:
                await self._commit_consumed("final auto-commit", self.config["request.timeout.ms"])
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
        await cancel_and_wait(self._hb_task)
