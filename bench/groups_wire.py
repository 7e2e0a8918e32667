"""Benchmark: consumer groups of 10 to 500 members, classic against KIP-848, shoal and Apache Kafka 4.4
side by side.

    .venv/bin/python bench/groups_wire.py [--sizes 10,50,500] [--repeats 3] [--partitions 1000]
                                          [--protocols consumer,classic] [--targets shoal,kafka]

bench/groups.py runs real librdkafka consumers, one handle (and several threads) each, which two cores
cannot hold 500 of. Here every member is a coroutine with its own connection that speaks the group
protocol as a client does, and takes a new assignment at once (it has no records to finish), so what
is timed is the coordinator:

- consumer: ConsumerGroupHeartbeat v1, a full heartbeat to join (its member id, subscription and
  rebalance timeout), then one every `heartbeat.interval.ms` the broker answers, acknowledging an
  assignment by sending the partitions it now owns;
- classic: JoinGroup v5 (a first join learns its member id, MEMBER_ID_REQUIRED), SyncGroup v3 (the
  leader computes a range assignment), Heartbeat v3 every 100 ms, and a new join, owning nothing
  (eager), when a heartbeat answers REBALANCE_IN_PROGRESS; LeaveGroup v3 to leave.

"Covered": every member holds at least one partition, no partition has two owners, and together they
hold all of them. Per size N: the time from the first request until N members are covered, then until
N+1 are after one more joins, then until N are after one leaves. Both brokers run bench/groups.py's
BROKER_OVERRIDES (100 ms consumer-protocol heartbeats, no initial rebalance delay).
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.groups import KafkaTarget, ShoalProtoTarget, _fmt, _prepare  # noqa: E402
from shoal.assignors.consumer_protocol import decode_assignment, encode_assignment, encode_subscription  # noqa: E402
from shoal.assignors.types import Assignment, Subscription, TopicPartition  # noqa: E402
from shoal.protocol.framing import decode_response_header, encode_request, response_header_version  # noqa: E402
from shoal.protocol.generated import api_spec  # noqa: E402
from shoal.protocol.generated.api_keys import ApiKey  # noqa: E402

TOPIC = "bench-wire"
# NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE: Kafka answers them while it
# loads a new __consumer_offsets partition; a client retries.
RETRIABLE = {14, 15, 16}
MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27


class Conn:
    """One connection; requests on it are answered in order."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.correlation = 0

    async def call(self, key: int, version: int, req: Any) -> Any:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.correlation += 1
        self.writer.write(encode_request(key, version, self.correlation, "bench-wire", req.encode(version)))
        await self.writer.drain()
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        buf = await self.reader.readexactly(size)
        _, offset = decode_response_header(buf, response_header_version(key, version))
        return api_spec(key).response.decode(memoryview(buf)[offset:], version)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class Member:
    """What the trial sees of a member: what it owns, whether it failed, and a way to make it leave."""

    def __init__(self, host: str, port: int, group: str) -> None:
        self.conn = Conn(host, port)
        self.group = group
        self.owned: set[Any] = set()
        self.leaving = False
        self.error: str | None = None

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            self.conn.close()

    async def _run(self) -> None:
        raise NotImplementedError


class ConsumerMember(Member):
    """A KIP-848 member (see the module's docstring)."""

    def __init__(self, host: str, port: int, group: str) -> None:
        super().__init__(host, port, group)
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.acked: set[Any] | None = None  # what the broker last heard we own: (topic id, partition)

    async def _run(self) -> None:
        interval = 0.1
        while True:
            left = self.leaving  # a leave set while a heartbeat is in flight goes in the next one
            resp = await self._heartbeat(left)
            if left:
                return
            if resp.error_code in RETRIABLE:
                await asyncio.sleep(0.05)
                continue
            if resp.error_code:
                self.error = f"error {resp.error_code}: {resp.error_message}"
                return
            self.epoch = resp.member_epoch
            interval = max(resp.heartbeat_interval_ms, 10) / 1000
            if resp.assignment is not None:
                self.owned = {(t.topic_id, p) for t in resp.assignment.topic_partitions for p in t.partitions}
            await asyncio.sleep(0 if self.owned != self.acked else interval)

    async def _heartbeat(self, leave: bool) -> Any:
        spec = api_spec(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        joining = self.epoch == 0
        tps = None
        if joining or self.owned != self.acked:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for t, p in self.owned:
                by_topic.setdefault(t, []).append(p)
            tps = [spec.request.TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in by_topic.items()]
            self.acked = set(self.owned)
        req = spec.request(group_id=self.group, member_id=self.member_id, member_epoch=-1 if leave else self.epoch,
                           rebalance_timeout_ms=60000 if joining else -1,
                           subscribed_topic_names=[TOPIC] if joining else None, topic_partitions=tps)
        return await self.conn.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, req)


