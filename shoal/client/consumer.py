"""The asyncio consumer core: poll loop, positions, fetching and the group coordinator."""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from shoal.protocol.errors import ErrorCode, is_retriable
from shoal.protocol.generated.api_keys import ApiKey
from shoal.waits import wait_event

from .assignment import resolve_assignors
from .cluster import AsyncCore, KafkaClient, now_ms
from .config import CONSUMER_DEFAULTS, make_config
from .errors import (
    ClosedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    error_for,
)
from .fetcher import Fetcher
from .membership import GroupMembership, check_protocol_settings, make_membership
from .protocol import SPECS, request_class
from .records import RecordList
from .structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition, by_topic
from .subscription import SubscriptionState

log = logging.getLogger(__name__)

EARLIEST, LATEST = -2, -1

ListenerRunner = Callable[[Callable[[list[TopicPartition]], Any], list[TopicPartition]], Awaitable[None]]


def _tps(partitions: Any) -> list[TopicPartition]:
    return [TopicPartition(p[0], p[1]) for p in partitions]


class AIOConsumer(AsyncCore):
    """Asyncio Kafka consumer; group membership by ``group.protocol``: classic or consumer (KIP-848)."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = make_config(CONSUMER_DEFAULTS, config, **kwargs)
        cfg = self.config
        self.group_protocol = check_protocol_settings(
            cfg, [*(config or {}), *(k.replace("_", ".") for k in kwargs)])
        reset = str(cfg["auto.offset.reset"]).lower()
        reset = {"smallest": "earliest", "beginning": "earliest", "largest": "latest", "end": "latest"}.get(reset, reset)
        if reset not in ("earliest", "latest", "none"):
            raise ValueError(f"invalid auto.offset.reset {reset!r}")
        self.subs = SubscriptionState(reset)
        self.client = KafkaClient(cfg)
        self.fetcher: Fetcher | None = None
        self.coordinator: GroupMembership | None = None
        self.assignors = resolve_assignors(cfg["partition.assignment.strategy"])
        #: How listener callbacks are run (the sync face swaps in "on the application thread").
        self.listener_runner: ListenerRunner = _run_listener
        self._closed = False
        self._started = False
        self._pending_commits: set[asyncio.Task] = set()

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self.fetcher = Fetcher(self.client, self.subs, self.config)
        # Import the codecs polling needs now (generated modules load on first use), not in a poll.
        for key in (ApiKey.FETCH, ApiKey.LIST_OFFSETS):
            SPECS[key].response  # noqa: B018
        if self.config["group.id"]:
            self.coordinator = self._new_membership()
        await self.client.refresh_metadata([])
        self._started = True

    async def close(self, autocommit: bool = True) -> None:
        """Commit (if auto-commit), revoke, leave the group (dynamic members), disconnect."""
        if self._closed:
            return
        self._closed = True
        if self._pending_commits:
            await asyncio.gather(*self._pending_commits, return_exceptions=True)
        if self.coordinator is not None:
            if not autocommit:
                self.config["enable.auto.commit"] = False
            await self.coordinator.close()
        if self.fetcher is not None:
            await self.fetcher.close()
        await self.client.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("consumer is closed")

    # -- subscription ----------------------------------------------------------------

    def subscribe(self, topics: list[str] | None = None, pattern: str | re.Pattern[str] | None = None,
                  listener: Any = None) -> None:
        """Join the group for ``topics`` or every topic matching ``pattern`` (a regex)."""
        self._check_open()
        if not self.config["group.id"]:
            raise IllegalStateError("subscribe() needs group.id; use assign() without a group")
        if (topics is None) == (pattern is None):
            raise ValueError("give exactly one of topics or pattern")
        if pattern is not None:
            self.subs.subscribe_pattern(pattern, listener)
            self.client.all_topics_metadata = True
            self.subs.needs_rejoin_for_subscription = True
        else:
            if isinstance(topics, str):
                topics = [topics]
            changed = self.subs.subscribe(list(topics or []), listener)
            self.client.add_topics(self.subs.topics)
            if changed:
                self.subs.needs_rejoin_for_subscription = True

    def subscription(self) -> set[str]:
        return set(self.subs.topics)

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Take these partitions, without group management."""
        self._check_open()
        tps = _tps(partitions)
        self.subs.assign_from_user(tps)
        self.client.add_topics({tp.topic for tp in tps})

    def assignment(self) -> set[TopicPartition]:
        return set(self.subs.assigned())

    async def unsubscribe(self) -> None:
        if self.coordinator is not None and self.subs.has_auto_assignment:
            await self.coordinator.close()
            self.coordinator = self._new_membership()
        self.subs.unsubscribe()
        if self.fetcher is not None:
            self.fetcher.buffer.clear()

    async def _invoke_listener(self, method: str, partitions: list[TopicPartition]) -> None:
        listener = self.subs.listener
        if listener is None:
            return
        fn = getattr(listener, method, None)
        if fn is None and method == "on_partitions_lost":
            fn = getattr(listener, "on_partitions_revoked", None)
        if fn is None:
            return
        try:
            await self.listener_runner(fn, list(partitions))
        except Exception:  # noqa: BLE001 - Java logs listener failures and goes on
            log.exception("rebalance listener %s failed", method)

    # -- poll --------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[TopicPartition, RecordList]:
        """Records from the fetch buffer (then new fetches), at most ``max.poll.records``.

        Each partition's records come as a :class:`RecordList`: a list of ConsumerRecord in
        every way but its type, whose records are decoded when first looked at."""
        self._check_open()
        await self.start()
        assert self.fetcher is not None
        if self.subs.kind == SubscriptionState.NONE:
            raise IllegalStateError("consumer is not subscribed to any topics or assigned any partitions")
        limit = max_records or self.config["max.poll.records"]
        deadline = now_ms() + max(timeout_ms, 0)
        fetcher = self.fetcher
        while True:
            if fetcher.errors:
                raise fetcher.errors.pop(0)
            if self.coordinator is not None:
                await self.coordinator.poll(max(0, deadline - now_ms()))
            await self._maybe_refresh_metadata()
            await self._update_positions()
            records = fetcher.buffer.collect(self.subs, limit)
            # Prefetch: fetch again for every partition whose buffered data is used up.
            fetcher.send_fetches()
            if records:
                return records
            remaining = deadline - now_ms()
            if remaining <= 0:
                return {}
            wait = min(remaining, 100 if self._group_busy() else remaining)
            await wait_event(fetcher.buffer.wakeup, wait / 1000)
            fetcher.buffer.wakeup.clear()

    def _new_membership(self) -> GroupMembership:
        """The group member ``group.protocol`` asks for (classic or KIP-848's consumer protocol)."""
        member = make_membership(self.client, self.subs, self.config, self.assignors, self._invoke_listener)
        member.wakeup = self._wake_poll
        return member

    def _wake_poll(self) -> None:
        if self.fetcher is not None:
            self.fetcher.buffer.wakeup.set()

    def _group_busy(self) -> bool:
        c = self.coordinator
        return c is not None and c.busy()

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        return {t: len(self.client.cluster.partitions_for(t) or []) for t in topics}

    async def _maybe_refresh_metadata(self) -> None:
        assert self.fetcher is not None
        stale = now_ms() - self.client.cluster.last_refresh_ms > self.config["metadata.max.age.ms"]
        if not (self.fetcher.needs_metadata or stale):
            return
        self.fetcher.needs_metadata = False
        try:
            await self.client.refresh_metadata()
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            log.debug("metadata refresh failed: %r", e)
            return
        self._check_subscription_changes()

    def _check_subscription_changes(self) -> None:
        if self.subs.kind == SubscriptionState.AUTO_PATTERN:
            names = [t for t, i in self.client.cluster.topics.items()
                     if not (i.is_internal and self.config["exclude.internal.topics"])]
            if self.subs.match_pattern(names):
                self.subs.needs_rejoin_for_subscription = True
        if self.coordinator is not None:
            self.coordinator.on_metadata_update(self._partition_counts)

    async def _update_positions(self) -> None:
        assert self.fetcher is not None
        for tp in self.fetcher.reset_requests:
            if self.subs.is_assigned(tp):
                self.subs.request_reset(tp)
        self.fetcher.reset_requests.clear()
        missing = self.subs.missing_positions()
        if missing:
            committed: dict[TopicPartition, OffsetAndMetadata | None] = {}
            if self.coordinator is not None:
                committed = await self.coordinator.fetch_committed(missing)
            undefined = []
            for tp in missing:
                om = committed.get(tp)
                if not self.subs.is_assigned(tp):
                    continue
                if om is not None:
                    self.subs.seek(tp, om.offset)
                elif self.subs.default_reset == "none":
                    # As Java: stay "initializing", so the next poll looks for a committed offset again.
                    undefined.append(tp)
                else:
                    self.subs.request_reset(tp)
            if undefined:
                raise NoOffsetForPartitionError(undefined)
        awaiting = self.subs.awaiting_reset()
        if awaiting:
            no_policy = [tp for tp in awaiting if self.subs.state(tp).reset_strategy == "none"]
            if no_policy:
                raise NoOffsetForPartitionError(no_policy)
            wanted = {tp: EARLIEST if self.subs.state(tp).reset_strategy == "earliest" else LATEST for tp in awaiting}
            offsets = await self._list_offsets(wanted)
            for tp, (off, _ts) in offsets.items():
                if self.subs.is_assigned(tp) and self.subs.state(tp).position is None:
                    self.subs.seek(tp, off)

    async def _list_offsets(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets for each partition's timestamp (-2 earliest, -1 latest)."""
        await self.start()
        return await list_offsets(self.client, wanted, self.config,
                                  isolation=1 if self.config["isolation.level"] == "read_committed" else 0)

    # -- offsets -----------------------------------------------------------------------

    def _require_group(self) -> GroupMembership:
        if self.coordinator is None:
            raise IllegalStateError("offset commits need group.id")
        return self.coordinator

    async def commit_sync(self, offsets: dict[TopicPartition, OffsetAndMetadata | int] | None = None,
                          timeout_ms: int | None = None) -> None:
        """Commit ``offsets`` (default: the current positions) and wait for the result."""
        self._check_open()
        await self.start()
        coord = self._require_group()
        if offsets is None:
            offsets = dict(self.subs.consumed_offsets())
        norm = {TopicPartition(tp[0], tp[1]): (om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(om))
                for tp, om in offsets.items()}
        await coord.commit(norm, timeout_ms)

    def commit_async(self, offsets: dict[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: Callable[[dict, BaseException | None], None] | None = None) -> asyncio.Task:
        """Start a commit; ``callback(offsets, error)`` runs when it completes."""
        self._check_open()
        if offsets is None:
            offsets = dict(self.subs.consumed_offsets())
        task = asyncio.get_running_loop().create_task(self.commit_sync(offsets))
        self._pending_commits.add(task)

        def done(t: asyncio.Task) -> None:
            self._pending_commits.discard(t)
            err = None if t.cancelled() else t.exception()
            if callback is not None:
                callback(offsets, err)
            elif err is not None:
                log.warning("commit_async failed: %r", err)

        task.add_done_callback(done)
        return task

    async def committed(self, partitions: list[TopicPartition], timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        self._check_open()
        await self.start()
        return await self._require_group().fetch_committed(_tps(partitions), timeout_ms)

    async def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        """The offset of the next record to fetch for ``tp`` (resolving it if needed)."""
        self._check_open()
        await self.start()
        tp = TopicPartition(tp[0], tp[1])
        st = self.subs.state(tp)
        if st.position is None:
            await self._update_positions()
        pos = self.subs.state(tp).position
        assert pos is not None
        return pos

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.subs.seek(TopicPartition(tp[0], tp[1]), offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in _tps(partitions) or self.subs.assigned():
            self.subs.request_reset(tp, "earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in _tps(partitions) or self.subs.assigned():
            self.subs.request_reset(tp, "latest")

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in _tps(partitions):
            self.subs.state(tp).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in _tps(partitions):
            self.subs.state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self.subs.assignment.items() if st.paused}

    async def beginning_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        res = await self._list_offsets({tp: EARLIEST for tp in _tps(partitions)})
        return {tp: off for tp, (off, _ts) in res.items()}

    async def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        res = await self._list_offsets({tp: LATEST for tp in _tps(partitions)})
        return {tp: off for tp, (off, _ts) in res.items()}

    async def offsets_for_times(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int] | None]:
        res = await self._list_offsets({TopicPartition(tp[0], tp[1]): ts for tp, ts in timestamps.items()})
        return {tp: (v if v[0] >= 0 else None) for tp, v in res.items()}

    async def topics(self) -> dict[str, list[int]]:
        """Every topic and its partitions."""
        await self.start()
        saved = self.client.all_topics_metadata
        self.client.all_topics_metadata = True
        try:
            await self.client.refresh_metadata()
        finally:
            self.client.all_topics_metadata = saved
        return {t: sorted(i.leaders) for t, i in self.client.cluster.topics.items() if not i.error_code}

    @property
    def group_generation(self) -> tuple[int, str]:
        c = self.coordinator
        return c.group_generation if c is not None else (-1, "")

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group, generation and ids, for ``send_offsets_to_transaction`` (KIP-447)."""
        gen, member = self.group_generation
        return ConsumerGroupMetadata(self.config["group.id"] or "", gen, member, self.config["group.instance.id"])


async def _run_listener(fn: Callable[[list[TopicPartition]], Any], partitions: list[TopicPartition]) -> None:
    res = fn(partitions)
    if inspect.isawaitable(res):
        await res


async def list_offsets(client: KafkaClient, wanted: dict[TopicPartition, int], config: dict[str, Any], *,
                       isolation: int = 0, timeout_ms: int | None = None) -> dict[TopicPartition, tuple[int, int]]:
    """ListOffsets to each partition's leader; retries retriable errors until the deadline."""
    cls = request_class(ApiKey.LIST_OFFSETS)
    deadline = now_ms() + (timeout_ms if timeout_ms is not None else config.get("default.api.timeout.ms", 60000))
    result: dict[TopicPartition, tuple[int, int]] = {}
    todo = dict(wanted)
    client.add_topics({tp.topic for tp in todo})
    while todo:
        by_node: dict[int, dict[TopicPartition, int]] = {}
        missing = False
        for tp, ts in todo.items():
            leader = client.cluster.leader_for(tp.topic, tp.partition)
            if leader < 0:
                missing = True
            else:
                by_node.setdefault(leader, {})[tp] = ts
        if missing:
            await client.refresh_metadata()
        for node, tps in by_node.items():
            topics = by_topic((tp, cls.ListOffsetsPartition(partition_index=tp.partition, timestamp=ts,
                                                            max_num_offsets=1)) for tp, ts in tps.items())
            req = cls(replica_id=-1, isolation_level=isolation,
                      topics=[cls.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()])
            try:
                conn = await client.conn(node)
                resp = await conn.send(req)
            except (KafkaConnectionError, KafkaTimeoutError, OSError):
                continue
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code == 0:
                        off = p.offset
                        if conn.version_for(ApiKey.LIST_OFFSETS) == 0:
                            off = p.old_style_offsets[0] if p.old_style_offsets else -1
                        result[tp] = (off, p.timestamp)
                        todo.pop(tp, None)
                    elif not is_retriable(p.error_code) and p.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        raise error_for(p.error_code, f"ListOffsets {tp}")
        if todo:
            if now_ms() >= deadline:
                raise KafkaTimeoutError(f"ListOffsets timed out for {sorted(todo)}")
            await client.refresh_metadata()
            await asyncio.sleep(config["retry.backoff.ms"] / 1000)
    return result
