"""The broker's share partitions: in-flight record state per (share group, topic partition).

The IO edge around the pure `partition.SharePartition`: it reads the partition's log to find the
records a fetch may acquire, keeps the group's settings (group configs over the broker's
`group.share.*` properties), starts a new share partition at `share.auto.offset.reset`, expires
acquisition locks on a timer, and wakes waiting share fetches when records become available
again. The share sessions (`sessions.ShareSessionCache`) live here too: a session that ends
releases what its member still holds.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shoal.broker.group_configs import broker_values, default_value, duration_ms
from shoal.broker.share.partition import AcknowledgeType, SharePartition
from shoal.broker.share.records_state import merge_acquired
from shoal.broker.share.sessions import ShareSession, ShareSessionCache
from shoal.clock import monotonic_ms, now_ms
from shoal.coordinator.share.state import ShareState
from shoal.protocol.errors import ErrorCode
from shoal.protocol.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK, iter_batches
from shoal.waits import wait_event

if TYPE_CHECKING:
    from shoal.broker.services import BrokerServices

log = logging.getLogger(__name__)

ShareKey = tuple[str, str, int]  # (group id, topic, partition)

class ShareStateError(Exception):
    """The share coordinator could not give or keep a share partition's state."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


@dataclass
class Acquired:
    """What one fetch acquired on one partition: the log's batches that hold the acquired records,
    and the acquired ranges (first offset, last offset, delivery count)."""

    records: bytes
    ranges: list[tuple[int, int, int]]


