"""The shoal Spark source and sink against Apache Kafka 4.x as well as shoal (``either_broker``): a batch
read of offset ranges, a streaming read, the batch sink, the exactly-once streaming copy, and deleted
offsets skipped with failOnDataLoss=false. The promise checked is that a job moves to Kafka unchanged.

One Spark session (tests/spark/conftest.py) serves every test; topics are unique per broker and test,
since both session brokers are shared with other tests."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient

from shoal.client import AdminClient as ShoalAdmin
from tests.interop.txn_helpers import create_topic, read_all
from tests.spark.conftest import spark_dir
from tests.spark.helpers import read

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def fill(bs: str, topic: str, partitions: int, per_partition: int) -> None:
    create_topic(bs, topic, partitions)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, key=b"k%d" % i, value=b"%d-%d" % (part, i), partition=part)
    assert p.flush(30) == 0


def test_batch_read_offset_ranges(spark, either_broker):
    bs, topic = either_broker.bootstrap_servers, unique("spk-range")
    fill(bs, topic, 2, 10)
    df = read(spark, bs, subscribe=topic,
              startingOffsets=json.dumps({topic: {"0": 2, "1": -2}}),
              endingOffsets=json.dumps({topic: {"0": 5, "1": -1}}))
    rows = sorted((r.partition, r.offset, bytes(r.value)) for r in df.select("partition", "offset", "value").collect())
    assert rows == ([(0, o, b"0-%d" % o) for o in range(2, 5)] + [(1, o, b"1-%d" % o) for o in range(10)])


def test_streaming_read(spark, either_broker, tmp_path):
    bs, topic = either_broker.bootstrap_servers, unique("spk-stream")
    fill(bs, topic, 2, 25)
    seen: list[bytes] = []

    def collect(batch, _epoch: int) -> None:
        seen.extend(bytes(r.value) for r in batch.select("value").collect())

    q = (spark.readStream.format("shoal").option("kafka.bootstrap.servers", bs).option("subscribe", topic)
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "20")
         .option("commitOffsetsToGroup", f"{topic}-g").load()
         .writeStream.foreachBatch(collect).option("checkpointLocation", spark_dir(tmp_path, "ck"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert sorted(seen) == sorted(b"%d-%d" % (p, i) for p in range(2) for i in range(25))
    # the offsets published to a group, as lag tools read them (committed after each batch)
    with ShoalAdmin(bootstrap_servers=bs) as admin:
        committed = admin.list_group_offsets(f"{topic}-g")
    assert {tp.partition: om.offset for tp, om in committed.items()} == {0: 25, 1: 25}


def test_batch_sink(spark, either_broker):
    bs, topic = either_broker.bootstrap_servers, unique("spk-sink")
    create_topic(bs, topic, 2)
    df = spark.createDataFrame([(b"k%d" % i, b"v%d" % i, i % 2) for i in range(30)], "key binary, value binary, partition int")
    df.write.format("shoal").mode("append").option("kafka.bootstrap.servers", bs).option("topic", topic).save()
    assert sorted(read_all(bs, topic, 2)) == sorted(b"v%d" % i for i in range(30))


def test_streaming_copy_exactly_once(spark, either_broker, tmp_path):
    bs, src, dst = either_broker.bootstrap_servers, unique("spk-eos-in"), unique("spk-eos-out")
    fill(bs, src, 2, 100)
    create_topic(bs, dst, 2)
    from pyspark.sql import functions as F

    def run() -> None:
        q = (spark.readStream.format("shoal").option("kafka.bootstrap.servers", bs).option("subscribe", src)
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "70").load()
             .select("key", F.concat(F.lit(b"out-"), F.col("value")).alias("value"), "partition")
             .writeStream.format("shoal").option("kafka.bootstrap.servers", bs).option("topic", dst)
             .option("deliveryGuarantee", "exactly_once")
             .option("checkpointLocation", spark_dir(tmp_path, "ck")).trigger(availableNow=True).start())
        assert q.awaitTermination(180)

    run()
    run()  # nothing new since the checkpoint: nothing is written again
    expected = sorted(b"out-%d-%d" % (p, i) for p in range(2) for i in range(100))
    assert sorted(read_all(bs, dst, 2)) == expected


def test_deleted_offsets_skipped_without_fail_on_data_loss(spark, either_broker):
    """DeleteRecords, then a read from offset 0: Kafka answers the fetch with OFFSET_OUT_OF_RANGE and
    leaves its log start offset at -1, so the reader must learn the earliest offset from ListOffsets."""
    bs, topic = either_broker.bootstrap_servers, unique("spk-loss")
    fill(bs, topic, 1, 20)
    admin = AdminClient({"bootstrap.servers": bs})
    for fut in admin.delete_records([CKTopicPartition(topic, 0, 12)], request_timeout=15).values():
        assert fut.result(15).low_watermark == 12
    options = {"assign": json.dumps({topic: [0]}), "startingOffsets": json.dumps({topic: {"0": 0}})}
    lenient = read(spark, bs, failOnDataLoss="false", **options)
    offsets = sorted(r.offset for r in lenient.select("offset").collect())
    assert offsets == list(range(12, 20))
    with pytest.raises(Exception, match="deleted before they were read"):
        read(spark, bs, **options).count()


def test_read_committed_batch_read(spark, either_broker):
    """Aborted records (skipped through the fetch's aborted-transactions list) and an open
    transaction (the read stops at the last stable offset) are read alike on both brokers."""
    bs, topic = either_broker.bootstrap_servers, unique("spk-txn")
    create_topic(bs, topic, 1)
    p = Producer({"bootstrap.servers": bs, "transactional.id": unique("spk-tx")})
    p.init_transactions(20)
    for outcome in ("committed-a", "aborted", "committed-b", "open"):
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, value=b"%s-%d" % (outcome.encode(), i))
        p.flush(10)
        if outcome.startswith("committed"):
            p.commit_transaction(10)
        elif outcome == "aborted":
            p.abort_transaction(10)
    try:
        df = read(spark, bs, subscribe=topic, **{"kafka.isolation.level": "read_committed"})
        values = sorted(bytes(r.value) for r in df.select("value").collect())
        assert values == sorted(b"committed-%s-%d" % (x, i) for x in (b"a", b"b") for i in range(3))
    finally:
        p.abort_transaction(10)