class ClassicMember(Member):
    """A classic (eager, range) member (see the module's docstring)."""

    partitions = 0  # set by the trial

    def __init__(self, host: str, port: int, group: str) -> None:
        super().__init__(host, port, group)
        self.member_id = ""
        self.generation = -1

    async def _run(self) -> None:
        while not self.leaving:
            if not await self._join_and_sync():
                continue
            while not self.leaving:
                await asyncio.sleep(0.1)
                req = api_spec(ApiKey.HEARTBEAT).request(group_id=self.group, generation_id=self.generation,
                                                         member_id=self.member_id)
                code = (await self.conn.call(ApiKey.HEARTBEAT, 3, req)).error_code
                if code == REBALANCE_IN_PROGRESS:
                    break
                if code and code not in RETRIABLE:
                    self.error = f"Heartbeat error {code}"
                    return
        req = api_spec(ApiKey.LEAVE_GROUP).request(group_id=self.group, members=[
            api_spec(ApiKey.LEAVE_GROUP).request.MemberIdentity(member_id=self.member_id)])
        await self.conn.call(ApiKey.LEAVE_GROUP, 3, req)

    async def _join_and_sync(self) -> bool:
        self.owned = set()  # eager: everything is given up before joining
        spec = api_spec(ApiKey.JOIN_GROUP)
        protocol = spec.request.JoinGroupRequestProtocol(
            name="range", metadata=encode_subscription(Subscription([TOPIC]), 0))
        join = await self.conn.call(ApiKey.JOIN_GROUP, 5, spec.request(
            group_id=self.group, session_timeout_ms=10000, rebalance_timeout_ms=60000, member_id=self.member_id,
            protocol_type="consumer", protocols=[protocol]))
        if join.error_code == MEMBER_ID_REQUIRED:
            self.member_id = join.member_id
            return False
        if join.error_code in RETRIABLE or join.error_code == REBALANCE_IN_PROGRESS:
            await asyncio.sleep(0.05)
            return False
        if join.error_code:
            self.error = f"JoinGroup error {join.error_code}"
            self.leaving = True
            return False
        self.member_id, self.generation = join.member_id, join.generation_id
        sync_spec = api_spec(ApiKey.SYNC_GROUP)
        assignments = []
        if join.leader == self.member_id:
            ids = sorted(m.member_id for m in join.members)
            per, extra = divmod(self.partitions, len(ids))
            start = 0
            for i, mid in enumerate(ids):
                count = per + (1 if i < extra else 0)
                blob = encode_assignment(Assignment([TopicPartition(TOPIC, p) for p in range(start, start + count)]))
                assignments.append(sync_spec.request.SyncGroupRequestAssignment(member_id=mid, assignment=blob))
                start += count
        sync = await self.conn.call(ApiKey.SYNC_GROUP, 3, sync_spec.request(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id, assignments=assignments))
        if sync.error_code:
            return False  # a new rebalance began: join again
        self.owned = {(tp.topic, tp.partition) for tp in decode_assignment(sync.assignment).partitions}
        return True