class SharePartitions:
    """Every share partition this broker leads, its share sessions and the lock-expiry timer."""

    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker
        self._max_sessions = (broker.config.get_int("group.share.max.share.sessions")
                              if broker.config.get("group.share.max.share.sessions") else 2000)
        self._sessions: dict[int, ShareSessionCache] = {}  # each node keeps its own, as each Kafka broker
        self._leaders: dict[ShareKey, int] = {}  # the node that led the partition when it was loaded
        self._partitions: dict[ShareKey, SharePartition] = {}
        self._timer: asyncio.Task[None] | None = None
        self._locks: dict[ShareKey, asyncio.Lock] = {}
        self._state_epochs: dict[ShareKey, int] = {}  # bumped by each reset of the start offset
        self._writes: set[asyncio.Task[ErrorCode]] = set()
        self._wake = asyncio.Event()

    # ---------------------------------------------------------------- settings
    def group_config(self, group_id: str, name: str) -> str:
        """A group's share setting: its group config override, else the broker's synonym."""
        override = self.broker.metadata.group_configs.get(group_id, {}).get(name)
        return override if override is not None else default_value(name, broker_values(self.broker.config.get))

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self.group_config(group_id, "share.record.lock.duration.ms"))

    def read_committed(self, group_id: str) -> bool:
        return self.group_config(group_id, "share.isolation.level") == "read_committed"

    def sessions(self, node_id: int) -> ShareSessionCache:
        """The share sessions of one broker node (a member has one per node it fetches from)."""
        cache = self._sessions.get(node_id)
        if cache is None:
            cache = self._sessions[node_id] = ShareSessionCache(self._max_sessions)
        return cache

    # ---------------------------------------------------------------- partitions
    def partition(self, group_id: str, topic: str, index: int) -> SharePartition:
        """The share partition in memory (KeyError if it was never loaded here)."""
        return self._partitions[(group_id, topic, index)]

    async def load(self, group_id: str, topic: str, index: int) -> SharePartition:
        """The share partition: in memory, else its state from the share coordinator, else a new one
        started at `share.auto.offset.reset` (and that start persisted)."""
        key = (group_id, topic, index)
        sp = self._partitions.get(key)
        if sp is not None:
            return sp
        async with self._lock(key):
            sp = self._partitions.get(key)
            if sp is not None:
                return sp
            topic_id = self.broker.metadata.topics[topic].topic_id
            code, state = await self.broker.share_coordinators.read_state(group_id, topic_id, index)
            if code != ErrorCode.NONE:
                raise ShareStateError(code)
            limit = int(self.group_config(group_id, "share.delivery.count.limit"))
            max_in_flight = int(self.group_config(group_id, "share.partition.max.record.locks"))
            lock_ms = self.lock_duration_ms(group_id)
            if state is not None:
                self._state_epochs[key] = state.state_epoch
            if state is not None and state.start_offset >= 0:
                plog = self.broker.partition_log(topic, index)
                start = max(state.start_offset, plog.log_start_offset)
                sp = SharePartition(start, delivery_count_limit=limit, max_in_flight=max_in_flight,
                                    record_lock_duration_ms=lock_ms,
                                    state_batches=[b for b in state.state_batches if b.last_offset >= start])
            else:
                sp = SharePartition(self._start_offset(group_id, topic, index), delivery_count_limit=limit,
                                    max_in_flight=max_in_flight, record_lock_duration_ms=lock_ms)
                code = await self.broker.share_coordinators.write_state(
                    group_id, topic_id, index, self._state_of(key, sp))
                if code != ErrorCode.NONE:
                    raise ShareStateError(code)
                sp.mark_persisted()
            self._partitions[key] = sp
            self._leaders[key] = self.broker.metadata.leader(topic, index)
            return sp

    def _lock(self, key: ShareKey) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def _state_of(self, key: ShareKey, sp: SharePartition) -> ShareState:
        _group, topic, index = key
        return ShareState(state_epoch=self._state_epochs.get(key, 0),
                          leader_epoch=self.broker.metadata.leader_epoch(topic, index),
                          start_offset=sp.start_offset,
                          state_batches=sp.state_batches())

    async def persist(self, key: ShareKey) -> ErrorCode:
        """Write the partition's current state to the share coordinator (when it changed since the
        last write). Writes of one partition are serialised and each takes the state as it is when it
        starts, so the last write always holds the newest state."""
        async with self._lock(key):
            sp = self._partitions.get(key)
            if sp is None or not sp.dirty:
                return ErrorCode.NONE
            group_id, topic, index = key
            info = self.broker.metadata.topics.get(topic)
            if info is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            version = sp.version
            code = await self.broker.share_coordinators.write_state(
                group_id, info.topic_id, index, self._state_of(key, sp))
            if code == ErrorCode.NONE:
                sp.mark_persisted(version)
            else:
                log.warning("share partition %s-%d of group %s: writing its state failed: %s", topic, index,
                            group_id, code.name)
            return ErrorCode(code)

    def _persist_later(self, key: ShareKey) -> None:
        """Persist a change no request waits for (a lock expiry, a session's release)."""
        task = asyncio.get_running_loop().create_task(self.persist(key))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    def _start_offset(self, group_id: str, topic: str, index: int) -> int:
        plog = self.broker.partition_log(topic, index)
        reset = self.group_config(group_id, "share.auto.offset.reset").strip().lower()
        if reset == "earliest":
            return plog.log_start_offset
        if reset.startswith("by_duration:"):
            ms = duration_ms(reset.split(":", 1)[1])
            if ms is not None:
                found = plog.offset_for_timestamp(now_ms() - ms)
                return found[0] if found is not None else plog.high_watermark
        return plog.high_watermark

    async def reset(self, group_id: str, topic: str, index: int, start_offset: int | None) -> ErrorCode:
        """AlterShareGroupOffsets (an offset) or DeleteShareGroupOffsets (None): the share partition
        starts over, its in-flight state dropped, under the next state epoch."""
        key = (group_id, topic, index)
        info = self.broker.metadata.topics.get(topic)
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        async with self._lock(key):
            self._partitions.pop(key, None)
            if start_offset is None:
                self._state_epochs.pop(key, None)
                return await self.broker.share_coordinators.delete_state(group_id, info.topic_id, [index])
            code, state = await self.broker.share_coordinators.read_state(group_id, info.topic_id, index)
            if code != ErrorCode.NONE:
                return code
            epoch = self._state_epochs[key] = (state.state_epoch if state is not None else 0) + 1
            return await self.broker.share_coordinators.write_state(
                group_id, info.topic_id, index, ShareState(
                    state_epoch=epoch, leader_epoch=self.broker.metadata.leader_epoch(topic, index),
                    start_offset=start_offset))

    def forget_topic(self, topic: str) -> None:
        """The topic was deleted: its share partitions go."""
        for key in [k for k in self._partitions if k[1] == topic]:
            del self._partitions[key]
            self._leaders.pop(key, None)
            self._state_epochs.pop(key, None)

    # ---------------------------------------------------------------- fetch and acknowledge
    async def acquire(self, group_id: str, member_id: str, topic: str, index: int, max_records: int,
                      max_bytes: int, now: int, batch_optimized: bool = True) -> Acquired:
        """Acquire up to ``max_records`` records of the partition for the member: the log's batches
        that hold them (at least one batch, else at most ``max_bytes``) and the acquired ranges.

        ``batch_optimized`` (ShareFetch's default acquire mode, KIP-1206) rounds the acquisition up
        to the end of the last batch it reached, as Kafka does, so one member may get more than
        ``max_records``; otherwise (record_limit) ``max_records`` is a strict bound."""
        sp = await self.load(group_id, topic, index)
        plog = self.broker.partition_log(topic, index)
        start = max(sp.fetch_offset(), plog.log_start_offset)
        committed = self.read_committed(group_id)
        bound = plog.last_stable_offset if committed else plog.high_watermark
        if start >= bound or max_records <= 0:
            return Acquired(b"", [])
        buf, _end = plog.read_with_end(start, max(1, max_bytes), min_one=True, max_offset=bound)
        if not buf:
            return Acquired(b"", [])
        data = bytes(buf)
        batches = [h for h in iter_batches(data) if h.base_offset + h.last_offset_delta >= start]
        if committed and batches:
            # read_committed: records of aborted transactions are never delivered (they are gaps,
            # left behind as Kafka archives them)
            last = batches[-1].base_offset + batches[-1].last_offset_delta
            aborted = plog.aborted_transactions(start, last + 1)
            batches = [h for h in batches if not (h.attributes & TRANSACTIONAL_MASK and any(
                a.producer_id == h.producer_id and a.first_offset <= h.base_offset <= a.last_offset
                for a in aborted))]
        candidates = [(max(h.base_offset, start), h.base_offset + h.last_offset_delta)
                      for h in batches if not h.attributes & CONTROL_MASK]
        lock_ms = self.lock_duration_ms(group_id)
        ranges = sp.acquire(member_id, candidates, max_records, now, lock_ms)
        if not ranges:
            return Acquired(b"", [])
        if batch_optimized:
            last = ranges[-1].last_offset
            end = next((h.base_offset + h.last_offset_delta for h in batches if not h.attributes & CONTROL_MASK
                        and h.base_offset <= last <= h.base_offset + h.last_offset_delta), last)
            if end > last:
                ranges = merge_acquired(ranges + sp.acquire(member_id, [(last + 1, end)], end - last, now,
                                                            lock_ms, read_from=last + 1))
        self._wake.set()
        self._ensure_timer()
        parts = [data[h.position:h.position + 12 + h.batch_length] for h in batches
                 if not h.attributes & CONTROL_MASK and _overlaps(h.base_offset, h.base_offset + h.last_offset_delta,
                                                                    ranges)]
        return Acquired(b"".join(parts), [(r.first_offset, r.last_offset, r.delivery_count) for r in ranges])

    async def acknowledge(self, group_id: str, member_id: str, topic: str, index: int,
                          batches: list[tuple[int, int, list[int]]], now: int) -> ErrorCode:
        """Apply a member's acknowledgements to one partition (all or none of them); answered once
        the new state is durable in the share coordinator, as Kafka does."""
        key = (group_id, topic, index)
        sp = self._partitions.get(key)
        if sp is None:
            return ErrorCode.INVALID_RECORD_STATE  # nothing of it was acquired since it was loaded
        code = sp.acknowledge(member_id, batches, now)
        if code != ErrorCode.NONE:
            return ErrorCode(code)
        self.broker.fetch_waiters.notify(topic, index)  # released records may be fetched again
        return await self.persist(key)

    def release_session(self, session: ShareSession, node_id: int, now: int) -> None:
        """A share session on ``node_id`` ended: records its member holds on the session's partitions
        that node leads become available. A partition led elsewhere now is not this session's to
        release: its member may hold records of it through its session with the new leader (in Kafka
        the old broker no longer has the partition at all)."""
        for topic_id, index in session.partitions:
            info = self.broker.metadata.by_id.get(topic_id)
            if info is None:
                continue
            key = (session.group_id, info.name, index)
            sp = self._partitions.get(key)
            if sp is not None and self._leaders.get(key) == node_id and sp.release_member(session.member_id, now):
                self.broker.fetch_waiters.notify(info.name, index)
                self._persist_later(key)

    def release_acquired(self, group_id: str, member_id: str, topic: str, index: int,
                         ranges: list[tuple[int, int]], now: int) -> None:
        """Records just acquired for an answer that will never be sent (its connection closed while
        the fetch waited for the partition's state): available again now, not when their lock ends.
        Their delivery count stays, as for any release."""
        key = (group_id, topic, index)
        sp = self._partitions.get(key)
        if sp is None or not ranges:
            return
        if sp.acknowledge(member_id, [(f, last, [AcknowledgeType.RELEASE]) for f, last in ranges],
                          now) == ErrorCode.NONE:
            self.broker.fetch_waiters.notify(topic, index)
            self._persist_later(key)

    def connection_closed(self, connection: object) -> None:
        """A client connection closed: its share sessions end."""
        now = monotonic_ms()
        for node_id, cache in self._sessions.items():
            for session in cache.close_connection(connection):
                self.release_session(session, node_id, now)

    def leadership_changed(self) -> None:
        """Partitions moved to other nodes: their share partitions are dropped here and the new
        leader loads them from the share coordinator, as a new Kafka leader does (records that were
        acquired come back available; their locks lived on the old leader)."""
        for key, leader in list(self._leaders.items()):
            _group, topic, index = key
            info = self.broker.metadata.topics.get(topic)
            if info is None or self.broker.metadata.leader(topic, index) != leader:
                self._partitions.pop(key, None)
                self._leaders.pop(key, None)

    # ---------------------------------------------------------------- acquisition locks
    def _ensure_timer(self) -> None:
        if self._timer is None or self._timer.done():
            self._timer = asyncio.get_running_loop().create_task(self._expire_locks())

    async def _expire_locks(self) -> None:
        """Until closed: at each lock deadline, expired records become available (or archived)."""
        while True:
            deadlines = [d for sp in self._partitions.values() if (d := sp.next_deadline()) is not None]
            self._wake.clear()
            timeout = None if not deadlines else max(0.0, (min(deadlines) - monotonic_ms()) / 1000)
            await wait_event(self._wake, timeout)
            now = monotonic_ms()
            for key, sp in list(self._partitions.items()):
                deadline = sp.next_deadline()
                if deadline is not None and deadline <= now and sp.expire_locks(now):
                    self.broker.fetch_waiters.notify(key[1], key[2])
                    self._persist_later(key)

    async def close(self) -> None:
        """Stop the lock timer; let pending state writes finish."""
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
        if self._timer is not None:
            self._timer.cancel()
            try:
                await self._timer
            except asyncio.CancelledError:
                pass
            self._timer = None

    # ---------------------------------------------------------------- for describe and metrics
    def states(self) -> dict[ShareKey, SharePartition]:
        return dict(self._partitions)


def _overlaps(first: int, last: int, ranges: list[Any]) -> bool:
    return any(r.first_offset <= last and first <= r.last_offset for r in ranges)

