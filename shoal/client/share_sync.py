"""The synchronous share consumer: :class:`AIOShareConsumer` on a private event loop in a background thread."""

from __future__ import annotations

import concurrent.futures
from typing import Any

from .share_consumer import AckResults, AIOShareConsumer
from .sync import _blocking, _delegate, _on_loop, _SyncFace


class ShareConsumer(_SyncFace):
    """Synchronous share-group consumer (Java's ``KafkaShareConsumer``); see :class:`AIOShareConsumer`.

    The acknowledgement commit callback runs on the consumer's I/O thread.
    """

    _core: AIOShareConsumer

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(AIOShareConsumer(config, **kwargs), "shoal-share-consumer")
        self._start()

    subscribe = _on_loop(AIOShareConsumer.subscribe)
    subscription = _delegate(AIOShareConsumer.subscription)
    assignment = _on_loop(AIOShareConsumer.assignment)
    unsubscribe = _blocking(AIOShareConsumer.unsubscribe)
    poll = _blocking(AIOShareConsumer.poll)
    acknowledge = _on_loop(AIOShareConsumer.acknowledge)
    commit_sync = _blocking(AIOShareConsumer.commit_sync)

    def commit_async(self) -> concurrent.futures.Future[AckResults]:
        """Send the pending acknowledgements; the future (and the commit callback) get the results."""
        return self._task_future(self._core.commit_async)

    set_acknowledgement_commit_callback = _delegate(AIOShareConsumer.set_acknowledgement_commit_callback)

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        return self._core.acquisition_lock_timeout_ms

    def close(self, timeout_ms: int | None = None) -> None:
        """Acknowledge what is pending, close the share sessions, leave the group."""
        self._shutdown(lambda: self._core.close(timeout_ms))
