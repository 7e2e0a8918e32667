"""DeleteRecords and DescribeLogDirs with the admin clients that call them."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.errors import NoError
from kafka.structs import TopicPartition as KPTopicPartition
from kafka.structs import TopicPartitionReplica


def test_delete_records_moves_the_log_start_and_consumers_see_it(shoal_cluster):
    bs = shoal_cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("dr", 2, 1)])["dr"].result(30)
    p = Producer({"bootstrap.servers": bs})
    for i in range(100):
        p.produce("dr", value=b"%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    res = admin.delete_records([TopicPartition("dr", 0, 30), TopicPartition("dr", 1, -1)])
    low = {tp.partition: f.result(30).low_watermark for tp, f in res.items()}
    assert low == {0: 30, 1: 50}
    c = Consumer({"bootstrap.servers": bs, "group.id": "dr", "auto.offset.reset": "earliest"})
    try:
        assert c.get_watermark_offsets(TopicPartition("dr", 0), timeout=10) == (30, 50)
        c.assign([TopicPartition("dr", 0)])
        first = None
        for _ in range(50):
            m = c.poll(0.5)
            if m is not None and not m.error():
                first = m
                break
        assert first is not None and first.offset() == 30 and first.value() == b"60"
    finally:
        c.close()
    # beyond the high watermark: OFFSET_OUT_OF_RANGE
    bad = admin.delete_records([TopicPartition("dr", 0, 51)])
    try:
        next(iter(bad.values())).result(30)
        raise AssertionError("deleting past the high watermark must fail")
    except Exception as e:  # noqa: BLE001 - KafkaException(OFFSET_OUT_OF_RANGE)
        assert "OFFSET_OUT_OF_RANGE" in str(e) or "out of range" in str(e).lower()
    # kafka-python's admin client, the same API
    kp = KafkaAdminClient(bootstrap_servers=bs)
    try:
        out = kp.delete_records({KPTopicPartition("dr", 0): 40})
        assert [v["low_watermark"] for v in out.values()] == [40]
    finally:
        kp.close()


def test_describe_log_dirs_reports_real_sizes(shoal):
    bs = shoal.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("ld", 2, 1)])["ld"].result(30)
    p = Producer({"bootstrap.servers": bs})
    for _ in range(200):
        p.produce("ld", value=b"x" * 1000, partition=0)
    assert p.flush(30) == 0
    kp = KafkaAdminClient(bootstrap_servers=bs)
    try:
        dirs = kp.describe_log_dirs()
    finally:
        kp.close()
    assert [d["broker"] for d in dirs] == [0]
    [log_dir] = dirs[0]["log_dirs"]
    assert log_dir["log_dir"] == str(shoal.data_dir) and log_dir["error_code"] == 0
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    sizes = {(t["name"], p["partition_index"]): p["partition_size"]
             for t in log_dir["topics"] for p in t["partitions"]}
    on_disk = sum(f.stat().st_size for f in (shoal.data_dir / "ld-0").glob("*.log"))
    assert sizes[("ld", 0)] == on_disk > 200 * 1000
    assert sizes[("ld", 1)] == 0  # never written: no files yet, reported empty as Kafka reports it


def test_alter_replica_log_dirs_moves_a_partition(shoal_factory, tmp_path):
    first, second = tmp_path / "dir-a", tmp_path / "dir-b"
    b = shoal_factory(nodes=1, overrides={"log.dirs": f"{first},{second}"})
    bs = b.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("mv", 1, 1)])["mv"].result(30)
    p = Producer({"bootstrap.servers": bs})
    for i in range(50):
        p.produce("mv", value=b"%d" % i)
    assert p.flush(30) == 0
    kp = KafkaAdminClient(bootstrap_servers=bs)
    try:
        [where] = [d["log_dir"] for d in kp.describe_log_dirs()[0]["log_dirs"]
                   if any(t["name"] == "mv" for t in d["topics"])]
        other = str(second if where == str(first) else first)
        tpr = TopicPartitionReplica("mv", 0, 0)
        result = kp.alter_replica_log_dirs({tpr: other})
        assert result[tpr] is NoError
        [now] = [d["log_dir"] for d in kp.describe_log_dirs()[0]["log_dirs"]
                 if any(t["name"] == "mv" for t in d["topics"])]
        assert now == other and (tmp_path / now.rsplit("/", 1)[-1] / "mv-0").is_dir()
        bad = kp.alter_replica_log_dirs({tpr: "/no/such/dir"})
        assert bad[tpr].errno == 57  # LOG_DIR_NOT_FOUND
    finally:
        kp.close()
    b.restart()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "mv", "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition("mv", 0, 0)])
        values = []
        while len(values) < 50:
            m = c.poll(5)
            assert m is not None, values
            values.append(m.value())
        assert values == [b"%d" % i for i in range(50)]
    finally:
        c.close()
