"""shoal.testing.broker(): in this process and as a subprocess; node faults, restarts (clean, and
SIGKILL for the subprocess) keep acknowledged data and addresses; the asyncio form; clean-up."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from shoal.testing import BrokerProcess, EmbeddedBroker, async_broker, broker

pytestmark = pytest.mark.timeout(180)


def produce(bs: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    for v in values:
        p.produce(topic, v)
    assert p.flush(20) == 0


def consume(bs: str, topic: str, n: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{topic}-{time.monotonic()}",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return got


def test_embedded_broker_properties_faults_restart_and_cleanup():
    with broker(nodes=3, num_partitions=3, properties={"default.replication.factor": "3"}) as b:
        assert isinstance(b, EmbeddedBroker) and len(b.node_ids) == 3
        data_dir = b.data_dir
        assert data_dir is not None and data_dir.exists()
        bootstrap = b.bootstrap_servers
        produce(bootstrap, "t", [b"a", b"b"])
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("t", timeout=10)
        assert len(md.topics["t"].partitions) == 3  # num_partitions=3 reached the broker
        b.stop_node(b.node_ids[0])  # replicas elsewhere take over
        produce(bootstrap, "t", [b"c"])
        b.start_node(b.node_ids[0])
        b.restart()
        assert b.bootstrap_servers == bootstrap  # same addresses after a restart
        assert sorted(consume(bootstrap, "t", 3)) == [b"a", b"b", b"c"]
        with pytest.raises(ValueError, match="no node 99"):
            b.stop_node(99)
    assert not data_dir.exists()  # a temporary folder, removed on exit


def test_given_data_dir_is_kept(tmp_path):
    with broker(data_dir=tmp_path / "d") as b:
        produce(b.bootstrap_servers, "kept", [b"x"])
    assert (tmp_path / "d").exists()
    with broker(data_dir=tmp_path / "d") as b:
        assert consume(b.bootstrap_servers, "kept", 1) == [b"x"]


def test_subprocess_mode_survives_sigkill():
    with broker(nodes=3, mode="subprocess", log_flush_interval_messages=1) as b:
        assert isinstance(b, BrokerProcess)
        bootstrap = b.bootstrap_servers
        produce(b.bootstrap_servers, "crash", [b"1", b"2"])
        b.restart(hard=True)  # SIGKILL, then start on the same data and ports
        assert b.bootstrap_servers == bootstrap  # every node, not only the first
        assert consume(b.bootstrap_servers, "crash", 2) == [b"1", b"2"]


def test_async_broker():
    async def go() -> list[bytes]:
        async with async_broker(nodes=2) as b:
            await asyncio.to_thread(produce, b.bootstrap_servers, "a", [b"q"])
            await b.stop_node_async(b.node_ids[1])
            await b.start_node_async(b.node_ids[1])
            await b.restart_async()
            return await asyncio.to_thread(consume, b.bootstrap_servers, "a", 1)

    assert asyncio.run(go()) == [b"q"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="mode must be"):
        with broker(mode="docker"):
            pass
    with pytest.raises(ValueError, match="nodes must be at least 1"):
        EmbeddedBroker(nodes=0)
    with pytest.raises(RuntimeError, match="not started"):
        _ = EmbeddedBroker().bootstrap_servers
