"""Simulated members of share groups (KIP-932): ShareGroupHeartbeat, ShareFetch and acknowledgements.

A member joins its share group with epoch 0 and heartbeats at the interval it is told; the
assignment names partitions of the topic, which other members may share. It fetches from each
partition's leader in a share session of its own on that node (epoch 0 opens it, each accepted
request moves it on), and acknowledges what it acquired in its next ShareFetch to that node:
mostly ACCEPT, now and then RELEASE or REJECT, and now and then nothing at all, so that the
record's acquisition lock runs out. A request without an answer (a timeout, a dropped
connection) leaves the session's state unknown, so the member starts a new session there (as
Kafka's share consumer does), and the acknowledgements it carried may or may not have counted.
Leaving closes each session with epoch -1 (carrying the last acknowledgements), then leaves the
group with epoch -1.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from shoal.broker.share.sessions import next_epoch
from shoal.client.share_session import acknowledgement_batches
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.share_fetch_request import ShareFetchRequest
from shoal.protocol.generated.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from shoal.sim.consumer_groups import FENCED
from shoal.sim.network import NetworkError
from shoal.sim.wire import RETRY_ELSEWHERE, SimClient

ACCEPT, RELEASE, REJECT = 1, 2, 3
SESSION_TIMEOUT_MS = 3000  # the run's group.share.session.timeout.ms
_SESSION_LOST = frozenset({ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH})


def ack_batches(acks: dict[int, int]) -> list[ShareFetchRequest.AcknowledgementBatch]:
    """Offsets and their acknowledge types as the wire's batches (the shoal client's encoding)."""
    return [ShareFetchRequest.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=types)
            for first, last, types in acknowledgement_batches(acks)]


class ShareMember(SimClient):
    """One member of share group ``group`` subscribed to ``topic``."""

    def __init__(self, *args: Any, group: str, topic: str, lifetime_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group, self.topic, self.lifetime_s = group, topic, lifetime_s
        self.member_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        self.epoch = 0
        self.topic_id: uuid.UUID | None = None
        self.assigned: set[int] = set()
        self.sessions: dict[int, tuple[int, set[int]]] = {}  # node -> (next session epoch, its partitions)
        self.pending: dict[int, dict[int, int]] = {}  # partition -> offset -> acknowledge type, not yet sent
        self.interval = 0.5

    # ------------------------------------------------------------------ the group
    async def _heartbeat(self, epoch: int) -> Any | None:
        request = ShareGroupHeartbeatRequest(group_id=self.group, member_id=self.member_id, member_epoch=epoch,
                                             rack_id=None, subscribed_topic_names=[self.topic] if epoch == 0 else None)
        return await self.coordinator_call(self.group, ApiKey.SHARE_GROUP_HEARTBEAT, request, attempts=3)

    async def _keep_membership(self) -> None:
        resp = await self._heartbeat(self.epoch)
        if resp is None:
            return
        if resp.error_code in FENCED:
            self.trace.emit(f"{self.name} fenced ({ErrorCode(resp.error_code).name}): joins again")
            self.epoch, self.assigned = 0, set()
            return
        if resp.error_code != 0:
            return
        self.epoch = resp.member_epoch
        self.interval = max(resp.heartbeat_interval_ms, 100) / 1000
        if resp.assignment is not None:
            assigned = {p for t in resp.assignment.topic_partitions for p in t.partitions}
            for t in resp.assignment.topic_partitions:
                self.topic_id = t.topic_id
            if assigned != self.assigned:
                self.trace.emit(f"{self.name} epoch {self.epoch} assigned {sorted(assigned)}")
            self.assigned = assigned

    # ------------------------------------------------------------------ fetching
    async def _fetch(self, node: int, partitions: set[int], final: bool = False) -> None:
        assert self.topic_id is not None
        epoch, current = self.sessions.get(node, (0, set()))
        if final:
            if not epoch:
                return
            adds, forgotten, keeping = set(), set(), current
        else:
            adds, forgotten, keeping = partitions - current, current - partitions, current & partitions
        # acknowledgements go only in a session already open, for partitions it keeps (a partition
        # named in a request joins the session); those of a partition dropped are left to their locks
        acks = {p: self.pending.pop(p) for p in sorted(keeping) if p in self.pending} if epoch else {}
        if not epoch:
            for p in partitions:
                self.pending.pop(p, None)  # a new session releases what the old one held here
        topics = [ShareFetchRequest.FetchTopic(topic_id=self.topic_id, partitions=[
            ShareFetchRequest.FetchPartition(partition_index=p, acknowledgement_batches=ack_batches(acks.get(p, {})))
            for p in sorted(adds | set(acks))])]
        request = ShareFetchRequest(
            group_id=self.group, member_id=self.member_id, share_session_epoch=-1 if final else epoch,
            max_wait_ms=self.rng.choice((500, 1000)), min_bytes=1, max_bytes=1 << 20,
            max_records=self.rng.randint(1, 20), batch_size=10, topics=topics,
            forgotten_topics_data=[ShareFetchRequest.ForgottenTopic(topic_id=self.topic_id,
                                                                    partitions=sorted(forgotten))] if forgotten else [])
        try:
            resp = await self.call(node, ApiKey.SHARE_FETCH, request)
        except NetworkError:
            self.sessions.pop(node, None)  # the session's epoch is unknown now: a new one next time
            return
        if final:
            self.sessions.pop(node, None)
            return
        if resp.error_code in _SESSION_LOST:
            self.sessions.pop(node, None)
            return
        if resp.error_code != 0:
            await self.backoff()
            return
        self.sessions[node] = (next_epoch(epoch), set(partitions))
        for topic in resp.responses:
            for part in topic.partitions:
                if part.error_code in RETRY_ELSEWHERE:
                    self.leaders.pop((self.topic, part.partition_index), None)
                    continue
                for acquired in part.acquired_records or []:
                    for offset in range(acquired.first_offset, acquired.last_offset + 1):
                        self._decide(part.partition_index, offset)

    def _decide(self, partition: int, offset: int) -> None:
        roll = self.rng.random()
        if roll < 0.03:
            return  # never acknowledged: its lock runs out
        kind = ACCEPT if roll < 0.85 else RELEASE if roll < 0.95 else REJECT
        self.pending.setdefault(partition, {})[offset] = kind

    async def _fetch_round(self) -> None:
        by_node: dict[int, set[int]] = {}
        for p in sorted(self.assigned):
            by_node.setdefault(await self.leader(self.topic, p), set()).add(p)
        for node in sorted(set(self.sessions) - set(by_node)):  # leads none of ours now: close it
            await self._fetch(node, set(), final=True)
        for node, partitions in sorted(by_node.items()):
            await self._fetch(node, partitions)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + self.lifetime_s
        next_heartbeat = loop.time()
        while loop.time() < end:
            if loop.time() >= next_heartbeat or self.epoch == 0:
                await self._keep_membership()
                next_heartbeat = loop.time() + self.interval * self.rng.uniform(0.8, 1.0)
            if not self.assigned or self.topic_id is None:
                await self.backoff()
                continue
            if self.rng.random() < 0.01:
                pause = SESSION_TIMEOUT_MS / 1000 + self.rng.uniform(0.5, 2.0)
                self.trace.fault("member-pause", f"{self.name} pauses {pause:.1f} s (share group)")
                await asyncio.sleep(pause)
                continue
            await self._fetch_round()
        for node in sorted(self.sessions):
            await self._fetch(node, set(), final=True)
        if self.epoch > 0:
            self.trace.emit(f"{self.name} leaves")
            await self._heartbeat(-1)