async def find_coordinator(host: str, port: int, group: str) -> tuple[str, int]:
    """The group's coordinator, as a client asks for it first (the first ask creates __consumer_offsets)."""
    conn = Conn(host, port)
    req = api_spec(ApiKey.FIND_COORDINATOR).request(key_type=0, coordinator_keys=[group])
    try:
        for _ in range(100):
            c = (await conn.call(ApiKey.FIND_COORDINATOR, 4, req)).coordinators[0]
            if c.error_code == 0:
                return c.host, c.port
            await asyncio.sleep(0.1)
    finally:
        conn.close()
    raise RuntimeError(f"no coordinator for {group}: error {c.error_code}")


def covered(members: list[Member], partitions: int) -> bool:
    every = [tp for m in members for tp in m.owned]
    return all(m.owned for m in members) and len(every) == partitions and len(set(every)) == partitions


async def wait_covered(members: list[Member], partitions: int, t0: float, timeout: float) -> float | None:
    while not covered(members, partitions):
        failed = [m.error for m in members if m.error]
        if failed or time.monotonic() - t0 > timeout:
            if failed:
                print(f"  member error: {failed[0]}", file=sys.stderr)
            return None
        await asyncio.sleep(0.002)
    return time.monotonic() - t0


Result = tuple[float | None, float | None, float | None]


async def trial(bootstrap: str, make: Callable[[str, int, str], Member], n: int, partitions: int,
                timeout: float) -> Result:
    b_host, b_port = bootstrap.split(":")
    group = f"wire-{n}-{uuid.uuid4().hex[:6]}"
    host, port = await find_coordinator(b_host, int(b_port), group)
    members = [make(host, port, group) for _ in range(n)]
    t0 = time.monotonic()
    tasks = [asyncio.create_task(m.run()) for m in members]
    first = await wait_covered(members, partitions, t0, timeout)
    join = leave = None
    if first is not None:
        extra = make(host, port, group)
        t1 = time.monotonic()
        tasks.append(asyncio.create_task(extra.run()))
        join = await wait_covered(members + [extra], partitions, t1, timeout)
        if join is not None:
            members[0].leaving = True
            t2 = time.monotonic()
            leave = await wait_covered(members[1:] + [extra], partitions, t2, timeout)
    for m in members:
        m.leaving = True
    await asyncio.wait(tasks, timeout=10)
    for t in tasks:
        t.cancel()
    return first, join, leave


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,50,500")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--protocols", default="consumer,classic")
    ap.add_argument("--targets", default="shoal,kafka")
    ap.add_argument("--trial-timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    targets, protocols = args.targets.split(","), args.protocols.split(",")
    ClassicMember.partitions = args.partitions
    makers: dict[str, Callable[[str, int, str], Member]] = {"consumer": ConsumerMember, "classic": ClassicMember}
    results: dict[tuple[str, str, int], list[Result]] = {}
    for name in targets:
        with tempfile.TemporaryDirectory() as tmp:
            target = ShoalProtoTarget(Path(tmp)) if name == "shoal" else KafkaTarget(Path(tmp))
            try:
                _prepare(target.bootstrap, TOPIC, args.partitions, 0)
                for protocol in protocols:
                    for n in sizes:
                        for _ in range(args.repeats):
                            r = asyncio.run(trial(target.bootstrap, makers[protocol], n, args.partitions,
                                                  args.trial_timeout))
                            results.setdefault((name, protocol, n), []).append(r)
                            print(f"{name} {protocol} N={n}: "
                                  + ", ".join("-" if v is None else f"{v * 1000:.0f} ms" for v in r), file=sys.stderr)
            finally:
                target.close()
    print(f"\n| protocol | measure ({args.partitions} partitions, medians of {args.repeats}) | "
          + " | ".join(targets) + " |")
    print("|---|---|" + "---|" * len(targets))
    for protocol in protocols:
        for n in sizes:
            for i, what in enumerate((f"N={n} covered", f"N={n}+1 re-covered after a join",
                                      f"N={n + 1}-1 re-covered after a leave")):
                cells = [_fmt([r[i] for r in results.get((t, protocol, n), [])]) for t in targets]
                print(f"| {protocol} | {what} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
