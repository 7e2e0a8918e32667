"""Bounded waits (shoal/waits.py): a cancel that arrives in the same loop step as what was awaited is kept.

Each race below is what Python 3.11's ``asyncio.wait_for`` loses: the awaited thing completes and the waiting
task is cancelled before either runs, and wait_for returns the result instead of raising.
"""

from __future__ import annotations

import asyncio

import pytest

from shoal.waits import wait_event, within
from tests.unit.broker_harness import run, running_broker
from tests.unit.test_share_fetch import Member, acquired, setup


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_wait_event_answers_whether_the_event_was_set():
    async def go():
        ev = asyncio.Event()
        assert await wait_event(ev, 0.01) is False
        asyncio.get_running_loop().call_later(0.01, ev.set)
        assert await wait_event(ev, 5) is True
        assert await wait_event(ev, 0) is True  # already set: no wait at all
        assert await wait_event(ev, None) is True

    run(go())


def test_within_returns_the_result_or_times_out():
    async def go():
        fut = asyncio.get_running_loop().create_future()
        with pytest.raises(TimeoutError):
            await within(fut, 0.01)
        assert fut.cancelled()
        assert await within(asyncio.sleep(0, "x"), 1) == "x"
        assert await within(asyncio.sleep(0, "y"), None) == "y"

    run(go())


def test_a_cancel_that_races_the_event_is_kept():
    async def go():
        ev = asyncio.Event()
        seen = []

        async def waiter():
            while True:  # a timer loop: only a cancel ends it
                seen.append(await wait_event(ev, 5))
                ev.clear()

        task = asyncio.get_running_loop().create_task(waiter())
        await _settle()
        ev.set()
        task.cancel()  # in the same step as the set
        await _settle()
        assert task.cancelled() and seen == []

    run(go())


def test_a_cancel_that_races_the_result_is_kept():
    async def go():
        fut = asyncio.get_running_loop().create_future()
        task = asyncio.get_running_loop().create_task(within(fut, 5))
        await _settle()
        fut.set_result("answer")
        task.cancel()
        await _settle()
        assert task.cancelled()

    run(go())


def test_the_share_lock_timer_ends_when_the_broker_closes_as_a_lock_is_taken(tmp_path):
    # close() cancels the share-lock timer and awaits it: with the cancel lost, the timer looped on and
    # close() waited for it
    async def go():
        async with running_broker(tmp_path) as broker:
            c, tid = await setup(broker, records=2)
            assert acquired(await Member(c, "sg", tid).fetch(max_records=1)) == [(0, 0, 1)]  # its lock runs 30 s
            share = broker.share
            await _settle()
            timer = share._timer
            assert timer is not None and not timer.done()
            share._wake.set()  # as an acquisition does
            timer.cancel()
            await asyncio.wait([timer], timeout=2)
            assert timer.cancelled()
            await c.close()

    run(go())
