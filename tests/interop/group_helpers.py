"""Group consumers run as subprocesses, and what the tests ask about groups.

A `Member` is one consumer (confluent-kafka, kafka-python or aiokafka) in its
own process, so it can be closed gracefully (SIGTERM: the client's close(),
which leaves the group) or crashed (SIGKILL: no LeaveGroup, the coordinator
must notice the missing heartbeats). The child prints one JSON line per
event: its assignment whenever it changes, every record it consumed, every
synchronous commit that succeeded, rebalance callbacks and client errors.

Run as `python -m tests.interop.group_helpers '<json spec>'` (the child side).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

# Short timeouts keep fail-over quick: 6 s is the broker's minimum session timeout.
SESSION_MS = 6000
HEARTBEAT_MS = 1000
MAX_POLL_MS = 15000

TP = tuple[str, int]


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.2,
               detail: Callable[[], Any] | None = None) -> Any:
    """Poll `check` until it returns something truthy; fail with `what` (and `detail()`) after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as e:  # keep polling: the cluster may be moving
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    more = ""
    if detail is not None:
        try:
            more = f"; {detail()}"
        except Exception as e:
            more = f"; detail failed: {e!r}"
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}{more}")


# ---------------------------------------------------------------- parent side
@dataclass
class Member:
    """A consumer subprocess and the events it reported."""

    name: str
    proc: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            ev = json.loads(line)
            ev["at"] = time.monotonic()
            with self.lock:
                self.events.append(ev)

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if e["ev"] == kind]

    @property
    def assignment(self) -> set[TP]:
        """The latest assignment the client reported."""
        evs = self.of("assignment")
        return {(t, p) for t, p in evs[-1]["parts"]} if evs else set()

    @property
    def records(self) -> list[TP | tuple[str, int, int]]:
        return [(e["t"], e["p"], e["o"]) for e in self.of("rec")]

    @property
    def committed(self) -> dict[TP, int]:
        """The latest offset of each partition committed successfully."""
        out: dict[TP, int] = {}
        for e in self.of("committed"):
            for t, p, o in e["offsets"]:
                out[(t, p)] = o
        return out

    @property
    def callbacks(self) -> int:
        return len(self.of("callback"))

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, timeout: float = 20.0) -> None:
        """Graceful close (the client leaves the group)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise AssertionError(f"member {self.name} did not close within {timeout}s") from None

    def kill9(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def stop_quietly(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


class Members:
    """Starts members and stops every one of them at the end of a test."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.started: list[Member] = []

    def start(self, name: str, client: str, bootstrap: str, group: str, topics: list[str],
              conf: dict[str, Any] | None = None, commit: bool = False, stop_after: int | None = None,
              batch_pause_ms: int = 0) -> Member:
        spec = {"name": name, "client": client, "bootstrap": bootstrap, "group": group, "topics": topics,
                "conf": conf or {}, "commit": commit, "stop_after": stop_after,
                "batch_pause_ms": batch_pause_ms}
        err = open(os.path.join(self.log_dir, f"member-{name}-{len(self.started)}.log"), "w")  # noqa: SIM115
        proc = subprocess.Popen([sys.executable, "-m", "tests.interop.group_helpers", json.dumps(spec)],
                                stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1,
                                cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        err.close()
        member = Member(name, proc)
        threading.Thread(target=member._read, daemon=True).start()
        self.started.append(member)
        return member

    def stop_all(self) -> None:
        for m in self.started:
            m.stop_quietly()


@pytest.fixture
def members(tmp_path: Any) -> Iterator[Members]:
    """Consumer subprocesses for one test; all killed at its end."""
    started = Members(str(tmp_path))
    yield started
    started.stop_all()


def group_state(bootstrap: str, group: str, ms: list[Member]) -> str:
    """What the members and DescribeGroups say, for failure messages."""
    lines = [f"{m.name}: alive={m.alive} assignment={sorted(m.assignment)} callbacks={m.callbacks} "
             f"errors={m.of('error')[-3:]} commit_failed={m.of('commit_failed')[-2:]}" for m in ms]
    try:
        view = describe_group(bootstrap, group)
        lines.append(f"DescribeGroups: {view.state} coordinator={view.coordinator} members={view.members}")
    except Exception as e:
        lines.append(f"DescribeGroups failed: {e!r}")
    return "\n".join(lines)


def assert_partitioned(assignments: dict[str, set[TP]], expected: set[TP]) -> None:
    """Every expected partition assigned to exactly one member."""
    seen: dict[TP, str] = {}
    for name, parts in assignments.items():
        for tp in parts:
            assert tp not in seen, f"{tp} assigned to both {seen[tp]} and {name}: {assignments}"
            seen[tp] = name
    assert set(seen) == expected, f"assigned {sorted(seen)} != {sorted(expected)}: {assignments}"


def is_partitioned(assignments: dict[str, set[TP]], expected: set[TP]) -> bool:
    try:
        assert_partitioned(assignments, expected)
    except AssertionError:
        return False
    return True


# Fast KIP-848 group timers for tests (Kafka's bounds allow them once the minimums are lowered too).
FAST_CONSUMER_GROUP_TIMERS = {
    "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000"}


def wait_settled(ms: list[Member], everything: set[TP], timeout: float) -> None:
    """Until every member owns partitions and each partition exactly one member (else AssertionError)."""
    wait_until(lambda: all(m.assignment for m in ms) and is_partitioned({m.name: m.assignment for m in ms}, everything),
               timeout, f"partitions settled over {[m.name for m in ms]}")
    assert_partitioned({m.name: m.assignment for m in ms}, everything)


# ---------------------------------------------------------------- admin side
@dataclass
class GroupView:
    """A group as DescribeGroups shows it (via confluent-kafka's AdminClient)."""

    state: str
    assignor: str
    coordinator: int
    members: dict[str, set[TP]]  # client.id -> partitions
    member_ids: dict[str, str]  # client.id -> member id
    instance_ids: dict[str, str | None]


def describe_group(bootstrap: str, group: str) -> GroupView:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
    members: dict[str, set[TP]] = {}
    ids: dict[str, str] = {}
    inst: dict[str, str | None] = {}
    for m in desc.members:
        parts = m.assignment.topic_partitions if m.assignment else []
        members[m.client_id] = {(tp.topic, tp.partition) for tp in parts}
        ids[m.client_id] = m.member_id
        inst[m.client_id] = m.group_instance_id
    return GroupView(desc.state.name, desc.partition_assignor, desc.coordinator.id, members, ids, inst)


def committed_offsets(bootstrap: str, group: str) -> dict[TP, int]:
    """OffsetFetch through confluent-kafka's AdminClient."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10)
    got = res[group].result(15)
    return {(tp.topic, tp.partition): tp.offset for tp in got.topic_partitions if tp.offset >= 0}


def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, replication)], request_timeout=10).values():
        fut.result(15)


def produce(bootstrap: str, topic: str, partitions: int, count: int, start: int = 0,
            pace_s: float = 0.0) -> None:
    """`count` records, round-robin over partitions, values `v<i>` from `start`, `pace_s` apart."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": False})
    errors: list[Any] = []
    for i in range(start, start + count):
        producer.produce(topic, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=i % partitions,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
        if pace_s:
            time.sleep(pace_s)
            producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors


def kafka_conf(client: str, strategy: str | None = None, instance_id: str | None = None) -> dict[str, Any]:
    """Fast group timeouts in each client's spelling."""
    if client == "confluent":
        conf: dict[str, Any] = {"session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
                                "max.poll.interval.ms": MAX_POLL_MS}
        if strategy:
            conf["partition.assignment.strategy"] = strategy
        if instance_id:
            conf["group.instance.id"] = instance_id
        return conf
    return {"session_timeout_ms": SESSION_MS, "heartbeat_interval_ms": HEARTBEAT_MS,
            "max_poll_interval_ms": MAX_POLL_MS}


# ---------------------------------------------------------------- child side
class _Out:
    def __init__(self) -> None:
        self.stop = False

    @staticmethod
    def emit(**ev: Any) -> None:
        sys.stdout.write(json.dumps(ev) + "\n")
        sys.stdout.flush()


def _batch_size(spec: dict[str, Any], total: int) -> int:
    """At most 50 records a batch, and never past `stop_after`."""
    if spec["stop_after"] is None:
        return 50
    return max(1, min(50, spec["stop_after"] - total))


def _note_assignment(out: _Out, assignment: Any, last: list[list[Any]] | None) -> list[list[Any]]:
    """Report the member's assignment when it changed; return it."""
    now = sorted([tp.topic, tp.partition] for tp in assignment)
    if now != last:
        out.emit(ev="assignment", parts=now)
    return now


def _note_records(out: _Out, polled: dict[Any, list[Any]]) -> dict[Any, int]:
    """Report polled records (kafka-python / aiokafka shape); return the offsets to commit."""
    batch = {}
    for tp, recs in polled.items():
        for r in recs:
            out.emit(ev="rec", t=r.topic, p=r.partition, o=r.offset)
            batch[tp] = r.offset + 1
    return batch


def _run_confluent(spec: dict[str, Any], out: _Out) -> None:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    def on_error(err: Any) -> None:
        out.emit(ev="error", code=err.code(), name=err.name(), fatal=err.fatal(), text=err.str())

    conf = {"bootstrap.servers": spec["bootstrap"], "group.id": spec["group"], "client.id": spec["name"],
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "error_cb": on_error,
            **spec["conf"]}
    consumer = Consumer(conf)

    def on_assign(c: Any, parts: list[Any]) -> None:
        out.emit(ev="callback", kind="assign", parts=[[p.topic, p.partition] for p in parts])

    def on_revoke(c: Any, parts: list[Any]) -> None:
        out.emit(ev="callback", kind="revoke", parts=[[p.topic, p.partition] for p in parts])

    def on_lost(c: Any, parts: list[Any]) -> None:
        out.emit(ev="callback", kind="lost", parts=[[p.topic, p.partition] for p in parts])

    consumer.subscribe(spec["topics"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    last: list[list[Any]] | None = None
    total = 0
    try:
        while not out.stop:
            msgs = consumer.consume(_batch_size(spec, total), 0.2)
            last = _note_assignment(out, consumer.assignment(), last)
            batch: dict[tuple[str, int], int] = {}
            for m in msgs:
                if m.error():
                    e = m.error()
                    out.emit(ev="error", code=e.code(), name=e.name(), fatal=e.fatal(), text=e.str())
                    if e.fatal() or e.code() == KafkaError._FATAL:
                        return
                    continue
                out.emit(ev="rec", t=m.topic(), p=m.partition(), o=m.offset())
                batch[(m.topic(), m.partition())] = m.offset() + 1
                total += 1
            if batch and spec["commit"]:
                try:
                    res = consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in batch.items()],
                                          asynchronous=False)
                    bad = [tp for tp in res if tp.error]
                    if bad:
                        out.emit(ev="commit_failed", err=str(bad))
                    else:
                        out.emit(ev="committed", offsets=[[t, p, o] for (t, p), o in batch.items()])
                except Exception as e:  # a failed commit is an event, not the end
                    out.emit(ev="commit_failed", err=str(e))
            if spec["batch_pause_ms"] and msgs:
                time.sleep(spec["batch_pause_ms"] / 1000)
            if spec["stop_after"] is not None and total >= spec["stop_after"]:
                break
    finally:
        try:
            consumer.close()
        except Exception as e:
            if not (hasattr(e, "args") and e.args and isinstance(e.args[0], KafkaError)):
                raise
            out.emit(ev="close_error", text=str(e))
    out.emit(ev="closed")


def _unstick_kafka_python_join(consumer: Any) -> None:
    """Work around a kafka-python 3.0.12 client bug seen in these tests.

    When poll()'s timeout ends while its JoinGroup/SyncGroup is in flight, and the
    join was caused by a metadata-snapshot change (which does not set
    `rejoin_needed`), the finished join is never read: the member stays
    REBALANCING with heartbeats off until the broker expires it, and never
    rejoins. The broker did answer both requests (traced with DEBUG client
    logs). Asking for a rejoin makes the client start a fresh join.
    """
    from kafka.structs import MemberState

    coordinator = getattr(consumer, "_coordinator", None)
    task = getattr(coordinator, "_join_task", None)
    if (coordinator is not None and coordinator.state == MemberState.REBALANCING and task is not None
            and task.is_done and not coordinator.need_rejoin()):
        coordinator.request_rejoin()


def _run_kafka_python(spec: dict[str, Any], out: _Out) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata
    from kafka.errors import KafkaConnectionError

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            out.emit(ev="callback", kind="revoke", parts=[[p.topic, p.partition] for p in revoked])

        def on_partitions_assigned(self, assigned: Any) -> None:
            out.emit(ev="callback", kind="assign", parts=[[p.topic, p.partition] for p in assigned])

    consumer = KafkaConsumer(bootstrap_servers=spec["bootstrap"].split(","), group_id=spec["group"],
                             client_id=spec["name"], auto_offset_reset="earliest",
                             enable_auto_commit=False, **spec["conf"])
    consumer.subscribe(spec["topics"], listener=Listener())
    last: list[list[Any]] | None = None
    total = 0
    try:
        while not out.stop:
            try:
                polled = consumer.poll(timeout_ms=200, max_records=_batch_size(spec, total))
            except KafkaConnectionError as e:
                # kafka-python 3 raises from poll when its coordinator lookup finds no broker to connect to
                # (a broker restarting): an application polls again, as the other clients do by themselves
                out.emit(ev="error", name="KafkaConnectionError", text=str(e))
                time.sleep(0.2)
                continue
            _unstick_kafka_python_join(consumer)
            last = _note_assignment(out, consumer.assignment(), last)
            batch = _note_records(out, polled)
            total += sum(len(recs) for recs in polled.values())
            if batch and spec["commit"]:
                try:
                    consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in batch.items()})
                    out.emit(ev="committed", offsets=[[tp.topic, tp.partition, o] for tp, o in batch.items()])
                except Exception as e:
                    out.emit(ev="commit_failed", err=repr(e))
            if spec["stop_after"] is not None and total >= spec["stop_after"]:
                break
    finally:
        consumer.close()
    out.emit(ev="closed")


