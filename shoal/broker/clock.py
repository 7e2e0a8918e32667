"""The broker's wall clock, in one place so cores can take time as an argument."""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000
