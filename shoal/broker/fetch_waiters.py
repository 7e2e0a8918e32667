"""Long-polling fetches waiting for data: woken by an append to one of their partitions.

A Fetch that found less than its `min_bytes` waits here (up to its `max_wait_ms`) for
any append to one of the partitions it reads, or for the deletion of their topic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

Key = tuple[str | None, int]


class FetchWaiters:
    """The waiting fetches, by (topic, partition)."""

    def __init__(self) -> None:
        # each partition's waiting fetches in arrival order (a dict, not a set: a set of futures
        # iterates by address, so the order they were woken in would differ from run to run)
        self._waiting: dict[Key, dict[asyncio.Future[None], None]] = {}

    async def wait(self, partitions: Iterable[Key], timeout_s: float) -> None:
        """Until an append to one of ``partitions`` (or their topic's deletion), ``timeout_s`` at most;
        with no partition at all, ``timeout_s`` exactly (Kafka answers after max_wait_ms)."""
        loop = asyncio.get_running_loop()
        mine: list[tuple[Key, asyncio.Future[None]]] = []
        for key in partitions:
            fut = loop.create_future()
            self._waiting.setdefault(key, {})[fut] = None
            mine.append((key, fut))
        try:
            if mine:
                await asyncio.wait([f for _, f in mine], timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
            else:
                await asyncio.sleep(timeout_s)
        finally:
            for key, fut in mine:
                pending = self._waiting.get(key)
                if pending is not None:
                    pending.pop(fut, None)
                    if not pending:
                        del self._waiting[key]
                fut.cancel()

    def notify(self, topic: str, partition: int) -> None:
        """Records were appended to ``topic``-``partition``: wake the fetches waiting for it."""
        _wake(self._waiting.pop((topic, partition), ()))

    def cancel_topic(self, topic: str) -> None:
        """``topic`` was deleted: wake every fetch waiting for one of its partitions."""
        for key in [k for k in self._waiting if k[0] == topic]:
            _wake(self._waiting.pop(key))


def _wake(futures: Iterable[asyncio.Future[None]]) -> None:
    for fut in futures:
        if not fut.done():
            fut.set_result(None)