def _run_aiokafka(spec: dict[str, Any], out: _Out) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: Any) -> None:
            out.emit(ev="callback", kind="revoke", parts=[[p.topic, p.partition] for p in revoked])

        async def on_partitions_assigned(self, assigned: Any) -> None:
            out.emit(ev="callback", kind="assign", parts=[[p.topic, p.partition] for p in assigned])

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, lambda: setattr(out, "stop", True))
        conf = dict(spec["conf"])
        conf.pop("max_poll_interval_ms", None)
        consumer = AIOKafkaConsumer(bootstrap_servers=spec["bootstrap"], group_id=spec["group"],
                                    client_id=spec["name"], auto_offset_reset="earliest",
                                    enable_auto_commit=False, max_poll_interval_ms=MAX_POLL_MS,
                                    **conf)
        consumer.subscribe(spec["topics"], listener=Listener())
        await consumer.start()
        last: list[list[Any]] | None = None
        total = 0
        try:
            while not out.stop:
                polled = await consumer.getmany(timeout_ms=200, max_records=_batch_size(spec, total))
                last = _note_assignment(out, consumer.assignment(), last)
                batch = _note_records(out, polled)
                total += sum(len(recs) for recs in polled.values())
                if batch and spec["commit"]:
                    try:
                        await consumer.commit(batch)
                        out.emit(ev="committed", offsets=[[tp.topic, tp.partition, o] for tp, o in batch.items()])
                    except Exception as e:
                        out.emit(ev="commit_failed", err=repr(e))
                if spec["stop_after"] is not None and total >= spec["stop_after"]:
                    break
        finally:
            await consumer.stop()
        out.emit(ev="closed")

    asyncio.run(main())


def main() -> None:
    import logging

    # The client's own account of the group protocol, in the member's log file.
    if os.environ.get("SHOAL_MEMBER_LOG"):
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        for name in ("kafka.coordinator", "aiokafka.consumer.group_coordinator"):
            logging.getLogger(name).setLevel(os.environ["SHOAL_MEMBER_LOG"])
    spec = json.loads(sys.argv[1])
    out = _Out()
    signal.signal(signal.SIGTERM, lambda *_: setattr(out, "stop", True))
    runner = {"confluent": _run_confluent, "kafka-python": _run_kafka_python,
              "aiokafka": _run_aiokafka}[spec["client"]]
    runner(spec, out)


if __name__ == "__main__":
    main()
