"""Clients speaking old protocol versions, as Kafka 3.9 served them: kafka-python pinned to
api_version 0.9 / 0.10.0 / 0.10.1 / 0.11 produces message sets (Produce v0-v2, magic 0/1,
compressed wrapper messages), fetches them down-converted (Fetch v0-v3), finds offsets with
ListOffsets v0/v1 and runs a consumer group with committed offsets."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

# kafka-python needs the xxhash package to write magic-0 LZ4 (the 0.8/0.9 framing): not installed
CODECS = {(0, 9): [None, "gzip", "snappy"], (0, 10, 0): [None, "gzip", "snappy", "lz4"],
          (0, 10, 1): [None, "gzip", "snappy", "lz4"], (0, 11): [None, "gzip", "snappy", "lz4"]}


@pytest.mark.parametrize("api", list(CODECS), ids=lambda a: ".".join(map(str, a)))
def test_old_protocol_versions_round_trip(shoal, api):
    bs = shoal.bootstrap
    topic = "legacy-" + "-".join(map(str, api))
    sent = []
    for codec in CODECS[api]:
        p = KafkaProducer(bootstrap_servers=bs, api_version=api, compression_type=codec)
        try:
            for i in range(5):
                value = f"{codec}-{i}".encode()
                md = p.send(topic, key=b"k%d" % i, value=value).get(15)
                assert md.partition == 0
                sent.append(value)
        finally:
            p.close()
    c = KafkaConsumer(bootstrap_servers=bs, api_version=api, group_id=f"g-{topic}", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        c.subscribe([topic])
        got = []
        for m in c:
            got.append((m.offset, m.key, m.value))
            if len(got) == len(sent):
                break
        assert [v for _, _, v in got] == sent
        assert [o for o, _, _ in got] == list(range(len(sent)))
        assert [k for _, k, _ in got] == [b"k%d" % (i % 5) for i in range(len(sent))]
        c.commit()
        tp = TopicPartition(topic, 0)
        assert c.committed(tp) == len(sent)
        assert c.end_offsets([tp])[tp] == len(sent)
        assert c.beginning_offsets([tp])[tp] == 0
    finally:
        c.close()


def test_kafka_0_8_2_protocol(shoal):
    """api_version 0.8.2: Produce v0, Fetch v0, ListOffsets v0, FindCoordinator v0 and offsets
    committed with OffsetCommit v1 (no group membership existed yet)."""
    bs = shoal.bootstrap
    sent = []
    for codec in (None, "gzip", "snappy"):
        p = KafkaProducer(bootstrap_servers=bs, api_version=(0, 8, 2), compression_type=codec)
        try:
            for i in range(3):
                value = f"{codec}-{i}".encode()
                p.send("old082", key=b"k", value=value).get(15)
                sent.append(value)
        finally:
            p.close()
    c = KafkaConsumer(bootstrap_servers=bs, api_version=(0, 8, 2), group_id="g082", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        tp = TopicPartition("old082", 0)
        c.assign([tp])
        assert [m.value for m in c] == sent
        c.commit()
        assert c.committed(tp) == len(sent)
    finally:
        c.close()


def test_old_and_new_formats_read_each_other_byte_identical(shoal):
    """Message-format v0/v1 written by an old client is read byte-identical by a v2 client, and
    the other way round (headers, which old formats cannot carry, aside)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTopicPartition

    bs = shoal.bootstrap
    payloads = [(b"key-%d" % i, bytes(range(256)) * (i + 1)) for i in range(5)] + [(None, b"no key"), (b"k", b"")]
    old = KafkaProducer(bootstrap_servers=bs, api_version=(0, 10, 0), compression_type="gzip")
    try:
        for i, (k, v) in enumerate(payloads):
            old.send("x-old", key=k, value=v, timestamp_ms=1_700_000_000_000 + i).get(15)
    finally:
        old.close()
    new = Producer({"bootstrap.servers": bs, "compression.type": "lz4"})
    for k, v in payloads:
        new.produce("x-new", key=k, value=v, headers=[("h", b"dropped for old readers")])
    assert new.flush(30) == 0

    c = Consumer({"bootstrap.servers": bs, "group.id": "x", "enable.auto.commit": False})
    try:
        c.assign([CTopicPartition("x-old", 0, 0)])
        got = []
        while len(got) < len(payloads):
            m = c.poll(5)
            assert m is not None, got
            assert not m.error()
            got.append((m.key(), m.value(), m.timestamp()[1]))
        assert [(k, v) for k, v, _ in got] == payloads
        assert [ts for _, _, ts in got] == [1_700_000_000_000 + i for i in range(len(payloads))]
    finally:
        c.close()
    for api in ((0, 9), (0, 10, 0)):
        oc = KafkaConsumer(bootstrap_servers=bs, api_version=api, auto_offset_reset="earliest",
                           consumer_timeout_ms=5000)
        try:
            oc.assign([TopicPartition("x-new", 0)])
            assert [(m.key, m.value) for m in oc] == payloads
        finally:
            oc.close()
