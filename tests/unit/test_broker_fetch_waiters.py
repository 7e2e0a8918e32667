"""FetchWaiters: a waiting fetch wakes on an append to one of its partitions or its topic's deletion."""

from __future__ import annotations

import asyncio

from shoal.broker.apis import ApiRegistry
from shoal.broker.fetch_waiters import FetchWaiters
from shoal.coordinator.group.responses import GROUP_API_KEYS
from tests.unit.broker_harness import run


def test_wakes_on_notify_and_topic_deletion_and_forgets_its_waiters():
    async def main():
        waiters = FetchWaiters()
        loop = asyncio.get_running_loop()
        for wake in (lambda: waiters.notify("t", 1), lambda: waiters.cancel_topic("t")):
            t0 = loop.time()
            pending = asyncio.ensure_future(waiters.wait([("t", 0), ("t", 1)], 20))
            await asyncio.sleep(0.05)
            waiters.notify("t", 5)  # another partition: still waiting
            waiters.notify("u", 0)
            await asyncio.sleep(0.05)
            assert not pending.done()
            wake()
            await asyncio.wait_for(pending, 5)
            assert loop.time() - t0 < 5
            assert not waiters._waiting  # nothing left behind
        t0 = loop.time()
        await waiters.wait([], 0.1)  # nothing to wait for: the whole timeout
        assert loop.time() - t0 >= 0.09
    run(main())


def test_fetches_waiting_on_one_partition_wake_in_the_order_they_began_waiting():
    # a set of futures woke them in address order, which differs from process to process: the same
    # simulator seed then ran differently (share group members waiting on one partition)
    async def main():
        waiters = FetchWaiters()
        woke: list[int] = []

        async def fetch(i: int) -> None:
            await waiters.wait([("t", 0)], 20)
            woke.append(i)

        tasks = [asyncio.ensure_future(fetch(i)) for i in range(40)]
        await asyncio.sleep(0.05)
        waiters.notify("t", 0)
        await asyncio.gather(*tasks)
        assert woke == list(range(40))
    run(main())


def test_every_group_api_has_a_handler():
    apis = ApiRegistry.default()
    assert all(apis.get(k) is not None for k in GROUP_API_KEYS)
