"""Consumer groups of shoal consumers (and confluent-kafka ones) against a real `shoal serve`.

In-process members each run their poll loop in a thread; the member that gets SIGKILLed is a
subprocess (this module run as ``python -m tests.interop.test_client_shoal_groups SPEC``),
so that it really vanishes without a LeaveGroup.  Every wait polls with a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from shoal.client import (
    AdminClient,
    CommitFailedError,
    Consumer,
    ConsumerRebalanceListener,
    NewTopic,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)

pytestmark = pytest.mark.timeout(60)

SESSION_MS = 6000
HEARTBEAT_MS = 500
TP = tuple[str, int]


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as e:  # noqa: BLE001 - the group may be moving: keep polling
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def shoal_conf(bootstrap: str, group: str, name: str, strategy: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "partition.assignment.strategy": strategy, "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS, "max.poll.interval.ms": 20000,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra}


class Recorder(ConsumerRebalanceListener):
    """Records every rebalance callback, with the assignment the consumer had at that moment."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[TP]]] = []
        self.consumer: Consumer | None = None

    def _rec(self, kind: str, parts: list[TopicPartition]) -> None:
        self.calls.append((kind, sorted((tp.topic, tp.partition) for tp in parts)))

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self._rec("revoked", revoked)

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self._rec("assigned", assigned)

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self._rec("lost", lost)


class Member:
    """One in-process consumer (shoal or confluent-kafka) polling in its own thread."""

    def __init__(self, name: str, kind: str, conf: dict[str, Any], topic: str, commit: bool = False) -> None:
        self.name, self.kind, self.conf, self.topic, self.commit = name, kind, conf, topic, commit
        self.lock = threading.Lock()
        self.assignment: set[TP] = set()
        self.records: list[tuple[str, int, int]] = []
        self.errors: list[BaseException] = []
        self.listener = Recorder()
        self.stop = threading.Event()
        self.pause = threading.Event()  # while set the thread does not poll
        self.consumer: Any = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            if self.kind == "shoal":
                self._run_shoal()
            else:
                self._run_ck()
        except BaseException as e:  # noqa: BLE001 - reported to the test
            self.errors.append(e)

    def _run_shoal(self) -> None:
        c = self.consumer = Consumer(self.conf)
        c.subscribe([self.topic], listener=self.listener)
        try:
            while not self.stop.is_set():
                if self.pause.is_set():
                    time.sleep(0.05)
                    continue
                polled = c.poll(100)
                with self.lock:
                    self.assignment = {(tp.topic, tp.partition) for tp in c.assignment()}
                    for recs in polled.values():
                        self.records += [(r.topic, r.partition, r.offset) for r in recs]
                if polled and self.commit:
                    c.commit_sync({tp: recs[-1].offset + 1 for tp, recs in polled.items()})
        finally:
            c.close()

    def _run_ck(self) -> None:
        conf = {"log_level": 0, **self.conf}
        c = self.consumer = confluent_kafka.Consumer(conf)
        c.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                msgs = c.consume(100, 0.1)
                with self.lock:
                    self.assignment = {(tp.topic, tp.partition) for tp in c.assignment()}
                    for m in msgs:
                        if m.error() is None:
                            self.records.append((m.topic(), m.partition(), m.offset()))
        finally:
            c.close()

    def snapshot(self) -> set[TP]:
        with self.lock:
            return set(self.assignment)

    def close(self, timeout: float = 20) -> None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.name} did not close within {timeout}s"


