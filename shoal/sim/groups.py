"""Simulated members of classic consumer groups, speaking JoinGroup/SyncGroup/Heartbeat/
OffsetCommit/LeaveGroup on the wire as an eager Kafka consumer does.

A member joins (answering MEMBER_ID_REQUIRED), the leader assigns the topic's partitions
round-robin over the members in member-id order, every member syncs, then heartbeats and
commits growing offsets of what it owns. Before rejoining it gives up what it owned (eager
revocation). Now and then a member leaves and comes back, or "dies": it stops heartbeating past
its session timeout (a long GC pause) and then, as a zombie, commits with its old generation,
which the coordinator must refuse.
"""

from __future__ import annotations

import asyncio
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.consumer_protocol_assignment import ConsumerProtocolAssignment
from shoal.protocol.generated.consumer_protocol_subscription import ConsumerProtocolSubscription
from shoal.protocol.generated.heartbeat_request import HeartbeatRequest
from shoal.protocol.generated.join_group_request import JoinGroupRequest
from shoal.protocol.generated.leave_group_request import LeaveGroupRequest
from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest
from shoal.protocol.generated.sync_group_request import SyncGroupRequest
from shoal.protocol.versioned import decode_versioned, encode_versioned
from shoal.sim.wire import SimClient, error_of, offset_fetch_request

SESSION_TIMEOUT_MS = 3000
REBALANCE_TIMEOUT_MS = 3000
HEARTBEAT_S = 0.5
# The member must start over (new member id) after these.
_RESET = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID})
# The member must rejoin (same member id) after these.
_REJOIN = frozenset({ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION})


def subscription(topic: str) -> bytes:
    return encode_versioned(ConsumerProtocolSubscription(topics=[topic]), 1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    return encode_versioned(ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=partitions)]), 1)


def assigned_partitions(blob: bytes) -> list[tuple[str, int]]:
    """The (topic, partition)s of a SyncGroup answer's assignment blob."""
    if not blob:
        return []
    a, _ = decode_versioned(ConsumerProtocolAssignment, blob, newer_as_latest=True)
    return [(tp.topic, p) for tp in a.assigned_partitions for p in tp.partitions]


