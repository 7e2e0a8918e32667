"""Deterministic keyed timers: schedule/cancel by key, fire by a passed-in clock."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

TimerCallback = Callable[[int], None]


class Timers:
    """Keyed one-shot timers. Re-scheduling a key replaces its previous timer."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Any]] = []
        self._live: dict[Any, tuple[int, int, TimerCallback]] = {}
        self._seq = 0

    def schedule(self, key: Any, deadline_ms: int, callback: TimerCallback) -> None:
        self._seq += 1
        self._live[key] = (deadline_ms, self._seq, callback)
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))

    def cancel(self, key: Any) -> None:
        self._live.pop(key, None)

    def __contains__(self, key: Any) -> bool:
        return key in self._live

    def _prune(self) -> None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            entry = self._live.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(heap)

    def next_deadline(self) -> int | None:
        self._prune()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> tuple[Any, TimerCallback] | None:
        """Remove and return the earliest timer due at `now_ms`, if any."""
        self._prune()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        _, _, callback = self._live.pop(key)
        return key, callback

    def clear(self) -> None:
        self._heap.clear()
        self._live.clear()
