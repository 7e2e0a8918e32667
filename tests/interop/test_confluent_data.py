"""confluent-kafka (librdkafka) producer + assign consumer against shoal, every codec."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.interop.dataset import CODECS, Rec, assert_same, make_records


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1)], request_timeout=10).values():
        fut.result(15)


def produce(bootstrap: str, topic: str, recs: list[Rec], codec: str, acks: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "acks": acks,
                         "linger.ms": 5})
    errors: list = []
    for r in recs:
        producer.produce(topic, value=r.value, key=r.key, partition=r.partition, timestamp=r.timestamp,
                         headers=list(r.headers),
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0
    assert not errors, errors


def consume(bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 30) -> list[Rec]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "max.partition.fetch.bytes": 65536})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            got.append(Rec(msg.partition(), msg.key(), msg.value(), tuple(msg.headers() or ()),
                           msg.timestamp()[1]))
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_round_trip(shoal_cluster, codec):
    topic = f"ck-{codec}"
    create_topic(shoal_cluster.bootstrap, topic, 3)
    recs = make_records()
    produce(shoal_cluster.bootstrap, topic, recs, codec, "all" if codec == "zstd" else "1")
    assert_same(recs, consume(shoal_cluster.bootstrap, topic, 3, len(recs)))


def test_confluent_data_survives_kill9_with_flush_per_message(shoal_factory):
    broker = shoal_factory(overrides={"log.flush.interval.messages": "1"})
    create_topic(broker.bootstrap, "ck-kill", 3)
    recs = make_records()
    produce(broker.bootstrap, "ck-kill", recs, "snappy", "all")
    broker.kill9()
    broker.start()
    assert_same(recs, consume(broker.bootstrap, "ck-kill", 3, len(recs)))
