"""The Prometheus endpoint scraped during a produce / consume / group workload: the numbers match
what the clients did. And /health, /ready (503 while a node is down), 404s, and a scraper that sends
garbage cannot hurt the broker."""

from __future__ import annotations

import re
import socket
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.ports import free_port

pytestmark = pytest.mark.timeout(120)


def scrape(port: int) -> dict[str, float]:
    """name{labels} -> value (histogram buckets left out)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or "_bucket{" in line or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def status(port: int, path: str) -> int:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code


def test_metrics_follow_a_workload(shoal_factory):
    port = free_port()
    broker = shoal_factory(overrides={"metrics.port": str(port)})
    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("m", 2, 1)])["m"].result(15)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(100):
        p.produce("m", b"x" * 50, key=b"%d" % i, partition=i % 2)
    assert p.flush(15) == 0
    m = scrape(port)
    assert m['kafka_server_brokertopicmetrics_messagesin_total{topic="m"}'] == 100
    size = m['kafka_log_log_size{topic="m",partition="0"}'] + m['kafka_log_log_size{topic="m",partition="1"}']
    assert m['kafka_server_brokertopicmetrics_bytesin_total{topic="m"}'] == size > 100 * 50
    assert m['kafka_log_log_logendoffset{topic="m",partition="0"}'] == 50
    produces = sum(v for k, v in m.items() if k.startswith('kafka_network_requestmetrics_requests_total{request="Produce"'))
    assert produces == m['kafka_server_brokertopicmetrics_totalproducerequests_total{topic="m"}'] >= 1
    assert m['kafka_network_requestmetrics_totaltimems_count{request="Produce"}'] == produces

    c = Consumer({"bootstrap.servers": bs, "group.id": "watched", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["m"])
    got = 0
    deadline = time.monotonic() + 30
    while got < 60 and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
    c.commit(offsets=[TopicPartition("m", 0, 30), TopicPartition("m", 1, 20)], asynchronous=False)
    m = scrape(port)
    assert m["kafka_coordinator_group_groupmetadatamanager_numgroupsstable"] == 1
    assert m["kafka_server_group_coordinator_metrics_group_completed_rebalance_count"] >= 1
    assert m['kafka_consumergroup_current_offset{consumergroup="watched",topic="m",partition="0"}'] == 30
    assert m['kafka_consumergroup_lag{consumergroup="watched",topic="m",partition="0"}'] == 20
    assert m['kafka_consumergroup_lag{consumergroup="watched",topic="m",partition="1"}'] == 30
    assert m['kafka_server_brokertopicmetrics_bytesout_total{topic="m"}'] >= size  # everything was fetched
    c.close()
    m = scrape(port)
    assert m["kafka_coordinator_group_groupmetadatamanager_numgroupsstable"] == 0
    assert m["kafka_coordinator_group_groupmetadatamanager_numgroupsempty"] == 1
    assert m['kafka_server_kafkaserver_brokerstate{node="0"}'] == 3


def test_health_ready_and_bad_requests(shoal_factory):
    port = free_port()
    broker = shoal_factory(nodes=2, overrides={"metrics.port": str(port)})
    assert status(port, "/health") == 200 and status(port, "/ready") == 200
    assert status(port, "/nope") == 404
    broker.command("stop-node 1")
    assert status(port, "/ready") == 503 and status(port, "/health") == 200
    assert scrape(port)['kafka_server_kafkaserver_brokerstate{node="1"}'] == 0
    broker.command("start-node 1")
    assert status(port, "/ready") == 200
    for junk in (b"\x00\x01garbage\r\n\r\n", b"POST /metrics HTTP/1.1\r\n\r\n", b"GET", b"x" * 100_000):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(junk)
            s.shutdown(socket.SHUT_WR)
            reply = s.recv(200)
            assert reply == b"" or re.match(rb"HTTP/1.1 (400|405) ", reply)
    assert status(port, "/metrics") == 200  # still serving
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("after", b"1")
    assert p.flush(15) == 0  # and so is the broker


def test_share_group_metrics(shoal_factory):
    """A confluent-kafka ShareConsumer's records show as acquired and lagging, then as consumed."""
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    port = free_port()
    broker = shoal_factory(overrides={"metrics.port": str(port)})
    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("sq", 1, 1)])["sq"].result(15)
    res = ConfigResource("group", "sgm", incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(15)
    p = Producer({"bootstrap.servers": bs})
    for i in range(10):
        p.produce("sq", value=f"{i}".encode())
    p.flush(15)
    consumer = ShareConsumer({"bootstrap.servers": bs, "group.id": "sgm", "share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["sq"])
    labels = '{group="sgm",topic="sq",partition="0"}'
    try:
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            got.extend(m for m in consumer.poll(1.0) if m.error() is None)
        assert len(got) == 10
        m = scrape(port)
        assert m["kafka_server_sharepartitionmetrics_acquiredmessagecount" + labels] == 10
        assert m["kafka_sharegroup_lag" + labels] == 10
        assert m['kafka_server_group_coordinator_metrics_share_group_count{state="Stable"}'] == 1
        for msg in got:
            consumer.acknowledge(msg)
        consumer.commit_sync()
        m = scrape(port)
        assert m["kafka_sharegroup_lag" + labels] == 0
        assert m["kafka_sharegroup_start_offset" + labels] == 10
        assert m["kafka_server_sharepartitionmetrics_inflightmessagecount" + labels] == 0
    finally:
        consumer.close()