class ChildMember:
    """A shoal consumer in a subprocess, reporting its assignment as JSON lines."""

    def __init__(self, conf: dict[str, Any], topic: str, log_path: Path) -> None:
        spec = json.dumps({"conf": conf, "topic": topic})
        root = Path(__file__).resolve().parents[2]
        with open(log_path, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.interop.test_client_shoal_groups", spec],
                                         stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1, cwd=root)
        self.assignment: set[TP] = set()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.assignment = {(t, p) for t, p in json.loads(line)["assignment"]}

    def snapshot(self) -> set[TP]:
        return set(self.assignment)

    def kill9(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def _child_main(spec_json: str) -> None:
    spec = json.loads(spec_json)
    c = Consumer(spec["conf"])
    c.subscribe([spec["topic"]])
    last = None
    while True:
        c.poll(100)
        now = sorted([tp.topic, tp.partition] for tp in c.assignment())
        if now != last:
            sys.stdout.write(json.dumps({"assignment": now}) + "\n")
            sys.stdout.flush()
            last = now


@pytest.fixture
def cleanup() -> Iterator[list[Any]]:
    """Things with close()/stop() to shut at the end of the test, whatever happened."""
    items: list[Any] = []
    yield items
    for it in reversed(items):
        try:
            if isinstance(it, ChildMember):
                it.stop()
            elif isinstance(it, Member):
                it.stop.set()
                it.thread.join(20)
            else:
                it.close()
        except Exception:  # noqa: BLE001, S110 - best effort at teardown
            pass


def make_topic(bootstrap: str, partitions: int, records: int = 0) -> str:
    name = "g-" + uuid.uuid4().hex[:8]
    a = AdminClient({"bootstrap.servers": bootstrap})
    try:
        assert a.create_topics([NewTopic(name, partitions, 1)]) == {name: None}
    finally:
        a.close()
    if records:
        p = Producer({"bootstrap.servers": bootstrap})
        try:
            for i in range(records):
                p.send(name, b"v%d" % i, partition=i % partitions)
            p.flush(20)
        finally:
            p.close()
    return name


def partitioned(views: dict[str, set[TP]], expected: set[TP]) -> bool:
    seen: list[TP] = [tp for parts in views.values() for tp in parts]
    return len(seen) == len(set(seen)) and set(seen) == expected


def described(admin: AdminClient, group: str) -> dict[str, set[TP]] | None:
    """client.id -> partitions from DescribeGroups, when the group is Stable."""
    g = admin.describe_groups([group])[group]
    if g.state != "Stable":
        return None
    return {m.client_id: {(tp.topic, tp.partition) for tp in m.assignment} for m in g.members}


def settled(admin: AdminClient, group: str, members: dict[str, Any], expected: set[TP]) -> bool:
    """Members' own views and DescribeGroups agree and cover each partition exactly once."""
    views = {name: m.snapshot() for name, m in members.items()}
    if not partitioned(views, expected) or not all(views.values()):
        return False
    d = described(admin, group)
    return d is not None and d == views


# ------------------------------------------------------------------------------ mixed group


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_mixed_group_shares_partitions_through_joins_leaves_and_kill(
        shoal_factory: Any, tmp_path: Path, cleanup: list[Any], strategy: str) -> None:
    broker = shoal_factory()
    bs = broker.bootstrap
    topic = make_topic(bs, 6, records=60)
    expected = {(topic, p) for p in range(6)}
    group = "mix-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bs})
    cleanup.append(admin)

    def ck_conf(name: str) -> dict[str, Any]:
        return {"bootstrap.servers": bs, "group.id": group, "client.id": name,
                "partition.assignment.strategy": strategy, "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS, "auto.offset.reset": "earliest",
                "enable.auto.commit": False}

    members: dict[str, Any] = {}

    def add(name: str, kind: str) -> None:
        conf = shoal_conf(bs, group, name, strategy) if kind == "shoal" else ck_conf(name)
        members[name] = Member(name, kind, conf, topic)
        cleanup.append(members[name])

    def check(what: str, timeout: float = 25) -> None:
        wait_until(lambda: settled(admin, group, members, expected), timeout, what)
        for m in members.values():
            assert not getattr(m, "errors", []), (m.name, m.errors)

    add("shoal-1", "shoal")
    add("ck-1", "ck")
    check("2 members")
    # Every record of the topic is consumed (without commits a rebalance may replay some).
    wait_until(lambda: len({r for m in members.values() for r in m.records}) == 60, 20, "60 records")
    add("shoal-2", "shoal")
    add("ck-2", "ck")
    check("4 members")
    members.pop("ck-1").close()
    check("ck-1 left")
    members.pop("shoal-1").close()
    check("shoal-1 left")

    child = ChildMember(shoal_conf(bs, group, "shoal-child", strategy), topic, tmp_path / "child.log")
    cleanup.append(child)
    members["shoal-child"] = child
    check("child joined")
    assert child.snapshot()
    members.pop("shoal-child")
    killed_at = time.monotonic()
    child.kill9()
    check("child's partitions reassigned after its session timeout", timeout=SESSION_MS / 1000 + 20)
    # The kill was noticed by the session timeout, not earlier (no LeaveGroup was sent).
    assert time.monotonic() - killed_at >= SESSION_MS / 1000 - 1.5
    for m in list(members.values()):
        m.close()


# --------------------------------------------------------------------- max.poll.interval.ms


def test_member_past_max_poll_interval_loses_partitions_and_commit_fails(shoal_factory: Any, cleanup: list[Any]) -> None:
    broker = shoal_factory()
    bs = broker.bootstrap
    topic = make_topic(bs, 6, records=60)
    expected = {(topic, p) for p in range(6)}
    group = "mpi-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bs})
    cleanup.append(admin)
    slow = Member("slow", "shoal", shoal_conf(bs, group, "slow", "range", **{"max.poll.interval.ms": 3000}), topic)
    cleanup.append(slow)
    other = Member("other", "shoal", shoal_conf(bs, group, "other", "range", **{"max.poll.interval.ms": 3000}), topic)
    cleanup.append(other)
    wait_until(lambda: settled(admin, group, {"slow": slow, "other": other}, expected), 25, "two members")
    wait_until(lambda: len(slow.records) + len(other.records) >= 60, 20, "records consumed")
    before = slow.snapshot()
    assert before
    calls_before = len(slow.listener.calls)
    slow.pause.set()  # the application stops calling poll()
    wait_until(lambda: other.snapshot() == expected and described(admin, group) == {"other": expected},
               3 + SESSION_MS / 1000 + 10, "the other member takes every partition")
    assert slow.listener.calls[calls_before:] == []  # nothing is called while the app does not poll
    # The late commit of what it had consumed fails: its generation is gone.
    assert slow.consumer is not None
    with pytest.raises(CommitFailedError):
        slow.consumer.commit_sync({TopicPartition(t, p): OffsetAndMetadata(1) for t, p in before})
    slow.pause.clear()  # back to polling: it learns it lost its partitions, then rejoins
    wait_until(lambda: settled(admin, group, {"slow": slow, "other": other}, expected), 25, "slow rejoined")
    calls = slow.listener.calls[calls_before:]
    assert calls[0] == ("lost", sorted(before)), calls
    assert calls[-1][0] == "assigned" and set(calls[-1][1]) == slow.snapshot(), calls
    assert all(kind != "revoked" or parts == [] for kind, parts in calls), calls  # nothing owned to revoke
    assert not slow.errors and not other.errors


# ------------------------------------------------------------------------ listener calls


def test_listener_calls_eager(shoal_factory: Any, cleanup: list[Any]) -> None:
    bs = shoal_factory().bootstrap
    topic = make_topic(bs, 6)
    allp = sorted((topic, p) for p in range(6))
    group = "lis-" + uuid.uuid4().hex[:6]
    a = Member("a", "shoal", shoal_conf(bs, group, "a", "range"), topic)
    cleanup.append(a)
    wait_until(lambda: a.snapshot() == set(allp), 20, "a owns all")
    assert a.listener.calls == [("assigned", allp)]
    b = Member("b", "shoal", shoal_conf(bs, group, "b", "range"), topic)
    cleanup.append(b)
    wait_until(lambda: partitioned({"a": a.snapshot(), "b": b.snapshot()}, set(allp))
               and a.snapshot() and b.snapshot(), 20, "a and b share")
    mine = sorted(a.snapshot())
    assert len(mine) == 3
    # Eager: everything revoked before the rejoin, then the new share assigned.
    assert a.listener.calls == [("assigned", allp), ("revoked", allp), ("assigned", mine)]
    assert b.listener.calls == [("assigned", sorted(b.snapshot()))]
    b.close()
    wait_until(lambda: a.snapshot() == set(allp), 20, "a owns all again")
    assert a.listener.calls[3:] == [("revoked", mine), ("assigned", allp)]
    assert b.listener.calls[-1] == ("revoked", sorted(set(allp) - set(mine)))  # on close
    a.close()
    assert a.listener.calls[5:] == [("revoked", allp)]


def test_listener_calls_cooperative(shoal_factory: Any, cleanup: list[Any]) -> None:
    bs = shoal_factory().bootstrap
    topic = make_topic(bs, 6)
    allp = sorted((topic, p) for p in range(6))
    group = "coop-" + uuid.uuid4().hex[:6]
    a = Member("a", "shoal", shoal_conf(bs, group, "a", "cooperative-sticky"), topic)
    cleanup.append(a)
    wait_until(lambda: a.snapshot() == set(allp), 20, "a owns all")
    b = Member("b", "shoal", shoal_conf(bs, group, "b", "cooperative-sticky"), topic)
    cleanup.append(b)
    wait_until(lambda: partitioned({"a": a.snapshot(), "b": b.snapshot()}, set(allp))
               and len(a.snapshot()) == 3, 20, "a and b share")
    kept = sorted(a.snapshot())
    moved = sorted(set(allp) - set(kept))
    # Cooperative: only what moves is revoked; what stays is never revoked, nothing is reassigned to a.
    revoked = [p for kind, parts in a.listener.calls if kind == "revoked" for p in parts]
    assigned = [p for kind, parts in a.listener.calls if kind == "assigned" for p in parts]
    assert sorted(revoked) == moved, a.listener.calls
    assert sorted(assigned) == allp, a.listener.calls
    assert a.listener.calls[0] == ("assigned", allp)
    assert not any(kind == "lost" for kind, _ in a.listener.calls)
    assert sorted(p for kind, parts in b.listener.calls if kind == "assigned" for p in parts) == moved
    assert not any(kind in ("revoked", "lost") for kind, _ in b.listener.calls), b.listener.calls


# ------------------------------------------------------------------- static membership


def test_static_member_restart_does_not_rebalance_others(shoal_factory: Any, cleanup: list[Any]) -> None:
    bs = shoal_factory().bootstrap
    topic = make_topic(bs, 6)
    expected = {(topic, p) for p in range(6)}
    group = "static-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bs})
    cleanup.append(admin)
    static_conf = shoal_conf(bs, group, "static", "range", **{"group.instance.id": "inst-1"})
    s = Member("static", "shoal", static_conf, topic)
    cleanup.append(s)
    d = Member("dyn", "shoal", shoal_conf(bs, group, "dyn", "range"), topic)
    cleanup.append(d)
    wait_until(lambda: settled(admin, group, {"static": s, "dyn": d}, expected), 25, "two members")
    s_parts = s.snapshot()
    assert d.consumer is not None
    gen_before = d.consumer.group_generation[0]
    d_calls = len(d.listener.calls)
    s.close()  # a static member sends no LeaveGroup
    g = admin.describe_groups([group])[group]
    assert g.state == "Stable" and {m.group_instance_id for m in g.members} == {"inst-1", None}
    s2 = Member("static", "shoal", static_conf, topic)
    cleanup.append(s2)
    wait_until(lambda: s2.snapshot() == s_parts, 15, "the restarted static member gets its partitions back")
    time.sleep(2 * HEARTBEAT_MS / 1000)  # heartbeats would carry REBALANCE_IN_PROGRESS to dyn by now
    assert d.consumer.group_generation[0] == gen_before
    assert d.listener.calls[d_calls:] == []
    assert settled(admin, group, {"static": s2, "dyn": d}, expected)
    assert not s.errors and not s2.errors and not d.errors


# ----------------------------------------------------------- broker restart, coordinator move


def test_commits_resume_after_broker_restart(shoal_factory: Any, cleanup: list[Any]) -> None:
    broker = shoal_factory()
    bs = broker.bootstrap
    topic = make_topic(bs, 2, records=20)
    group = "rst-" + uuid.uuid4().hex[:6]
    c = Consumer(shoal_conf(bs, group, "c", "range"))
    cleanup.append(c)
    c.subscribe([topic])
    got: list[Any] = []
    deadline = time.monotonic() + 20
    while len(got) < 20:
        assert time.monotonic() < deadline
        for recs in c.poll(100).values():
            got += recs
    c.commit_sync()
    broker.restart()
    p = Producer({"bootstrap.servers": bs})
    cleanup.append(p)
    for i in range(10):
        p.send(topic, b"after-%d" % i, partition=i % 2)
    p.flush(20)
    after: list[Any] = []
    deadline = time.monotonic() + 30
    while len(after) < 10:
        assert time.monotonic() < deadline, f"only {len(after)} records after the restart"
        for recs in c.poll(100).values():
            after += recs
    assert sorted(r.value for r in after) == sorted(b"after-%d" % i for i in range(10))

    def commit_ok() -> bool:
        c.poll(50)
        c.commit_sync(timeout_ms=5000)
        return True

    wait_until(commit_ok, 20, "a commit after the restart")
    a = AdminClient({"bootstrap.servers": bs})
    cleanup.append(a)
    assert a.list_group_offsets(group) == {TopicPartition(topic, 0): OffsetAndMetadata(15),
                                           TopicPartition(topic, 1): OffsetAndMetadata(15)}


def test_coordinator_rediscovered_when_its_node_stops(shoal_factory: Any, cleanup: list[Any]) -> None:
    broker = shoal_factory(nodes=3, overrides={"offsets.topic.replication.factor": "3",
                                               "default.replication.factor": "3"})
    bs = broker.bootstrap
    topic = make_topic(bs, 3, records=30)
    group = "fo-" + uuid.uuid4().hex[:6]
    c = Consumer(shoal_conf(bs, group, "c", "range"))
    cleanup.append(c)
    c.subscribe([topic])
    got: list[Any] = []
    deadline = time.monotonic() + 20
    while len(got) < 30:
        assert time.monotonic() < deadline
        for recs in c.poll(100).values():
            got += recs
    c.commit_sync()
    coord = c._core.coordinator.coordinator_id  # which node the client talks to for the group
    assert coord is not None
    broker.command(f"stop-node {coord}")

    def moved_and_committed() -> bool:
        c.poll(50)
        c.commit_sync({TopicPartition(topic, 0): 7}, timeout_ms=5000)
        now = c._core.coordinator.coordinator_id
        return now is not None and now != coord

    wait_until(moved_and_committed, 30, "a commit through the new coordinator")
    a = AdminClient({"bootstrap.servers": ",".join(f"127.0.0.1:{p}" for n, p in broker.ports.items() if n != coord)})
    cleanup.append(a)
    assert a.list_group_offsets(group)[TopicPartition(topic, 0)] == OffsetAndMetadata(7)


if __name__ == "__main__":
    _child_main(sys.argv[1])
