"""A user's test file: it only asks for the plugin's fixtures (nothing imported from shoal) and talks
to the broker with three client libraries. Run by tests/interop/test_pytest_plugin.py in a fresh
pytest process, as a user's suite would run."""

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer


def test_confluent_kafka(shoal_bootstrap, shoal_topic):
    p = Producer({"bootstrap.servers": shoal_bootstrap})
    for i in range(10):
        p.produce(shoal_topic, b"m%d" % i)
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": shoal_bootstrap, "group.id": "g-confluent", "auto.offset.reset": "earliest"})
    c.subscribe([shoal_topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"m%d" % i for i in range(10)]


def test_kafka_python(shoal_bootstrap, shoal_topic):
    p = KafkaProducer(bootstrap_servers=shoal_bootstrap)
    p.send(shoal_topic, b"hello").get(10)
    p.close()
    c = KafkaConsumer(shoal_topic, bootstrap_servers=shoal_bootstrap, group_id="g-kp", auto_offset_reset="earliest",
                      consumer_timeout_ms=15000)
    assert [m.value for m in c][:1] == [b"hello"]
    c.close()


def test_aiokafka(shoal_bootstrap, shoal_topic):
    async def go():
        p = AIOKafkaProducer(bootstrap_servers=shoal_bootstrap)
        await p.start()
        await p.send_and_wait(shoal_topic, b"async")
        await p.stop()
        c = AIOKafkaConsumer(shoal_topic, bootstrap_servers=shoal_bootstrap, group_id="g-aio",
                             auto_offset_reset="earliest")
        await c.start()
        try:
            m = await asyncio.wait_for(c.getone(), 20)
        finally:
            await c.stop()
        return m.value

    assert asyncio.run(go()) == b"async"


@pytest.mark.shoal_topic(partitions=3, config={"cleanup.policy": "compact"})
def test_marked_topic(shoal_bootstrap, shoal_topic):
    md = AdminClient({"bootstrap.servers": shoal_bootstrap}).list_topics(shoal_topic, timeout=10)
    assert len(md.topics[shoal_topic].partitions) == 3


def test_each_test_has_its_own_topic(shoal_topic, request):
    assert shoal_topic.startswith("test_each_test_has_its_own_topic-")


def test_broker_restart_keeps_data(shoal_broker, shoal_topic):
    p = Producer({"bootstrap.servers": shoal_broker.bootstrap_servers})
    p.produce(shoal_topic, b"kept")
    assert p.flush(10) == 0
    shoal_broker.restart()
    c = Consumer({"bootstrap.servers": shoal_broker.bootstrap_servers, "group.id": "g-restart",
                  "auto.offset.reset": "earliest"})
    c.subscribe([shoal_topic])
    deadline = time.monotonic() + 30
    m = None
    while m is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error():
            m = None
    c.close()
    assert m is not None and m.value() == b"kept"
