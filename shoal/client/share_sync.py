"""The synchronous share consumer: :class:`AIOShareConsumer` on a private event loop in a background thread."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable
from typing import Any

from .share_consumer import AckCallback, AckResults, AIOShareConsumer
from .share_session import AcknowledgeType, ShareConsumerRecord
from .structs import TopicPartition
from .sync import _as_coro, _copy_result, _LoopThread, _SyncFace


class ShareConsumer(_SyncFace):
    """Synchronous share-group consumer (Java's ``KafkaShareConsumer``); see :class:`AIOShareConsumer`.

    The acknowledgement commit callback runs on the consumer's I/O thread.
    """

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._core = AIOShareConsumer(config, **kwargs)  # validates the config before a thread starts
        self._lt = _LoopThread("shoal-share-consumer")
        self.config = self._core.config
        self._start()

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group for ``topics`` (on the next poll)."""
        self._lt.run(_as_coro(self._core.subscribe, list(topics) if not isinstance(topics, str) else [topics]))

    def subscription(self) -> set[str]:
        return self._core.subscription()

    def assignment(self) -> set[TopicPartition]:
        return self._lt.run(_as_coro(self._core.assignment))

    def unsubscribe(self) -> None:
        self._lt.run(self._core.unsubscribe())

    def poll(self, timeout_ms: int = 0) -> list[ShareConsumerRecord]:
        """Records acquired for this member, at most ``max.poll.records``; [] when none in time."""
        return self._lt.run(self._core.poll(timeout_ms))

    def acknowledge(self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:  # noqa: A002
        """Acknowledge one record of the last poll (explicit mode)."""
        self._lt.run(_as_coro(self._core.acknowledge, record, type))

    def commit_sync(self, timeout_ms: int | None = None) -> AckResults:
        """Send the pending acknowledgements and wait: each partition's error, or None."""
        return self._lt.run(self._core.commit_sync(timeout_ms))

    def commit_async(self) -> concurrent.futures.Future[AckResults]:
        """Send the pending acknowledgements; the future (and the commit callback) get the results."""
        async def start() -> Any:
            return self._core.commit_async()

        task = self._lt.run(start())
        cf: concurrent.futures.Future[AckResults] = concurrent.futures.Future()
        self._lt.loop.call_soon_threadsafe(lambda: task.add_done_callback(lambda t: _copy_result(t, cf)))
        return cf

    def set_acknowledgement_commit_callback(self, callback: AckCallback | None) -> None:
        self._core.set_acknowledgement_commit_callback(callback)

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        return self._core.acquisition_lock_timeout_ms

    def close(self, timeout_ms: int | None = None) -> None:
        """Acknowledge what is pending, close the share sessions, leave the group."""
        if self._lt.loop.is_closed():
            return
        try:
            self._lt.run(self._core.close(timeout_ms))
        finally:
            self._lt.stop()
