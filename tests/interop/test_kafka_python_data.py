"""kafka-python 3 producer + assign/seek consumer against shoal, every codec."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from tests.interop.dataset import CODECS, Rec, assert_same, make_records


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, recs: list[Rec], codec: str, acks) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=5,
                             compression_type=None if codec == "none" else codec)
    try:
        futures = [producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                 timestamp_ms=r.timestamp, headers=list(r.headers)) for r in recs]
        producer.flush(30)
        for f in futures:
            f.get(30)
    finally:
        producer.close(10)


def consume(bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 30) -> list[Rec]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             max_partition_fetch_bytes=64 * 1024, fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                for m in msgs:
                    got.append(Rec(tp.partition, m.key, m.value,
                                   tuple((k, v) for k, v in m.headers), m.timestamp))
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_round_trip(shoal_cluster, codec):
    topic = f"kp-{codec}"
    create_topic(shoal_cluster.bootstrap, topic, 3)
    recs = make_records(null_header_values=False)
    produce(shoal_cluster.bootstrap, topic, recs, codec, acks="all" if codec == "gzip" else 1)
    assert_same(recs, consume(shoal_cluster.bootstrap, topic, 3, len(recs)))


def test_kafka_python_data_survives_restart(shoal):
    recs = make_records(null_header_values=False)
    create_topic(shoal.bootstrap, "kp-restart", 3)
    produce(shoal.bootstrap, "kp-restart", recs, "lz4", acks=1)
    shoal.restart()
    assert_same(recs, consume(shoal.bootstrap, "kp-restart", 3, len(recs)))


def test_kafka_python_data_survives_kill9_with_flush_per_message(shoal_factory):
    broker = shoal_factory(overrides={"log.flush.interval.messages": "1"})
    recs = make_records(null_header_values=False)
    create_topic(broker.bootstrap, "kp-kill", 3)
    produce(broker.bootstrap, "kp-kill", recs, "zstd", acks="all")
    broker.kill9()
    broker.start()
    assert_same(recs, consume(broker.bootstrap, "kp-kill", 3, len(recs)))
