"""Simulated members of KIP-848 consumer groups (the consumer protocol), on ConsumerGroupHeartbeat.

A member makes up its member id (v1), joins with epoch 0, then heartbeats with its epoch and the
partitions it owns. An assignment in an answer replaces what it owns: it gives up what is no
longer there at once and reports that in its next heartbeat, as Kafka's consumer does. It may
pause past its session (and then learn it was fenced), or leave with epoch -1.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from shoal.sim.network import NetworkError
from shoal.sim.wire import RETRY_ELSEWHERE, SimClient

SESSION_TIMEOUT_MS = 3000
REBALANCE_TIMEOUT_MS = 3000
FENCED = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH})

Owned = dict[uuid.UUID, set[int]]


class ProtocolMember(SimClient):
    """One consumer-protocol member of ``group`` subscribed to ``topic``."""

    def __init__(self, *args: Any, group: str, topic: str, lifetime_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group, self.topic, self.lifetime_s = group, topic, lifetime_s
        self.member_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        self.epoch = 0
        self.owned: Owned = {}
        self.full = False  # the next heartbeat must be a full one

    def _request(self, epoch: int) -> ConsumerGroupHeartbeatRequest:
        # A full request (every field set) when joining, and after an error, as Kafka's consumer
        # does: the coordinator then answers with the whole assignment, which a lost answer may
        # have carried.
        full = epoch == 0 or self.full
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS if full else -1,
            subscribed_topic_names=[self.topic] if full else None, subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=[] if epoch <= 0 else [
                ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(self.owned.items())])

    async def _heartbeat(self, epoch: int) -> Any | None:
        for _ in range(3):
            node = await self.coordinator(self.group)
            try:
                resp = await self.call(node, ApiKey.CONSUMER_GROUP_HEARTBEAT, self._request(epoch))
            except NetworkError:
                self.full = True
                await self.backoff()
                continue
            self.full = False
            if resp.error_code in RETRY_ELSEWHERE:
                self.coordinators.pop(self.group, None)
                await self.backoff()
                continue
            return resp
        return None

    def _give_up_all(self, why: str) -> None:
        if self.owned:
            self.trace.emit(f"{self.name} gives up {self._show(self.owned)} ({why})")
        self.owned = {}
        self.epoch = 0

    @staticmethod
    def _show(owned: Owned) -> list[int]:
        return sorted(p for ps in owned.values() for p in ps)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + self.lifetime_s
        interval = 0.5
        while loop.time() < end:
            resp = await self._heartbeat(self.epoch)
            if resp is None:
                await self.backoff()
                continue
            if resp.error_code in FENCED:
                self._give_up_all(ErrorCode(resp.error_code).name)
                continue
            if resp.error_code != 0:
                await self.backoff()
                continue
            self.epoch = resp.member_epoch
            interval = max(resp.heartbeat_interval_ms, 100) / 1000
            if resp.assignment is not None:
                owned = {t.topic_id: set(t.partitions) for t in resp.assignment.topic_partitions}
                if owned != self.owned:
                    self.trace.emit(f"{self.name} epoch {self.epoch} owns {self._show(owned)}")
                self.owned = owned
            if self.rng.random() < 0.02:
                pause = SESSION_TIMEOUT_MS / 1000 + self.rng.uniform(0.5, 2.0)
                self.trace.fault("member-pause", f"{self.name} pauses {pause:.1f} s (consumer protocol)")
                await asyncio.sleep(pause)
                continue
            await asyncio.sleep(interval * self.rng.uniform(0.8, 1.0))
        if self.epoch > 0:
            self.trace.emit(f"{self.name} leaves")
            await self._heartbeat(-1)
        self._give_up_all("left")
