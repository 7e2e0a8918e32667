"""The reference harness itself: Kafka from Maven starts, answers, fails loudly and stops."""

from __future__ import annotations

import socket

import pytest
from confluent_kafka import Consumer, Producer

from tests.reference import apache_kafka
from tests.reference.apache_kafka import KafkaCluster, KafkaError


def test_kafka_4_and_3_9_answer_api_versions(kafka_broker, kafka39_broker):
    from shoal.tools.wire import ToolClient

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


def test_a_port_clash_names_its_cause_and_keeps_the_log(tmp_path, monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    real = apache_kafka._free_ports
    monkeypatch.setattr(apache_kafka, "_free_ports", lambda n: [port, *real(n - 1)])
    cluster = KafkaCluster("4", 1, tmp_path / "k")
    try:
        with pytest.raises(KafkaError, match=r"(BindException|Address already in use).*log: .*server.log"):
            cluster.start(timeout=60)
        assert cluster.log_path(1).exists()
        assert not cluster._procs  # nothing left running
    finally:
        taken.close()
        cluster.stop()


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
