"""Deterministic keyed timers: schedule/cancel by key, fire by a passed-in clock.

Deadlines are given and fired on the wall clock the shards work in, but kept on the monotonic
clock: the runtime anchors the two before every step (`anchor`), so a timer set for "now + 45 s"
fires 45 s of monotonic time later whatever the wall clock does meanwhile. A wall clock stepped
forward (NTP, a resumed VM) then does not expire every session at once, as Kafka's timers do not.
Never anchored (a shard driven by a test), the two clocks are one.
"""

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
        self._offset = 0  # wall-clock ms minus monotonic ms, as of the last anchor

    def anchor(self, now_ms: int, monotonic_ms: int) -> None:
        """The wall clock reads `now_ms` when the monotonic clock reads `monotonic_ms` (this step)."""
        self._offset = now_ms - monotonic_ms

    def schedule(self, key: Any, deadline_ms: int, callback: TimerCallback) -> None:
        """Fire `callback(now_ms)` once the step's wall-clock `deadline_ms` has passed in monotonic time."""
        self._seq += 1
        deadline = deadline_ms - self._offset
        self._live[key] = (deadline, self._seq, callback)
        heapq.heappush(self._heap, (deadline, self._seq, key))

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
        """The earliest deadline, on the monotonic clock."""
        self._prune()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> tuple[Any, TimerCallback] | None:
        """Remove and return the earliest timer due at the step's wall-clock `now_ms`, if any."""
        self._prune()
        if not self._heap or self._heap[0][0] > now_ms - self._offset:
            return None
        _, _, key = heapq.heappop(self._heap)
        _, _, callback = self._live.pop(key)
        return key, callback

    def clear(self) -> None:
        self._heap.clear()
        self._live.clear()
