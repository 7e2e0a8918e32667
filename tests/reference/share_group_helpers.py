"""Real share group clients (KIP-932) as child processes, for tests/reference/test_share_group_clients.py:
Kafka's Java client 4.4 (``KafkaShareConsumer``, tests/reference/clients/ShareMember.java) and librdkafka
(confluent-kafka's ``ShareConsumer``, tests/reference/clients/rdkafka_share_member.py).

Each member prints one JSON line per event (``rec`` with the delivery count ``dc``, ``acked``, ``committed``,
...); the process handling (``Member``: a reader thread, ``stop()`` closes standard input, ``kill()`` is
SIGKILL; every child dies with the test process) and the bounded waits are the consumer protocol tests'
(consumer_protocol_helpers), imported here.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.builds import javac
from tests.reference.consumer_protocol_helpers import CLIENTS_DIR, Member

# Broker settings both brokers run the share group tests with: short record locks and fast heartbeats
# allowed (Kafka's minimums are 15 s and 5 s), and a one-node share-group state topic.
SHARE_BROKER_OVERRIDES = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.session.timeout.ms": "10000",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}


def compile_share_java(lib: Path, out: Path) -> Path:
    """javac ShareMember.java against Kafka's jars into ``out``; returns ``out``."""
    javac([CLIENTS_DIR / "ShareMember.java"], lib, out)
    # The client's own log (WARN and up) on standard error, kept beside the test: stdout is the JSON lines.
    (out / "log4j2.properties").write_text(
        "rootLogger.level=WARN\nrootLogger.appenderRef.e.ref=E\nappender.e.type=Console\nappender.e.name=E\n"
        "appender.e.target=SYSTEM_ERR\nappender.e.layout.type=PatternLayout\n"
        "appender.e.layout.pattern=%d %p [%t] %m (%c)%n\n")
    return out


class ShareDrivers:
    """The command line of a share member of each client kind."""

    def __init__(self, kafka_lib: Path, java_classes: Path) -> None:
        self.kafka_lib = kafka_lib
        self.java_classes = java_classes

    def command(self, client: str, bootstrap: str, group: str, topic: str, props: dict[str, str]) -> list[str]:
        extra = [f"{k}={v}" for k, v in props.items()]
        if client == "java":
            return ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    f"-Dlog4j2.configurationFile={self.java_classes / 'log4j2.properties'}", "-cp", f"{self.kafka_lib}/*:{self.java_classes}", "ShareMember", bootstrap, group, topic, *extra]
        if client == "rdkafka":
            return [sys.executable, str(CLIENTS_DIR / "rdkafka_share_member.py"), bootstrap, group, topic, *extra]
        raise ValueError(client)


class ShareMembers:
    """Starts share members; stops every one of them at the end of the test."""

    def __init__(self, drivers: ShareDrivers, log_dir: Path) -> None:
        self.drivers = drivers
        self.log_dir = log_dir
        self.started: list[Member] = []

    def start(self, name: str, client: str, bootstrap: str, group: str, topic: str,
              mode: str = "implicit", **props: Any) -> Member:
        settings = {"share.acknowledgement.mode": mode, **{k.replace("_", "."): str(v) for k, v in props.items()}}
        m = Member(name, client, self.drivers.command(client, bootstrap, group, topic, settings), self.log_dir)
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
            m.stop(timeout=15)


# ------------------------------------------------------------------ the group's configs
def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs (SET) on the GROUP resource ``group``."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource("group", group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    for fut in admin.incremental_alter_configs([res], request_timeout=15).values():
        fut.result(30)


def group_configs(bootstrap: str, group: str) -> dict[str, str]:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource("group", group)
    return {k: e.value for k, e in admin.describe_configs([res], request_timeout=15)[res].result(30).items()}


def produce_values(bootstrap: str, topic: str, values: Iterable[str], partition: int = 0,
                   one_batch_each: bool = False) -> list[str]:
    """Write ``values`` in order to one partition; ``one_batch_each`` flushes after every record (no
    batching, so a broker that acquires whole batches cannot hand one member everything at once)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0 if one_batch_each else 5, "acks": "all"})
    failures: list[Any] = []
    out = []
    for v in values:
        p.produce(topic, v.encode(), partition=partition,
                  on_delivery=lambda err, _m: failures.append(err) if err else None)
        out.append(v)
        if one_batch_each:
            p.flush(10)
    left = p.flush(30)
    assert left == 0 and not failures, f"produce: {left} undelivered, errors {failures[:3]}"
    return out


# ------------------------------------------------------------------ what the members saw
def recs(members: Iterable[Member]) -> list[dict[str, Any]]:
    return [e | {"member": m.name} for m in members for e in m.of("rec")]


def deliveries(members: Iterable[Member]) -> Counter[str]:
    """How many times each value was delivered, over all ``members``."""
    return Counter(e["v"] for e in recs(members))


def client_errors(m: Member) -> list[str]:
    """ERROR lines of the client's own log (its standard error)."""
    try:
        text = m.log_path.read_text(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if " ERROR " in line or line.startswith("%3|")]


def share_summary(m: Member) -> str:
    got = m.of("rec")
    return (f"{m.name}({m.client}, alive={m.alive}, records={len(got)}, "
            f"values={[(e['v'], e.get('dc')) for e in got][:8]}{'...' if len(got) > 8 else ''}, "
            f"acked={len(m.of('acked'))}, committed={len(m.of('committed'))}, "
            f"commit_failed={m.of('commit_failed')[-2:]}, errors={m.errors[-3:]})")
