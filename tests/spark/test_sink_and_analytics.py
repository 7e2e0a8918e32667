"""The shoal sink in Spark (batch and streaming, both delivery guarantees, Spark's columns and errors),
and the offsets/lag analytics checked against what confluent-kafka's admin client reports."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from shoal.client.partitioner import partition_for_key
from tests.interop.txn_helpers import create_topic, read_all
from tests.spark.conftest import spark_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def consume_all(bs: str, topic: str, partitions: int) -> list:
    c = Consumer({"bootstrap.servers": bs, "group.id": "sink-check", "enable.partition.eof": True,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, eof = [], set()
    while len(eof) < partitions:
        m = c.poll(10)
        assert m is not None, "timed out"
        if m.error():
            eof.add(m.partition())
            continue
        out.append(m)
    c.close()
    return out


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_batch_write_columns_partitioning_and_headers(spark, bootstrap, guarantee):
    topic = f"sink-{guarantee}"
    create_topic(bootstrap, topic, 3)
    rows = [(b"k%d" % i if i % 4 else None, b"v%d" % i, 1 if i % 5 == 0 else None, [("h", b"%d" % i)])
            for i in range(60)]
    df = spark.createDataFrame(rows, "key binary, value binary, partition int, headers array<struct<key:string,"
                                     "value:binary>>")
    (df.write.format("shoal").mode("append").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .option("includeHeaders", "true").option("deliveryGuarantee", guarantee).save())
    got = consume_all(bootstrap, topic, 3)
    assert sorted(m.value() for m in got) == sorted(v for _, v, _, _ in rows)
    for m in got:
        i = int(m.value()[1:])
        key, _, part, _ = rows[i]
        if part is not None:
            assert m.partition() == part
        elif key is not None:
            assert m.partition() == partition_for_key(key, 3)  # Kafka's (Java's) default partitioner
        assert m.headers() == [("h", b"%d" % i)]


def test_topic_column_and_string_values(spark, bootstrap):
    create_topic(bootstrap, "sink-a", 1)
    create_topic(bootstrap, "sink-b", 1)
    df = spark.createDataFrame([("sink-a", "x"), ("sink-b", "y"), ("sink-a", "z")], "topic string, value string")
    df.write.format("shoal").mode("append").option("kafka.bootstrap.servers", bootstrap).save()
    assert sorted(read_all(bootstrap, "sink-a")) == [b"x", b"z"] and read_all(bootstrap, "sink-b") == [b"y"]


@pytest.mark.parametrize("columns,options,message", [
    ("key binary", {"topic": "t"}, "Required attribute 'value' not found"),
    ("value binary", {}, "topic option required"),
    ("value int", {"topic": "t"}, "value attribute type must be a binary or string"),
    ("value binary", {"topic": "t", "deliveryGuarantee": "maybe"}, "deliveryGuarantee"),
    ("value binary", {"topic": "t", "kafka.value.serializer": "x"}, "value.serializer' is not supported"),
])
def test_sink_errors(spark, bootstrap, columns, options, message):
    df = spark.createDataFrame([], columns)
    w = df.write.format("shoal").mode("append").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        w = w.option(k, v)
    with pytest.raises(Exception, match=message):
        w.save()


def test_stream_copy_exactly_once(spark, bootstrap, tmp_path):
    create_topic(bootstrap, "copy-in", 2)
    create_topic(bootstrap, "copy-out", 2)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(500):
        p.produce("copy-in", key=b"%d" % i, value=b"%d" % i, partition=i % 2)
    p.flush(10)
    from pyspark.sql import functions as F

    def run() -> None:
        src = (spark.readStream.format("shoal").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", "copy-in").option("startingOffsets", "earliest")
               .option("maxOffsetsPerTrigger", "150").load())
        q = (src.select("key", F.concat(F.lit(b"out-"), F.col("value")).alias("value"), "partition")
             .writeStream.format("shoal").option("kafka.bootstrap.servers", bootstrap).option("topic", "copy-out")
             .option("checkpointLocation", spark_dir(tmp_path, "ck")).trigger(availableNow=True).start())
        q.awaitTermination(180)

    run()
    run()  # nothing new: nothing written again
    values = read_all(bootstrap, "copy-out", 2)
    assert sorted(values) == sorted(b"out-%d" % i for i in range(500))


def test_consumer_offsets_and_lag_match_the_admin_client(spark, bootstrap):
    import shoal.spark

    create_topic(bootstrap, "lag-t", 2)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        p.produce("lag-t", value=b"%d" % i, partition=i % 2)
    p.flush(10)
    for group, commits in (("lag-g1", {0: 7, 1: 15}), ("lag-g2", {0: 15})):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        c.commit(offsets=[TopicPartition("lag-t", part, off) for part, off in commits.items()], asynchronous=False)
        c.close()
    # A transactional commit left pending is not a committed offset.
    tp = Producer({"bootstrap.servers": bootstrap, "transactional.id": "lag-pending"})
    tp.init_transactions(20)
    tp.begin_transaction()
    tp.send_offsets_to_transaction([TopicPartition("lag-t", 1, 3)],
                                   Consumer({"bootstrap.servers": bootstrap, "group.id": "lag-g2"})
                                   .consumer_group_metadata(), 10)
    offsets = {(r.group, r.topic, r.partition): r for r in shoal.spark.consumer_offsets(spark, bootstrap).collect()
               if r.topic == "lag-t"}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions

    for group in ("lag-g1", "lag-g2"):
        res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
        expected = {(group, t.topic, t.partition): t.offset for t in res.topic_partitions if t.offset >= 0}
        assert {k: r.offset for k, r in offsets.items() if k[0] == group} == expected
    assert offsets[("lag-g1", "lag-t", 0)].commit_timestamp is not None
    lag = {(r.group, r.partition): (r.current_offset, r.log_end_offset, r.lag)
           for r in shoal.spark.lag(spark, bootstrap).where("topic = 'lag-t'").collect()}
    assert lag == {("lag-g1", 0): (7, 15, 8), ("lag-g1", 1): (15, 15, 0), ("lag-g2", 0): (15, 15, 0)}
    tp.abort_transaction(10)
