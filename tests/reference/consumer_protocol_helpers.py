"""Real KIP-848 clients (``group.protocol=consumer``) as child processes, for tests/reference/
test_consumer_protocol_clients.py: Kafka's Java client 4.4, franz-go and librdkafka.

Each member is a driver program in tests/reference/clients/ (GroupMember.java, franzgo/main.go,
rdkafka_member.py) that prints one JSON line per event: its assignment after every change (with the
member epoch where the client exposes it), every record it returned (partition, offset, value), every
synchronous commit. A member leaves cleanly when its standard input closes; ``kill()`` crashes it.

The Java class is compiled with javac into a temporary folder per session; the Go program is built once
into ``~/.cache/shoal/go/bin`` (keyed by a hash of its sources, module cache beside it) and reused.
Every child dies with the test process (PR_SET_PDEATHSIG), and every wait is bounded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.builds import build_go, die_with_parent, javac

CLIENTS_DIR = Path(__file__).parent / "clients"

# Fast group timers, the same on both brokers (Kafka's bounds allow them once the minimums are lowered).
FAST_GROUPS = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "6000",
}


# ------------------------------------------------------------------ building the drivers
def compile_java(lib: Path, out: Path) -> Path:
    """javac GroupMember.java against Kafka's jars into ``out``; returns ``out``."""
    return javac([CLIENTS_DIR / "GroupMember.java"], lib, out)


def build_franzgo() -> Path:
    """``go build`` the franz-go member once (cached by a hash of its sources); the binary's path."""
    return build_go(CLIENTS_DIR / "franzgo", "franzgo-member")


class Drivers:
    """Where the built drivers are: the command line for a member of each client."""

    def __init__(self, kafka_lib: Path, java_classes: Path, franzgo: Path) -> None:
        self.kafka_lib = kafka_lib
        self.java_classes = java_classes
        self.franzgo = franzgo

    def command(self, client: str, bootstrap: str, group: str, topic: str,
                instance: str | None = None, props: tuple[str, ...] = ()) -> list[str]:
        """``props``: more ``key=value`` client settings (Java and librdkafka members)."""
        if client == "java":
            extra = [f"group.instance.id={instance}"] if instance else []
            return ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    "-cp", f"{self.kafka_lib}/*:{self.java_classes}", "GroupMember", bootstrap, group, topic, *extra,
                    *props]
        if client == "franz-go":
            extra = ["-instance", instance] if instance else []
            return [str(self.franzgo), "-brokers", bootstrap, "-group", group, "-topic", topic, *extra]
        if client == "librdkafka":
            extra = [f"group.instance.id={instance}"] if instance else []
            return [sys.executable, str(CLIENTS_DIR / "rdkafka_member.py"), bootstrap, group, topic, *extra, *props]
        raise ValueError(client)


