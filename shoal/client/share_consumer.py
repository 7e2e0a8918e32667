"""The asyncio share consumer (KIP-932), as Kafka's Java ``KafkaShareConsumer`` behaves.

Members of a share group fetch from the same partitions; the leader of each partition hands out
records (acquires them for this member, with a delivery count and a time lock) and the member
acknowledges each one: ACCEPT, RELEASE (deliver again), REJECT (never again), or RENEW (v2: keep
the lock). With ``share.acknowledgement.mode=implicit`` (the default) every record a poll
returned is accepted by the next poll, ``commit_sync``/``commit_async`` or ``close``; with
``explicit`` the application acknowledges each record and a poll refuses to go on while a record
of the previous poll is unacknowledged.

Acknowledgements travel on the next ShareFetch to the partition's leader when one goes out (as
Java piggybacks them); otherwise, and always for commits, in a ShareAcknowledge. Acquired
offsets that hold no record (compacted, transaction markers) are acknowledged as GAP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.waits import wait_event, within

from .cluster import AsyncCore, now_ms
from .config import COMMON_DEFAULTS, CONSUMER_DEFAULTS, make_config
from .errors import ClosedError, IllegalStateError, KafkaConnectionError, KafkaError, KafkaTimeoutError
from .share_member import ShareMember
from .share_requests import RENEW_VERSION, AckCallback, AckResults, ShareRequests
from .share_session import AcknowledgeType, ShareConsumerRecord
from .structs import TopicPartition
from .subscription import SubscriptionState

log = logging.getLogger(__name__)

SHARE_CONSUMER_DEFAULTS: dict[str, Any] = {
    **COMMON_DEFAULTS,
    **{k: CONSUMER_DEFAULTS[k] for k in ("group.id", "max.poll.records", "fetch.min.bytes", "fetch.max.bytes",
                                         "fetch.max.wait.ms", "max.partition.fetch.bytes",
                                         "default.api.timeout.ms")},
    # "implicit": a poll accepts what the previous poll returned; "explicit": acknowledge() each record.
    "share.acknowledgement.mode": "implicit",
}
__all__ = ["AIOShareConsumer", "AckCallback", "AckResults", "SHARE_CONSUMER_DEFAULTS"]


class AIOShareConsumer(ShareRequests, AsyncCore):
    """Asyncio share-group consumer: ``subscribe``, ``poll``, ``acknowledge``, ``commit_sync``, ``close``."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        cfg = make_config(SHARE_CONSUMER_DEFAULTS, config, **kwargs)
        if not cfg["group.id"]:
            raise ValueError("a share consumer needs group.id")
        mode = str(cfg["share.acknowledgement.mode"]).strip().lower()
        if mode not in ("implicit", "explicit"):
            raise ValueError(f"invalid share.acknowledgement.mode {mode!r}: use 'implicit' or 'explicit'")
        cfg["share.acknowledgement.mode"] = mode
        super().__init__(cfg)
        self.explicit = mode == "explicit"
        self.subs = SubscriptionState("latest")
        self._batch: dict[tuple[TopicPartition, int], ShareConsumerRecord] = {}  # returned, unacknowledged
        self._last_metadata_ms = 0
        self._started = self._closed = False

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (bootstrap metadata); ``poll`` starts on its own if this was not called."""
        if self._started:
            return
        self._wakeup = asyncio.Event()
        self.member = ShareMember(self.client, self.subs, self.config)
        self.member.wakeup = self.member.on_assignment = self._wake
        await self.client.refresh_metadata([])
        self._started = True

    async def close(self, timeout_ms: int | None = None) -> None:
        """Acknowledge what is pending (implicit mode: the last poll's records as accepted), close
        every share session (the broker releases the records still held), leave the group."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._started:
                await self._leave(timeout_ms)
        finally:
            await self.client.close()

    async def _leave(self, timeout_ms: int | None) -> None:
        assert self.member is not None
        self._settle_batch()
        self._release_buffer()
        # Let fetches in flight finish (bounded by fetch.max.wait.ms): their records are then ours to
        # release, and the final request must follow them on the session.
        budget = timeout_ms if timeout_ms is not None else self.config["default.api.timeout.ms"]
        waiting = list(self._fetches.values()) + list(self._ack_tasks)
        if waiting:
            _done, late = await asyncio.wait(waiting, timeout=min(budget, self._fetch_timeout_ms()) / 1000)
            for t in late:
                t.cancel()
        self._release_buffer()
        acks, self._pending = self._pending, {}
        by_node = self._by_leader(acks)
        finals = [self._send_acks(node, by_node.pop(node, {}), final=True)
                  for node, s in self._sessions.items() if s.open]
        for node, node_acks in by_node.items():  # no session to carry them: the broker released them
            self._fail_acks(node_acks, KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND,
                                                  f"no share session with {node}"))
        if finals:
            with contextlib.suppress(asyncio.TimeoutError):
                await within(asyncio.gather(*finals, return_exceptions=True), budget / 1000)
        self._sessions.clear()
        await self.member.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("share consumer is closed")

    # -- subscription --------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group for ``topics`` (the heartbeat of the next poll says so); an empty
        list unsubscribes on the next poll."""
        self._check_open()
        names = [topics] if isinstance(topics, str) else list(topics)
        if self.subs.kind == SubscriptionState.NONE:
            self.subs.kind = SubscriptionState.AUTO_TOPICS
        self.subs.topics = set(names)
        self.client.add_topics(self.subs.topics)

    def subscription(self) -> set[str]:
        return set(self.subs.topics)

    async def unsubscribe(self) -> None:
        """Acknowledge what is pending, close the share sessions and leave the group."""
        self._check_open()
        if self._started:
            await self._leave(None)
            self.member = ShareMember(self.client, self.subs, self.config)
            self.member.wakeup = self.member.on_assignment = self._wake
        self.subs.kind, self.subs.topics = SubscriptionState.NONE, set()

    def set_acknowledgement_commit_callback(self, callback: AckCallback | None) -> None:
        """``callback(offsets by partition, error or None)`` after each acknowledgement the broker
        answered (runs on the event loop; Java's ``setAcknowledgementCommitCallback``)."""
        self._callback = callback

    # -- poll and acknowledge --------------------------------------------------------------

    async def poll(self, timeout_ms: int = 0) -> list[ShareConsumerRecord]:
        """Records acquired for this member, at most ``max.poll.records``; [] when none came in time.

        Implicit mode: the previous poll's records are accepted first. Explicit mode: raises
        IllegalStateError while a record of the previous poll is unacknowledged.
        """
        self._check_open()
        await self.start()
        assert self.member is not None and self._wakeup is not None
        if not self.subs.topics:
            raise IllegalStateError("Consumer is not subscribed to any topics.")
        if self.explicit and self._batch:
            raise IllegalStateError("All records must be acknowledged in explicit acknowledgement mode.")
        self._settle_batch()
        self.member.poll()
        deadline = now_ms() + max(timeout_ms, 0)
        while True:
            if self._errors:
                raise self._errors.pop(0)
            if self.member.fatal is not None:
                self.member.poll()  # raises it
            await self._maybe_refresh_metadata()
            records = self._collect(self.config["max.poll.records"])
            self._send_requests()
            if records:
                self._batch = {(TopicPartition(r.topic, r.partition), r.offset): r for r in records}
                return records
            remaining = deadline - now_ms()
            if remaining <= 0:
                return []
            await wait_event(self._wakeup, min(remaining, 200) / 1000)
            self._wakeup.clear()

    def acknowledge(self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:  # noqa: A002 - Java's name
        """Acknowledge one record of the last poll (explicit mode); sent with the next poll or commit."""
        self._check_open()
        if not self.explicit:
            raise IllegalStateError("Implicit acknowledgement of delivery is being used.")
        ack = AcknowledgeType(type)
        if ack == AcknowledgeType.RENEW and not self._renew_supported():
            raise IllegalStateError("RENEW needs ShareAcknowledge v2 (KIP-1222), which the brokers do not serve")
        tp = TopicPartition(record.topic, record.partition)
        key = (tp, record.offset)
        if key not in self._batch:
            raise IllegalStateError("The record cannot be acknowledged.")
        self._pending.setdefault(tp, {})[record.offset] = int(ack)
        if ack != AcknowledgeType.RENEW:  # a renewed record stays ours to acknowledge finally
            del self._batch[key]

    def _renew_supported(self) -> bool:
        conns = [s.conn for s in self._sessions.values() if s.conn is not None and not s.conn.closed]
        return all(c.version_up_to(ApiKey.SHARE_ACKNOWLEDGE, RENEW_VERSION) >= RENEW_VERSION for c in conns)

    async def commit_sync(self, timeout_ms: int | None = None) -> AckResults:
        """Send the pending acknowledgements now and wait: each partition's error, or None."""
        self._check_open()
        await self.start()
        self._settle_batch()
        acks, self._pending = self._pending, {}
        if not acks:
            return {}
        budget = timeout_ms if timeout_ms is not None else self.config["default.api.timeout.ms"]
        results: AckResults = {}
        calls = [self._send_acks(node, node_acks) for node, node_acks in self._by_leader(acks).items()]
        try:
            for got in await within(asyncio.gather(*calls), budget / 1000):
                results.update(got)
        except TimeoutError:
            raise KafkaTimeoutError(f"acknowledgements not answered within {budget} ms") from None
        return results

    def commit_async(self) -> asyncio.Task:
        """Send the pending acknowledgements without waiting; the commit callback gets the results."""
        self._check_open()
        self._settle_batch()
        acks, self._pending = self._pending, {}

        async def send() -> AckResults:
            await self.start()
            out: AckResults = {}
            for got in await asyncio.gather(*(self._send_acks(n, a) for n, a in self._by_leader(acks).items())):
                out.update(got)
            return out

        return self._spawn_ack(send())

    def _settle_batch(self) -> None:
        """Implicit mode: accept every record the last poll returned (renewed ones too, explicitly)."""
        if not self.explicit:
            for tp, off in self._batch:
                self._pending.setdefault(tp, {})[off] = int(AcknowledgeType.ACCEPT)
            self._batch = {}

    def _release_buffer(self) -> None:
        """Give back what was acquired but never returned to the application."""
        while self._buffer:
            r = self._buffer.popleft()
            self._pending.setdefault(TopicPartition(r.topic, r.partition), {})[r.offset] = int(AcknowledgeType.RELEASE)

    def _collect(self, limit: int) -> list[ShareConsumerRecord]:
        assigned = self._assigned()
        out: list[ShareConsumerRecord] = []
        while self._buffer and len(out) < limit:
            r = self._buffer.popleft()
            tp = TopicPartition(r.topic, r.partition)
            if tp in assigned:
                out.append(r)
            else:  # the partition went to other members only: its records go back now, not at lock expiry
                self._pending.setdefault(tp, {})[r.offset] = int(AcknowledgeType.RELEASE)
        return out

    # -- assignment and leaders ----------------------------------------------------------

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group assigned this member (shared with other members)."""
        return set(self._assigned())

    async def _maybe_refresh_metadata(self) -> None:
        if not self._needs_metadata or now_ms() - self._last_metadata_ms < self.config["retry.backoff.ms"]:
            return
        self._needs_metadata = False
        self._last_metadata_ms = now_ms()
        try:
            await self.client.refresh_metadata()
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
            log.debug("metadata refresh failed: %r", e)
