"""The shoal data source in Spark (local[2,3]): registration with no register call, Spark's Kafka schema,
exact rows for offset, timestamp and partition ranges, read limits and AvailableNow, read_committed,
partition and topic discovery, data loss, and the errors Spark gives for bad options."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.interop.txn_helpers import create_topic
from tests.spark.conftest import spark_dir
from tests.spark.helpers import read

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

T0 = 1_700_000_000_000


def fill(bs: str, topic: str, partitions: int, per_partition: int, *, headers: bool = False) -> None:
    create_topic(bs, topic, partitions)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, key=b"k%d" % i, value=b"%d-%d" % (part, i), partition=part, timestamp=T0 + i * 1000,
                      headers=[("h", b"%d" % i), ("n", None)] if headers else None)
    assert p.flush(30) == 0


def test_registered_without_register_call_and_spark_kafka_schema(spark, bootstrap):
    fill(bootstrap, "src-schema", 2, 3, headers=True)
    df = read(spark, bootstrap, subscribe="src-schema")
    assert df.schema.simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                                        "timestamp:timestamp,timestampType:int>")
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset, r.value) for r in rows] == [
        (p, i, b"%d-%d" % (p, i)) for p in range(2) for i in range(3)]
    assert rows[1].key == b"k1" and rows[1].topic == "src-schema" and rows[1].timestampType == 0
    assert int(rows[2].timestamp.timestamp() * 1000) == T0 + 2000
    hdf = read(spark, bootstrap, subscribe="src-schema", includeHeaders="true")
    assert hdf.schema.simpleString().endswith(",headers:array<struct<key:string,value:binary>>>")
    h = hdf.where("partition = 0 and offset = 1").collect()[0].headers
    assert [(x.key, x.value) for x in h] == [("h", b"1"), ("n", None)]


def test_offset_timestamp_and_partition_ranges(spark, bootstrap):
    fill(bootstrap, "src-range", 3, 10)
    rows = read(spark, bootstrap, subscribe="src-range",
                startingOffsets=json.dumps({"src-range": {"0": 2, "1": -2, "2": 7}}),
                endingOffsets=json.dumps({"src-range": {"0": 5, "1": 1, "2": -1}})).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, 2), (0, 3), (0, 4), (1, 0), (2, 7), (2, 8), (2, 9)]
    rows = read(spark, bootstrap, assign=json.dumps({"src-range": [1]}), startingTimestamp=str(T0 + 6000)).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(1, o) for o in range(6, 10)]
    rows = read(spark, bootstrap, subscribe="src-range",
                startingOffsetsByTimestamp=json.dumps({"src-range": {"0": T0 + 8000, "1": T0, "2": T0 + 9000}}),
                endingOffsetsByTimestamp=json.dumps({"src-range": {"0": T0 + 9000, "1": T0 + 1500,
                                                                   "2": T0 + 9999}})).collect()
    # An ending timestamp no record reaches means the latest offset, as in Spark.
    assert sorted((r.partition, r.offset) for r in rows) == [(0, 8), (1, 0), (1, 1), (2, 9)]
    # minPartitions splits the ranges over more tasks (in proportion to their size, as Spark), same rows.
    # kafka.group.id is accepted, as in Spark 3+ (the source joins no group).
    df = read(spark, bootstrap, subscribe="src-range", minPartitions="6", **{"kafka.group.id": "mine"})
    assert df.rdd.getNumPartitions() == 6 and sorted(r.offset for r in df.collect()) == sorted(list(range(10)) * 3)


def test_stream_read_limits_and_available_now(spark, bootstrap, tmp_path):
    fill(bootstrap, "src-limits", 2, 250)
    q = (read_stream(spark, bootstrap, subscribe="src-limits", startingOffsets="earliest",
                     maxOffsetsPerTrigger="200", commitOffsetsToGroup="limits-group")
         .writeStream.format("noop").option("checkpointLocation", spark_dir(tmp_path, "ck"))
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes == [200, 200, 100]
    assert json.loads(q.recentProgress[-1]["sources"][0]["latestOffset"]) == {"src-limits": {"0": 250, "1": 250}}
    # The last batch is committed to the group too, so lag tools see the query at the end.
    from shoal.client import AdminClient

    admin = AdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets("limits-group")
    finally:
        admin.close()
    assert {(tp.partition, om.offset) for tp, om in offsets.items()} == {(0, 250), (1, 250)}


def read_stream(spark, bs: str, **options):
    r = spark.readStream.format("shoal").option("kafka.bootstrap.servers", bs)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_read_committed_skips_aborted_and_open_transactions(spark, bootstrap):
    create_topic(bootstrap, "src-txn", 1)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "src-txn-p"})
    p.init_transactions(20)
    for commit in (True, False, True):
        p.begin_transaction()
        for i in range(3):
            p.produce("src-txn", value=b"%s-%d" % (b"c" if commit else b"a", i))
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(10)
    p.begin_transaction()
    p.produce("src-txn", value=b"open")
    p.flush(10)
    committed = read(spark, bootstrap, subscribe="src-txn", **{"kafka.isolation.level": "read_committed"})
    assert sorted(r.value for r in committed.collect()) == sorted([b"c-0", b"c-1", b"c-2"] * 2)
    everything = read(spark, bootstrap, subscribe="src-txn")
    assert len(everything.collect()) == 10  # read_uncommitted: aborted and open records too, no markers
    p.abort_transaction(10)


def test_new_partitions_and_pattern_topics_are_discovered(spark, bootstrap, tmp_path):
    fill(bootstrap, "disc-a", 1, 5)
    ck = spark_dir(tmp_path, "ck")
    seen: list = []

    def run() -> None:
        q = (read_stream(spark, bootstrap, subscribePattern="disc-.*", startingOffsets="earliest")
             .writeStream.foreachBatch(lambda df, _id: seen.extend(r.value for r in df.collect()))
             .option("checkpointLocation", ck).trigger(availableNow=True).start())
        q.awaitTermination(120)

    run()
    assert sorted(seen) == [b"0-%d" % i for i in range(5)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions("disc-a", 2)])["disc-a"].result(10)
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce("disc-a", value=b"new-partition", partition=1)
    p.flush(10)
    fill(bootstrap, "disc-b", 1, 2)
    time.sleep(0.5)
    seen.clear()
    run()
    assert sorted(seen) == [b"0-0", b"0-1", b"new-partition"]


def test_deleted_offsets_fail_or_are_skipped(spark, bootstrap):
    create_topic(bootstrap, "src-loss", 1, {"segment.bytes": "300", "retention.bytes": "600"})
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for _ in range(40):
        p.produce("src-loss", value=b"x" * 50)
        p.flush(10)
    deadline = time.monotonic() + 20
    df = None
    while time.monotonic() < deadline:  # retention runs every 200 ms
        df = read(spark, bootstrap, assign=json.dumps({"src-loss": [0]}),
                  startingOffsets=json.dumps({"src-loss": {"0": 0}}), failOnDataLoss="false")
        if df.count() < 40:
            break
        time.sleep(0.3)
    kept = df.count()
    assert 0 < kept < 40
    strict = read(spark, bootstrap, assign=json.dumps({"src-loss": [0]}),
                  startingOffsets=json.dumps({"src-loss": {"0": 0}}))
    with pytest.raises(Exception, match="deleted before they were read"):
        strict.count()


@pytest.mark.parametrize("options,message", [
    ({"subscribe": "t"}, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "x:1"}, "One of the following options must be specified"),
    ({"kafka.bootstrap.servers": "x:1", "subscribe": "t", "assign": '{"t":[0]}'}, "Only one of the following"),
    ({"kafka.bootstrap.servers": "x:1", "subscribe": "t", "kafka.auto.offset.reset": "earliest"},
     "auto.offset.reset' is not supported"),
    ({"kafka.bootstrap.servers": "x:1", "subscribe": "t", "kafka.group.id": "g", "kafka.value.deserializer": "x"},
     "value.deserializer' is not supported"),
    ({"kafka.bootstrap.servers": "x:1", "subscribe": "t", "startingOffsets": "latest"},
     "Starting offset can't be latest for batch queries"),
    ({"kafka.bootstrap.servers": "x:1", "subscribe": "t", "startingOffsets": "{bad"}, "must be 'earliest'"),
])
def test_bad_options_get_sparks_errors(spark, options, message):
    r = spark.read.format("shoal")
    for k, v in options.items():
        r = r.option(k, v)
    with pytest.raises(Exception, match=message):
        r.load().collect()