# ------------------------------------------------------------------ a member
class Member:
    """One driver process and what it printed so far (read by a thread)."""

    def __init__(self, name: str, client: str, cmd: list[str], log_dir: Path) -> None:
        self.name = name
        self.client = client
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.log_path = log_dir / f"{name}.stderr"
        with open(self.log_path, "ab") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         preexec_fn=die_with_parent)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                event = {"ev": "garbage", "line": raw.decode(errors="replace")}
            event["t"] = time.monotonic()
            with self.lock:
                self.events.append(event)

    # -- what it saw
    def of(self, *kinds: str) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if e["ev"] in kinds]

    @property
    def owned(self) -> set[int]:
        changes = self.of("assigned", "revoked", "lost")
        return set(changes[-1]["owned"]) if changes else set()

    @property
    def tps(self) -> set[str]:
        """The whole assignment as ``topic:partition``."""
        changes = self.of("assigned", "revoked", "lost")
        return set(changes[-1].get("tps", [])) if changes else set()

    @property
    def records(self) -> list[tuple[int, int]]:
        return [(e["p"], e["o"]) for e in self.of("rec")]

    @property
    def values(self) -> list[str]:
        return [e["v"] for e in self.of("rec")]

    @property
    def committed(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for e in self.of("committed"):
            for p, o in e["offsets"].items():
                out[int(p)] = max(out.get(int(p), 0), o)
        return out

    @property
    def epochs(self) -> list[int]:
        return [e["epoch"] for e in self.of("assigned", "revoked", "lost") if "epoch" in e]

    @property
    def errors(self) -> list[dict[str, Any]]:
        return self.of("error", "garbage")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def summary(self) -> str:
        changes = [(e["ev"], e["parts"], e.get("epoch")) for e in self.of("assigned", "revoked", "lost")]
        ended = "" if self.alive else (f", exit={self.proc.returncode}, killed={self.of('killed')}, "
                                       f"stderr={self.stderr_tail()!r}")
        return (f"{self.name}({self.client}, alive={self.alive}, owned={sorted(self.owned)}, "
                f"records={len(self.records)}, changes={changes}, errors={self.errors[-3:]}, "
                f"commit_failed={len(self.of('commit_failed'))}{ended})")

    def stderr_tail(self, chars: int = 600) -> str:
        """The end of what the process wrote on standard error (how a member that died says why)."""
        try:
            return self.log_path.read_bytes()[-chars:].decode(errors="replace")
        except OSError:
            return ""

    # -- ending it
    def stop(self, timeout: float = 45.0) -> None:
        """Close standard input: the member closes its consumer (leaves the group) and exits (a loaded
        machine has seen a librdkafka member's close take past 20 s)."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with self.lock:
                    self.events.append({"ev": "killed", "why": f"still running {timeout} s after its stdin closed"})
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self._reader.join(5)


class Members:
    """Starts members; stops every one of them at the end of the test."""

    def __init__(self, drivers: Drivers, log_dir: Path) -> None:
        self.drivers = drivers
        self.log_dir = log_dir
        self.started: list[Member] = []

    def start(self, name: str, client: str, bootstrap: str, group: str, topic: str,
              instance: str | None = None, props: tuple[str, ...] = ()) -> Member:
        m = Member(name, client, self.drivers.command(client, bootstrap, group, topic, instance, props),
                   self.log_dir)
        self.started.append(m)
        return m

    def close(self) -> None:
        for m in self.started:
            if m.proc.poll() is None and m.proc.stdin is not None:
                try:
                    m.proc.stdin.close()
                except OSError:
                    pass
        for m in self.started:
            m.stop(timeout=10)


# ------------------------------------------------------------------ topics, records, waits
def create_topic(bootstrap: str, topic: str, partitions: int, replication: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication)], request_timeout=15)[topic].result(30)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str) -> set[str]:
    """``per_partition`` records into every partition, valued ``tag-partition-i``; the values."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    failures: list[Any] = []
    values = set()
    for part in range(partitions):
        for i in range(per_partition):
            v = f"{tag}-{part}-{i}"
            values.add(v)
            p.produce(topic, v.encode(), partition=part,
                      on_delivery=lambda err, _msg: failures.append(err) if err else None)
    left = p.flush(30)
    assert left == 0 and not failures, f"produce: {left} undelivered, errors {failures[:3]}"
    return values


def coordinator_of(bootstrap: str, group: str) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(15).coordinator.id


def committed_offsets(bootstrap: str, group: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10)
    return {tp.partition: tp.offset for tp in res[group].result(15).topic_partitions if tp.offset >= 0}


def wait_until(check: Callable[[], Any], timeout: float, what: str,
               detail: Callable[[], Any] | None = None, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as e:  # the cluster may be moving: keep polling
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    more = f"; {detail()}" if detail is not None else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}{more}")


def exact_cover(members: Iterable[Member], partitions: int, every_member: bool = True) -> bool:
    """Each partition owned by exactly one of ``members`` (and, with ``every_member``, none empty-handed)."""
    owned = [m.owned for m in members]
    flat = [p for o in owned for p in o]
    return (sorted(flat) == list(range(partitions))) and (not every_member or all(owned))


def overlaps(members: Iterable[Member]) -> dict[int, list[str]]:
    """Partitions that more than one member claims right now."""
    seen: dict[int, list[str]] = {}
    for m in members:
        for p in m.owned:
            seen.setdefault(p, []).append(m.name)
    return {p: names for p, names in seen.items() if len(names) > 1}


def duplicates(members: Iterable[Member]) -> list[tuple[int, int]]:
    counts: dict[tuple[int, int], int] = {}
    for m in members:
        for r in m.records:
            counts[r] = counts.get(r, 0) + 1
    return sorted(r for r, n in counts.items() if n > 1)


def consumed_values(members: Iterable[Member]) -> set[str]:
    return {v for m in members for v in m.values}


def unconfirmed(m: Member) -> set[tuple[int, int]]:
    """Records of the batches whose synchronous commit failed (or never came): they may come again."""
    out: set[tuple[int, int]] = set()
    batch: list[tuple[int, int]] = []
    with m.lock:
        events = list(m.events)
    for e in events:
        if e["ev"] == "rec":
            batch.append((e["p"], e["o"]))
        elif e["ev"] == "committed":
            batch = []
        elif e["ev"] == "commit_failed":
            out.update(batch)
            batch = []
    out.update(batch)
    return out