class GroupMember(SimClient):
    """One classic-protocol consumer of ``group`` on ``topic``."""

    def __init__(self, *args: Any, group: str, topic: str, partitions: int, lifetime_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group, self.topic, self.partitions, self.lifetime_s = group, topic, partitions, lifetime_s
        self.member_id = ""
        self.generation = -1
        self.owned: list[int] = []
        self.positions: dict[int, int] = {}

    # ------------------------------------------------------------------ plumbing
    async def _group_call(self, api_key: ApiKey, request: Any, attempts: int = 20) -> Any | None:
        """A request to the group's coordinator, retried while the coordinator moves; None if it
        never answered."""
        return await self.coordinator_call(self.group, api_key, request, attempts)

    def _revoke(self, why: str) -> None:
        if self.owned:
            self.trace.emit(f"{self.name} revokes {self.owned} ({why})")
        self.owned = []

    def _reset(self, why: str) -> None:
        self._revoke(why)
        self.member_id, self.generation = "", -1

    # ------------------------------------------------------------------ the life of a member
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + self.lifetime_s
        while loop.time() < end:
            if not await self._join_and_sync():
                await self.backoff()
                continue
            await self._stable(end)
        await self._leave()

    async def _join_and_sync(self) -> bool:
        self._revoke("rejoining")
        req = JoinGroupRequest(group_id=self.group, session_timeout_ms=SESSION_TIMEOUT_MS,
                               rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, member_id=self.member_id,
                               protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                                   name="roundrobin", metadata=subscription(self.topic))])
        resp = await self._group_call(ApiKey.JOIN_GROUP, req)
        if resp is None:
            return False
        if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            return await self._join_and_sync()
        if resp.error_code in _RESET:
            self._reset(ErrorCode(resp.error_code).name)
            return False
        if resp.error_code != 0:
            return False
        self.member_id, self.generation = resp.member_id, resp.generation_id
        assignments = []
        if resp.leader == self.member_id:
            members = sorted(m.member_id for m in resp.members)
            share: dict[str, list[int]] = {m: [] for m in members}
            for p in range(self.partitions):
                share[members[p % len(members)]].append(p)
            assignments = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=assignment(
                self.topic, ps)) for m, ps in share.items()]
        sync = await self._group_call(ApiKey.SYNC_GROUP, SyncGroupRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            protocol_type="consumer", protocol_name="roundrobin", assignments=assignments))
        if sync is None or sync.error_code != 0:
            if sync is not None and sync.error_code in _RESET:
                self._reset(ErrorCode(sync.error_code).name)
            return False
        self.owned = [p for t, p in assigned_partitions(sync.assignment) if t == self.topic]
        self.trace.emit(f"{self.name} generation {self.generation} owns {self.owned}")
        for p in self.owned:
            if not await self._load_position(p):  # never commit from a stale position
                self._revoke("position unknown")
                return False
        return True

    async def _load_position(self, p: int) -> bool:
        """Start from the committed offset, as a consumer does when it is given a partition."""
        resp = await self._group_call(ApiKey.OFFSET_FETCH, offset_fetch_request(self.group, self.topic, p))
        if resp is None or resp.error_code != 0 or resp.topics[0].partitions[0].error_code != 0:
            return False
        self.positions[p] = max(resp.topics[0].partitions[0].committed_offset, 0)
        return True

    async def _stable(self, end: float) -> None:
        loop = asyncio.get_running_loop()
        while loop.time() < end:
            roll = self.rng.random()
            if roll < 0.03:
                await self._die_and_haunt()
                return
            if roll < 0.06:
                await self._leave()
                await asyncio.sleep(self.rng.uniform(0.2, 1.0))
                return
            code = await self._heartbeat_and_commit()
            if code in _RESET:
                self._reset(ErrorCode(code).name)
                return
            if code in _REJOIN or code is None:
                return
            await asyncio.sleep(self.rng.uniform(0.8, 1.2) * HEARTBEAT_S)

    async def _heartbeat_and_commit(self) -> int | None:
        hb = await self._group_call(ApiKey.HEARTBEAT, HeartbeatRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id), attempts=3)
        if hb is None or hb.error_code != 0:
            return None if hb is None else hb.error_code
        if not self.owned:
            return 0
        p = self.rng.choice(self.owned)
        self.positions[p] = self.positions.get(p, 0) + self.rng.randint(1, 5)
        resp = await self._group_call(ApiKey.OFFSET_COMMIT, self._commit(p, self.positions[p]), attempts=3)
        return None if resp is None else error_of(resp)

    def _commit(self, p: int, offset: int) -> OffsetCommitRequest:
        return OffsetCommitRequest(
            group_id=self.group, generation_id_or_member_epoch=self.generation, member_id=self.member_id,
            group_instance_id=None, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                name=self.topic, partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])])

    async def _die_and_haunt(self) -> None:
        """A long pause past the session timeout, then a commit from the old generation."""
        pause = SESSION_TIMEOUT_MS / 1000 + REBALANCE_TIMEOUT_MS / 1000 + self.rng.uniform(0.5, 2.0)
        self.trace.fault("member-pause", f"{self.name} ({self.member_id[-6:]}) pauses {pause:.1f} s")
        await asyncio.sleep(pause)
        if self.owned:
            p = self.owned[0]
            resp = await self._group_call(ApiKey.OFFSET_COMMIT, self._commit(p, self.positions.get(p, 0)), attempts=3)
            code = None if resp is None else error_of(resp)
            self.trace.emit(f"{self.name} zombie commit generation {self.generation}: "
                            f"{'no answer' if code is None else ErrorCode(code).name}")
        self._reset("paused past its session")

    async def _leave(self) -> None:
        if not self.member_id:
            return
        self.trace.emit(f"{self.name} leaves")
        await self._group_call(ApiKey.LEAVE_GROUP, LeaveGroupRequest(group_id=self.group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=self.member_id)]), attempts=3)
        self._reset("left")


