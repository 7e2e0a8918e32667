"""A wall clock stepped forward (NTP, a VM resumed) expires no group session and no record lock.

Kafka's coordinators time sessions and rebalances, and its share partitions their record locks, with
monotonic timers; so do shoal's. The broker runs in this process (``shoal.testing.broker()``) with
``shoal.clock``'s wall clock moved 10 minutes ahead: confluent-kafka consumers of a classic and of a
KIP-848 group stay in their groups (with timers on the wall clock every session expired at the step
and both groups rebalanced), and records a share consumer holds stay its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from shoal import clock
from shoal.client import AcknowledgeType, AIOShareConsumer
from shoal.testing import broker
from tests.interop.test_client_share_consumer import set_group_config

pytestmark = pytest.mark.timeout(120)

STEP_MS = 600_000


@pytest.fixture
def wall_step() -> Iterator[list[int]]:
    """``step[0] += ms`` moves shoal's wall clock (not its monotonic one) by ``ms``."""
    step = [0]
    clock.set_source(lambda: time.time_ns() + step[0] * 1_000_000, time.monotonic_ns)
    try:
        yield step
    finally:
        clock.reset_source()


def _consumer(bootstrap: str, group: str, protocol: str, events: list[str]) -> Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "group.protocol": protocol}
    if protocol == "classic":
        conf.update({"session.timeout.ms": 10_000, "heartbeat.interval.ms": 500})
    c = Consumer(conf)
    c.subscribe(["steps"], on_assign=lambda _c, ps: events.append(f"assign {len(ps)}"),
                on_revoke=lambda _c, ps: events.append(f"revoke {len(ps)}"))
    return c


def _poll_until(consumers: list[Consumer], done: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not done():  # type: ignore[operator]
        for c in consumers:
            c.poll(0.1)


def test_a_wall_clock_step_expires_no_session(wall_step: list[int]) -> None:
    with broker(num_partitions=4, group_initial_rebalance_delay_ms=0) as b:
        bs = b.bootstrap_servers
        p = Producer({"bootstrap.servers": bs})
        for i in range(40):
            p.produce("steps", b"v%d" % i, partition=i % 4)
        assert p.flush(20) == 0
        # Two members in each group: the first heartbeat after the step re-arms its own member's
        # session; on the wall clock, the other's had ended 10 minutes before.
        events: dict[str, list[str]] = {name: [] for name in ("classic-a", "classic-b", "modern-a", "modern-b")}
        consumers = {name: _consumer(bs, f"{name[:-2]}-steps", "consumer" if name.startswith("modern") else "classic",
                                     events[name]) for name in events}
        try:
            def settled() -> bool:
                return all(sum(int(e.split()[1]) for e in events[n] if e.startswith("assign"))
                           - sum(int(e.split()[1]) for e in events[n] if e.startswith("revoke")) == 2
                           for n in events) and all(events.values())

            _poll_until(list(consumers.values()), settled, 60)
            assert settled(), events
            _poll_until(list(consumers.values()), lambda: False, 1.0)
            before = {n: list(e) for n, e in events.items()}
            wall_step[0] += STEP_MS
            # Several heartbeats of each member (0.5 s apart).
            _poll_until(list(consumers.values()), lambda: False, 4.0)
            assert events == before, f"a group rebalanced after the wall clock stepped: {before} -> {events}"
            # The groups still work: records produced after the step reach each group.
            for i in range(4):
                p.produce("steps", b"after", partition=i)
            assert p.flush(20) == 0
            seen: dict[str, int] = {"classic": 0, "modern": 0}
            deadline = time.monotonic() + 30
            while sum(seen.values()) < 8 and time.monotonic() < deadline:
                for name, c in consumers.items():
                    m = c.poll(0.05)
                    if m is not None and not m.error() and m.value() == b"after":
                        seen[name[:-2]] += 1
            assert seen == {"classic": 4, "modern": 4}, seen
        finally:
            for c in consumers.values():
                c.close()


def test_a_wall_clock_step_expires_no_record_lock(wall_step: list[int]) -> None:
    with broker(num_partitions=1) as b:
        bs = b.bootstrap_servers
        p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
        for i in range(10):
            p.produce("locks", b"%d" % i)
            p.flush(20)  # a batch each: a share fetch hands out whole batches
        asyncio.run(set_group_config(bs, "lock-steps", "share.auto.offset.reset", "earliest"))

        async def run() -> None:
            conf = {"bootstrap.servers": bs, "group.id": "lock-steps", "fetch.max.wait.ms": 100,
                    "share.acknowledgement.mode": "explicit", "max.poll.records": 4}
            async with AIOShareConsumer({**conf, "client.id": "a"}) as a, \
                    AIOShareConsumer({**conf, "client.id": "b"}) as b_:
                a.subscribe(["locks"])
                held: list = []
                deadline = time.monotonic() + 30
                while not held:
                    assert time.monotonic() < deadline, "a got no records"
                    held = await a.poll(200)
                mine = {r.offset for r in held}
                wall_step[0] += STEP_MS  # a's locks (30 s) ended 9.5 minutes ago, on the wall clock
                for i in range(10, 15):  # records a cannot hold: b will acquire these at least
                    p.produce("locks", b"%d" % i)
                    p.flush(20)
                # b's acquisitions wake the broker's lock timer; a's records must not come to b:
                # their locks have 30 s of monotonic time to run.
                b_.subscribe(["locks"])
                got: list = []
                end = time.monotonic() + 3.0
                while time.monotonic() < end:
                    recs = await b_.poll(200)
                    got += recs
                    for r in recs:
                        b_.acknowledge(r)
                assert not mine & {r.offset for r in got}, f"a's records {sorted(mine)} went to b: {got}"
                # (a may hold more than it was handed: its fetch acquired whole batches)
                assert {r.offset for r in got} >= set(range(10, 15)), got
                assert {r.delivery_count for r in got} == {1}, got
                for r in held:
                    a.acknowledge(r, AcknowledgeType.ACCEPT)
                results = await a.commit_sync()
                assert results and all(e is None for e in results.values()), results

        asyncio.run(run())
