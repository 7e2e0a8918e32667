"""shoal's clocks, in one place: the lowest layer, so storage, coordinators, broker, client and
tools all take time from here (and a simulation can replace it in one place).

`now_ms` is wall-clock time (record timestamps, retention, transaction and group timeouts that
are stored); `monotonic_ms` never goes back, for deadlines and back-offs within one process.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Milliseconds of a clock that never goes back (only differences mean anything)."""
    return time.monotonic_ns() // 1_000_000
