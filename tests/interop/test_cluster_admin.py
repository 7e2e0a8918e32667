"""ElectLeaders, partition reassignment, DescribeTopicPartitions and DescribeQuorum with the
admin clients that call them, on three nodes sharing one storage."""

from __future__ import annotations

from confluent_kafka import Consumer, ElectionType, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import PreferredLeaderNotAvailableError
from kafka.structs import TopicPartition


def leader_of(admin: AdminClient, topic: str, p: int) -> int:
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[p].leader


def test_reassignment_elections_topic_partitions_and_quorum(shoal_factory):
    b = shoal_factory(nodes=3)
    kp = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    ck = AdminClient({"bootstrap.servers": b.bootstrap})
    try:
        kp.create_topics([NewTopic("ra", 3, 2)])
        producer = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(30):
            producer.produce("ra", value=b"%d" % i, partition=i % 3)
        assert producer.flush(30) == 0

        # a reassignment completes at once; the new first replica leads
        kp.alter_partition_reassignments({TopicPartition("ra", 0): [2, 1]})
        assert leader_of(ck, "ra", 0) == 2
        assert kp.list_partition_reassignments() == {}
        described = kp.describe_topic_partitions(["ra"])
        p0 = next(p for p in described["topics"][0]["partitions"] if p["partition_index"] == 0)
        assert p0["replica_nodes"] == [2, 1] and p0["leader_id"] == 2
        # the data is all still there, read from the new leader
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ra", "enable.auto.commit": False})
        try:
            assert c.get_watermark_offsets(CTopicPartition("ra", 0), timeout=10) == (0, 10)
        finally:
            c.close()

        # preferred election: the preferred replica leads already
        res = kp.elect_leaders(0, {"ra": [0, 1, 2]}, raise_errors=False)
        codes = {p.partition_id: p.error_code for r in res.replica_election_results for p in r.partition_result}
        assert codes == {0: 84, 1: 84, 2: 84}  # ELECTION_NOT_NEEDED
        elected = ck.elect_leaders(ElectionType.PREFERRED, [CTopicPartition("ra", 1)]).result(30)
        assert [(tp.partition, err.code()) for tp, err in elected.items()] == [(1, 84)]
        # with the preferred replica down, it cannot lead
        b.command("stop-node 2")
        try:
            kp.elect_leaders(0, {"ra": [0]})
            raise AssertionError("PREFERRED_LEADER_NOT_AVAILABLE expected")
        except PreferredLeaderNotAvailableError:
            pass
        b.command("start-node 2")

        # pagination of DescribeTopicPartitions
        page = kp.describe_topic_partitions(["ra"], response_partition_limit=2)
        assert [p["partition_index"] for p in page["topics"][0]["partitions"]] == [0, 1]
        assert page["next_cursor"] == {"topic_name": "ra", "partition_index": 2}
        rest = kp.describe_topic_partitions(["ra"], response_partition_limit=2, cursor=page["next_cursor"])
        assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [2]
        assert rest["next_cursor"] is None

        # one voter: the controller
        quorum = kp.describe_metadata_quorum()
        part = quorum["topics"][0]["partitions"][0]
        cluster = ck.describe_cluster().result(30)
        assert [v["replica_id"] for v in part["current_voters"]] == [cluster.controller.id]
        assert part["leader_id"] == cluster.controller.id and part["high_watermark"] > 0
    finally:
        kp.close()
    # the reassignment was persisted: it survives a restart
    b.restart()
    ck = AdminClient({"bootstrap.servers": b.bootstrap})
    md = ck.list_topics("ra", timeout=10).topics["ra"].partitions[0]
    assert md.replicas == [2, 1] and md.leader == 2
