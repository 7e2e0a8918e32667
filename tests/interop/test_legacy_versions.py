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
