"""shoal's clocks, in one place: the lowest layer, so storage, coordinators, broker, client and
tools all take time from here (and a simulation can replace it in one place).

`now_ms` is wall-clock time (record timestamps, retention, transaction and group timeouts that
are stored); `monotonic_ms` never goes back, for deadlines and back-offs within one process.

The seam: both read a module-level source (by default `time.time_ns` and `time.monotonic_ns`
themselves, so the default costs what it did before). `set_source` swaps in other callables, e.g.
the simulator's virtual clock (`shoal.sim`); `reset_source` puts the real clocks back. Every
module imports `now_ms`/`monotonic_ms` by name, so the swap has to happen here, behind them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# Read at every call (a module global lookup, no slower than `time.time_ns`'s attribute lookup).
_wall_ns: Callable[[], int] = time.time_ns
_monotonic_ns: Callable[[], int] = time.monotonic_ns


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return _wall_ns() // 1_000_000


def monotonic_ms() -> int:
    """Milliseconds of a clock that never goes back (only differences mean anything)."""
    return _monotonic_ns() // 1_000_000


def set_source(wall_ns: Callable[[], int], monotonic_ns: Callable[[], int]) -> None:
    """Make `now_ms` and `monotonic_ms` read these nanosecond clocks (a simulator's virtual time).

    Process-wide: only for a process (or a test) that runs nothing on the real clock meanwhile.
    """
    global _wall_ns, _monotonic_ns
    _wall_ns, _monotonic_ns = wall_ns, monotonic_ns


def reset_source() -> None:
    """Back to the real clocks."""
    set_source(time.time_ns, time.monotonic_ns)


def source_is_real() -> bool:
    """True while the real clocks are installed."""
    return _wall_ns is time.time_ns and _monotonic_ns is time.monotonic_ns
