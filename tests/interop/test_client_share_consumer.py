"""shoal's share consumer (KIP-932) against a real `shoal serve`: implicit and explicit acknowledgement.

One broker subprocess serves the module; each test uses its own topic and share group, whose
``share.auto.offset.reset`` is set to earliest (IncrementalAlterConfigs on the GROUP resource)
before its first member joins. Every wait polls with a deadline; every client is closed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shoal.client import (
    AcknowledgeType,
    AdminClient,
    AIOShareConsumer,
    IllegalStateError,
    NewTopic,
    Producer,
    ShareConsumer,
    ShareConsumerRecord,
)
from shoal.client.cluster import KafkaClient
from shoal.client.config import COMMON_DEFAULTS, make_config
from shoal.client.protocol import request_class
from shoal.protocol.generated.api_keys import ApiKey
from tests.interop.shoal_process import ShoalProcess

pytestmark = pytest.mark.timeout(90)

GROUP_RESOURCE = 32


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShoalProcess]:
    root: Path = tmp_path_factory.mktemp("shoal-share")
    proc = ShoalProcess(root / "data", 1, {"num.partitions": "1"})
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def setup_topic(broker: ShoalProcess, n: int) -> tuple[str, str]:
    """A one-partition topic holding ``n`` records (values b"0".."n-1"), and a share group reading it from the start."""
    topic, group = f"share-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        assert admin.create_topics([NewTopic(topic, 1, 1)]) == {topic: None}
    finally:
        admin.close()
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) as p:
        for i in range(n):
            p.send(topic, str(i).encode(), key=str(i).encode())
        p.flush(20)
    asyncio.run(set_group_config(broker.bootstrap, group, "share.auto.offset.reset", "earliest"))
    return topic, group


async def set_group_config(bootstrap: str, group: str, name: str, value: str) -> None:
    client = KafkaClient(make_config(COMMON_DEFAULTS, {"bootstrap.servers": bootstrap}))
    try:
        cls = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
        req = cls(resources=[cls.AlterConfigsResource(
            resource_type=GROUP_RESOURCE, resource_name=group,
            configs=[cls.AlterableConfig(name=name, config_operation=0, value=value)])], validate_only=False)
        resp = await client.send_any(req)
        assert [r.error_code for r in resp.responses] == [0], resp
    finally:
        await client.close()


def conf(broker: ShoalProcess, group: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap, "group.id": group, "fetch.max.wait.ms": 200, **extra}


async def poll_until(consumer: AIOShareConsumer, want: int, timeout: float = 20.0) -> list[ShareConsumerRecord]:
    got: list[ShareConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(got) < want:
        assert time.monotonic() < deadline, f"only {len(got)} of {want} records within {timeout}s"
        got.extend(await consumer.poll(200))
    return got


def test_two_implicit_consumers_share_one_partition(broker: ShoalProcess) -> None:
    topic, group = setup_topic(broker, 200)

    acked: list[tuple[set[int], Any]] = []

    async def run() -> tuple[list[ShareConsumerRecord], list[ShareConsumerRecord]]:
        async with AIOShareConsumer(conf(broker, group, **{"client.id": "a", "max.poll.records": 30})) as a, \
                AIOShareConsumer(conf(broker, group, **{"client.id": "b", "max.poll.records": 30})) as b:
            for c in (a, b):
                c.set_acknowledgement_commit_callback(
                    lambda offsets, err: acked.append((set().union(*offsets.values()), err)))
            a.subscribe([topic])
            b.subscribe([topic])
            got_a: list[ShareConsumerRecord] = []
            got_b: list[ShareConsumerRecord] = []
            deadline = time.monotonic() + 30
            while len(got_a) + len(got_b) < 200:
                assert time.monotonic() < deadline, f"{len(got_a)} + {len(got_b)} of 200"
                ra, rb = await asyncio.gather(a.poll(100), b.poll(100))
                got_a += ra
                got_b += rb
            # A little longer: nothing must come back (every record was accepted by the next poll).
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                ra, rb = await asyncio.gather(a.poll(100), b.poll(100))
                got_a += ra
                got_b += rb
            return got_a, got_b

    got_a, got_b = asyncio.run(run())
    offsets = [r.offset for r in got_a + got_b]
    assert sorted(offsets) == list(range(200)), "every record exactly once"
    assert {r.delivery_count for r in got_a + got_b} == {1}
    assert {r.value for r in got_a + got_b} == {str(i).encode() for i in range(200)}
    # Every record was accepted (by the next poll, or at close), none failed.
    assert [err for _, err in acked if err is not None] == []
    assert set().union(*(offs for offs, _ in acked)) == set(range(200))


def test_explicit_release_reject_accept(broker: ShoalProcess) -> None:
    topic, group = setup_topic(broker, 3)

    async def run() -> None:
        async with AIOShareConsumer(conf(broker, group, **{"share.acknowledgement.mode": "explicit"})) as c:
            c.subscribe([topic])
            recs = await poll_until(c, 3)
            assert [(r.offset, r.delivery_count) for r in recs] == [(0, 1), (1, 1), (2, 1)]
            with pytest.raises(IllegalStateError):
                await c.poll(0)  # records of the previous poll are unacknowledged
            c.acknowledge(recs[0], AcknowledgeType.RELEASE)
            c.acknowledge(recs[1], AcknowledgeType.REJECT)
            c.acknowledge(recs[2])  # ACCEPT
            with pytest.raises(IllegalStateError):
                c.acknowledge(recs[2])  # already acknowledged
            results = await c.commit_sync()
            assert results and all(e is None for e in results.values()), results
            again = await poll_until(c, 1)
            assert [(r.offset, r.delivery_count) for r in again] == [(0, 2)]
            c.acknowledge(again[0], AcknowledgeType.ACCEPT)
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                more = await c.poll(200)
                assert more == [], f"records 1 (rejected) and 2, 0 (accepted) must not come back: {more}"

    asyncio.run(run())


def test_explicit_renew_then_accept(broker: ShoalProcess) -> None:
    topic, group = setup_topic(broker, 2)

    async def run() -> None:
        async with AIOShareConsumer(conf(broker, group, **{"share.acknowledgement.mode": "explicit"})) as c:
            c.subscribe([topic])
            recs = await poll_until(c, 2)
            c.acknowledge(recs[0], AcknowledgeType.RENEW)
            c.acknowledge(recs[1])
            results = await c.commit_sync()
            assert all(e is None for e in results.values()), results
            with pytest.raises(IllegalStateError):
                await c.poll(0)  # the renewed record still needs its final acknowledgement
            c.acknowledge(recs[0], AcknowledgeType.ACCEPT)
            assert all(e is None for e in (await c.commit_sync()).values())
            assert await c.poll(500) == []

    asyncio.run(run())


def test_transaction_markers_are_not_records(broker: ShoalProcess) -> None:
    topic, group = setup_topic(broker, 0)
    with Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}", "linger.ms": 0}) as p:
        p.init_transactions()
        for _ in range(2):
            p.begin_transaction()
            for i in range(3):
                p.send(topic, str(i).encode())
            p.commit_transaction()
    acked: list[tuple[set[int], Any]] = []

    async def run() -> list[ShareConsumerRecord]:
        async with AIOShareConsumer(conf(broker, group)) as c:
            c.set_acknowledgement_commit_callback(
                lambda offsets, err: acked.append((set().union(*offsets.values()), err)))
            c.subscribe([topic])
            got = await poll_until(c, 6)
            got += await c.poll(300)  # accepts the records; the markers went as GAP already
            assert all(e is None for e in (await c.commit_sync()).values())
            return got

    got = asyncio.run(run())
    assert [r.offset for r in got] == [0, 1, 2, 4, 5, 6]  # 3 and 7 are commit markers
    assert [err for _, err in acked if err is not None] == []
    # Markers inside an acquired range would be acknowledged as GAP; shoal's broker leaves them out of the
    # ranges (so only the records are acknowledged here).
    assert set().union(*(offs for offs, _ in acked)) >= {0, 1, 2, 4, 5, 6}


def test_implicit_mode_refuses_acknowledge(broker: ShoalProcess) -> None:
    topic, group = setup_topic(broker, 1)

    async def run() -> None:
        async with AIOShareConsumer(conf(broker, group)) as c:
            c.subscribe([topic])
            recs = await poll_until(c, 1)
            with pytest.raises(IllegalStateError):
                c.acknowledge(recs[0])

    asyncio.run(run())


def test_explicit_close_without_acknowledging_releases(broker: ShoalProcess) -> None:
    topic, group = setup_topic(broker, 5)

    async def run() -> None:
        explicit = {"share.acknowledgement.mode": "explicit"}
        first = AIOShareConsumer(conf(broker, group, **explicit, **{"client.id": "first"}))
        await first.start()
        first.subscribe([topic])
        recs = await poll_until(first, 5)
        assert {r.delivery_count for r in recs} == {1}
        await first.close()  # nothing acknowledged
        t0 = time.monotonic()
        async with AIOShareConsumer(conf(broker, group, **explicit, **{"client.id": "second"})) as second:
            second.subscribe([topic])
            back = await poll_until(second, 5, timeout=10)
            took = time.monotonic() - t0
            lock = second.acquisition_lock_timeout_ms
            assert sorted(r.offset for r in back) == [0, 1, 2, 3, 4]
            assert {r.delivery_count for r in back} == {2}
            # Released at close, not at the end of the acquisition lock (30 s by default).
            assert lock is None or took < lock / 1000, (took, lock)
            assert took < 10
            for r in back:
                second.acknowledge(r)

    asyncio.run(run())


def test_sync_share_consumer(broker: ShoalProcess) -> None:
    topic, group = setup_topic(broker, 50)
    seen: list[tuple[set[int], Any]] = []
    with ShareConsumer(conf(broker, group, **{"max.poll.records": 20})) as c:
        c.set_acknowledgement_commit_callback(lambda offsets, err: seen.append((set().union(*offsets.values()), err)))
        c.subscribe([topic])
        assert c.subscription() == {topic}
        got: list[ShareConsumerRecord] = []
        deadline = time.monotonic() + 20
        while len(got) < 50:
            assert time.monotonic() < deadline, f"only {len(got)} of 50"
            batch = c.poll(200)
            assert len(batch) <= 20
            got += batch
        results = c.commit_sync()
        assert all(e is None for e in results.values()), results
    assert sorted(r.offset for r in got) == list(range(50))
    acked = set().union(*(offs for offs, err in seen if err is None))
    assert acked == set(range(50)), sorted(set(range(50)) - acked)


def test_a_killed_consumers_records_come_back_with_delivery_count_2(broker: ShoalProcess) -> None:
    """A ShareConsumer process killed (SIGKILL) while holding records: another gets them, count 2."""
    import signal
    import subprocess
    import sys

    topic, group = setup_topic(broker, 4)
    script = (
        "import sys, time\n"
        "from shoal.client import ShareConsumer\n"
        f"c = ShareConsumer({conf(broker, group, **{'share.acknowledgement.mode': 'explicit'})!r})\n"
        f"c.subscribe([{topic!r}])\n"
        "got = []\n"
        "while len(got) < 4:\n"
        "    got += c.poll(200)\n"
        "print('held', len(got), flush=True)\n"
        "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held 4"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

        async def run() -> list[ShareConsumerRecord]:
            async with AIOShareConsumer(conf(broker, group)) as c:
                c.subscribe([topic])
                return await poll_until(c, 4)

        again = asyncio.run(run())
        assert sorted((r.offset, r.delivery_count) for r in again) == [(i, 2) for i in range(4)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_the_delivery_limit_archives_a_poison_record(broker: ShoalProcess) -> None:
    topic, group = setup_topic(broker, 3)
    asyncio.run(set_group_config(broker.bootstrap, group, "share.delivery.count.limit", "2"))

    async def run() -> list[tuple[int, int]]:
        seen: list[tuple[int, int]] = []
        async with AIOShareConsumer(conf(broker, group, **{"share.acknowledgement.mode": "explicit"})) as c:
            c.subscribe([topic])
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:
                for r in await c.poll(200):
                    seen.append((r.offset, r.delivery_count))
                    # record 1 is poison: released every time; the others are accepted
                    c.acknowledge(r, AcknowledgeType.RELEASE if r.offset == 1 else AcknowledgeType.ACCEPT)
        return seen

    seen = asyncio.run(run())
    assert sorted(seen) == [(0, 1), (1, 1), (1, 2), (2, 1)], seen
