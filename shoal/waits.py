"""Bounded waits that never drop a cancel.

On Python 3.11, ``asyncio.wait_for`` returns the awaited result when the waiting task is
cancelled in the same loop step as that result arrives, and the cancel is lost. A loop that
waits that way goes on after ``cancel()``, and whoever awaits the cancelled task waits with it:
the simulator found a reader reading on forever after its run ended (swarm seed 247245), and
the share-lock timer of a closing broker can outlive ``close()`` the same way. ``asyncio.timeout``
(3.11+) keeps a cancel that races the result, so these waits use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set, at most ``timeout`` seconds (None: no limit); whether it was set."""
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True


async def within(awaitable: Awaitable[T], timeout: float | None) -> T:
    """``await awaitable``, raising `TimeoutError` after ``timeout`` seconds (None: no limit)."""
    async with asyncio.timeout(timeout):
        return await awaitable
