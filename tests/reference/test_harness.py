"""The reference harness itself: Kafka from Maven starts, answers, fails loudly and stops."""

from __future__ import annotations

import socket

import pytest
from confluent_kafka import Consumer, Producer

from shoal.tools.wire import ToolClient
from tests.ports import free_ports
from tests.reference import apache_kafka
from tests.reference.apache_kafka import KafkaCluster, KafkaError


def test_kafka_4_and_3_9_answer_api_versions(kafka_broker, kafka39_broker):
    assert kafka_broker.version.startswith("4.")
    assert kafka39_broker.version.startswith("3.9.")
    for cluster in (kafka_broker, kafka39_broker):
        with ToolClient(cluster.bootstrap_servers) as client:
            assert client.all_nodes() == [1]
            assert client._any.api_versions[0][1] >= 9  # Produce


def test_the_same_round_trip_on_either_broker(either_broker):
    topic = f"harness-{either_broker.kind}"
    p = Producer({"bootstrap.servers": either_broker.bootstrap_servers})
    for i in range(10):
        p.produce(topic, f"v{i}".encode(), key=b"k")
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": either_broker.bootstrap_servers, "group.id": topic,
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        got = []
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
            if len(got) == 10:
                break
        assert got == [f"v{i}".encode() for i in range(10)]
    finally:
        c.close()


@pytest.fixture
def taken_port():
    """A loopback port some other socket listens on, for as long as the test runs."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def test_a_port_taken_on_every_attempt_names_its_cause_and_keeps_the_logs(tmp_path, monkeypatch, taken_port):
    real = apache_kafka._free_ports
    monkeypatch.setattr(apache_kafka, "_free_ports", lambda n: [taken_port, *real(n - 1)])
    cluster = KafkaCluster("4", 1, tmp_path / "k")
    try:
        with pytest.raises(KafkaError, match=r"(BindException|Address already in use).*log: .*server.log"):
            cluster.start(timeout=60)
        assert cluster.log_path(1).exists()
        for attempt in range(1, apache_kafka.PORT_ATTEMPTS):
            assert "BindException" in (tmp_path / "k" / f"port-clash-{attempt}" / "node-1" / "server.log").read_text()
        assert not cluster._procs  # nothing left running
    finally:
        cluster.stop()


def test_a_port_taken_before_kafka_binds_it_is_retried_on_new_ports(tmp_path, monkeypatch, taken_port):
    # what a CI run hit: a port free when chosen, taken by someone else before the JVM bound it
    real = apache_kafka._free_ports
    calls: list[int] = []

    def first_clashes(n: int) -> list[int]:
        calls.append(n)
        return [taken_port, *real(n - 1)] if len(calls) == 1 else real(n)

    monkeypatch.setattr(apache_kafka, "_free_ports", first_clashes)
    cluster = KafkaCluster("4", 1, tmp_path / "k")
    try:
        cluster.start(timeout=60)
        assert len(calls) == 2 and cluster.ports[1] != taken_port
        assert "BindException" in (tmp_path / "k" / "port-clash-1" / "node-1" / "server.log").read_text()
        with ToolClient(cluster.bootstrap_servers, timeout=10) as client:
            assert len(client.all_nodes()) == 1
    finally:
        cluster.stop()


def test_free_ports_are_distinct_bindable_and_outside_the_ephemeral_range():
    low, high = (int(x) for x in open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    ports = free_ports(20)
    assert len(set(ports)) == 20
    for port in ports:
        assert not low <= port <= high
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_bad_setting_fails_the_start_with_kafkas_reason(tmp_path):
    cluster = KafkaCluster("4", 1, tmp_path / "k", overrides={"log.retention.ms": "forever"})
    with pytest.raises(KafkaError, match="log.retention.ms"):
        cluster.start(timeout=60)
    assert not cluster._procs


def test_a_version_maven_cannot_fetch_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_KAFKA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(apache_kafka.LINES, "0.0", ("0.0.1",))
    with pytest.raises(KafkaError, match=r"Maven could not fetch Apache Kafka 0.0.x .*0.0.1") as e:
        apache_kafka.fetch("0.0")
    assert "\n" not in str(e.value)


def test_a_three_node_kafka_replicates_and_stops_whole(kafka_factory):
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = kafka_factory(nodes=3)
    assert len(cluster.bootstrap_servers.split(",")) == 3
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for f in admin.create_topics([NewTopic("rf3", 3, 3)]).values():
        f.result(30)
    meta = admin.list_topics("rf3", timeout=10)
    assert sorted(meta.brokers) == [1, 2, 3]
    assert all(sorted(p.replicas) == [1, 2, 3] for p in meta.topics["rf3"].partitions.values())
    procs = list(cluster._procs.values())
    cluster.stop()
    assert all(p.poll() is not None for p in procs)
