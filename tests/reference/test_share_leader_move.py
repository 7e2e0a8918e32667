"""A share partition's leader moves while a member holds its records: three-node shoal and three-node Kafka 4.

The simulator found (swarm seed 1008) that ending a member's share session with a partition's former leader
released what the member held through its session with the new leader, so another member took records still
held. Kafka's former leader has no share partition left to release. This runs the moment at the wire on both
brokers: members joined with ShareGroupHeartbeat, records taken with ShareFetch on the leader, the leadership
moved with AlterPartitionReassignments and ElectLeaders, then the member's connection to the former leader
closed. Each broker must answer the same at every step.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.alter_partition_reassignments_request import AlterPartitionReassignmentsRequest
from shoal.protocol.generated.create_topics_request import CreateTopicsRequest
from shoal.protocol.generated.elect_leaders_request import ElectLeadersRequest
from shoal.protocol.generated.share_acknowledge_request import ShareAcknowledgeRequest
from shoal.protocol.generated.share_fetch_request import ShareFetchRequest
from shoal.protocol.generated.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from shoal.testing.process import BrokerProcess
from shoal.tools.wire import BrokerConnection, ToolClient, error_name
from tests.reference.apache_kafka import KafkaCluster
from tests.reference.consumer_protocol_helpers import wait_until
from tests.reference.fixtures import COMMON_PROPERTIES
from tests.reference.share_group_helpers import group_configs, produce_values, set_group_configs

RELEASE = 2
PREFERRED = 0


@pytest.fixture(scope="module", params=["shoal", "kafka"])
def three_nodes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Three nodes (ids 1-3) of shoal, then of Apache Kafka 4."""
    if request.param == "shoal":
        proc: Any = BrokerProcess(tmp_path_factory.mktemp("shoal-3n-share") / "data", 3,
                                 {**COMMON_PROPERTIES, "node.id": "1"})  # node ids 1-3, as Kafka's
    else:
        proc = KafkaCluster("4", 3, tmp_path_factory.mktemp("kafka-3n-share"), overrides=COMMON_PROPERTIES)
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()


class ShareMember:
    """A share group member at the wire: its heartbeats, and one share session per node it fetches from."""

    def __init__(self, client: ToolClient, group: str, topic: str) -> None:
        self.client, self.group, self.topic = client, group, topic
        self.member_id = str(uuid.uuid4())  # share members choose their own id (KIP-1082)
        self.member_epoch = 0
        self.assigned: dict[uuid.UUID, list[int]] = {}
        self.sessions: dict[int, tuple[BrokerConnection, int]] = {}  # node -> (connection, next session epoch)

    def heartbeat(self) -> None:
        coordinator = self.client.find_coordinator(self.group)
        resp = coordinator.send(ShareGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.member_epoch,
            subscribed_topic_names=[self.topic] if self.member_epoch == 0 else None))
        assert resp.error_code == ErrorCode.NONE, (error_name(resp.error_code), resp.error_message)
        self.member_epoch = resp.member_epoch
        if resp.assignment is not None:
            self.assigned = {tp.topic_id: sorted(tp.partitions) for tp in resp.assignment.topic_partitions}

    def fetch(self, node: int, topic_id: uuid.UUID, max_records: int = 500) -> tuple[str, list[tuple[int, int, int]]]:
        """ShareFetch of partition 0 at ``node`` (opening a session there the first time): the partition's
        error name and the acquired (first, last, delivery count) ranges."""
        conn, epoch = self.sessions.get(node) or (BrokerConnection(*self.client.brokers[node], timeout=15), 0)
        f = ShareFetchRequest
        resp = conn.send(f(group_id=self.group, member_id=self.member_id, share_session_epoch=epoch,
                           max_wait_ms=300, min_bytes=1, max_bytes=1 << 20, max_records=max_records,
                           batch_size=max_records, topics=[f.FetchTopic(topic_id=topic_id, partitions=[
                               f.FetchPartition(partition_index=0)])]))
        assert resp.error_code == ErrorCode.NONE, (error_name(resp.error_code), resp.error_message)
        self.sessions[node] = (conn, epoch + 1)
        parts = [p for t in resp.responses for p in t.partitions]
        return (error_name(parts[0].error_code) if parts else "NONE",
                [(a.first_offset, a.last_offset, a.delivery_count) for p in parts for a in p.acquired_records])

    def release(self, node: int, topic_id: uuid.UUID, first: int, last: int) -> str:
        conn, epoch = self.sessions[node]
        a = ShareAcknowledgeRequest
        resp = conn.send(a(group_id=self.group, member_id=self.member_id, share_session_epoch=epoch, topics=[
            a.AcknowledgeTopic(topic_id=topic_id, partitions=[a.AcknowledgePartition(
                partition_index=0, acknowledgement_batches=[a.AcknowledgementBatch(
                    first_offset=first, last_offset=last, acknowledge_types=[RELEASE])])])]))
        self.sessions[node] = (conn, epoch + 1)
        codes = [p.error_code for t in resp.responses for p in t.partitions]
        return error_name(resp.error_code or (codes[0] if codes else 0))

    def disconnect(self, node: int) -> None:
        self.sessions.pop(node)[0].close()

    def close(self) -> None:
        for conn, _ in self.sessions.values():
            conn.close()


def _leader(client: ToolClient, topic: str) -> int:
    return client.metadata([topic]).topics[0].partitions[0].leader_id


def _fetch_until_acquired(m: ShareMember, node: int, tid: uuid.UUID, max_records: int = 500) -> list:
    """A new share partition loads its state first (Kafka from its share coordinator): fetch until it answers."""
    got: list = []

    def check() -> bool:
        err, acquired = m.fetch(node, tid, max_records)
        assert err == "NONE", err
        got[:] = acquired
        return bool(acquired)

    wait_until(check, 30, f"records acquired at node {node}")
    return got


def test_a_member_closing_its_session_with_a_former_leader_keeps_what_it_holds_at_the_new_one(three_nodes):
    bs = three_nodes.bootstrap_servers
    topic, group = f"lm-{uuid.uuid4().hex[:8]}", f"sg-lm-{uuid.uuid4().hex[:8]}"
    client = ToolClient(bs, timeout=15)
    c = CreateTopicsRequest
    created = client.node(1).send(c(timeout_ms=30000, topics=[c.CreatableTopic(
        name=topic, num_partitions=-1, replication_factor=-1,
        assignments=[c.CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2, 3])])]))
    assert [error_name(t.error_code) for t in created.topics] == ["NONE"]
    set_group_configs(bs, group, {"share.auto.offset.reset": "earliest"})
    wait_until(lambda: group_configs(bs, group).get("share.auto.offset.reset") == "earliest", 15,
               "the group's start set")  # Kafka applies group configs through its metadata log
    produce_values(bs, topic, [f"v{i}" for i in range(4)], one_batch_each=True)  # one batch per record

    holder, other = ShareMember(client, group, topic), ShareMember(client, group, topic)
    try:
        wait_until(lambda: _leader(client, topic) == 1, 30, "node 1 leading")
        tid = client.metadata([topic]).topics[0].topic_id

        def both_assigned() -> bool:
            for m in (holder, other):
                m.heartbeat()
            return all(m.assigned.get(tid) == [0] for m in (holder, other))

        wait_until(both_assigned, 30, "both members assigned partition 0", interval=0.5)

        # The holder takes one record at the leader, node 1.
        assert _fetch_until_acquired(holder, 1, tid, max_records=1) == [(0, 0, 1)]

        # The leadership moves to node 2: the same replicas, node 2 first, then a preferred election.
        r = AlterPartitionReassignmentsRequest
        resp = client.node(1).send(r(timeout_ms=30000, topics=[r.ReassignableTopic(name=topic, partitions=[
            r.ReassignablePartition(partition_index=0, replicas=[2, 1, 3])])]))
        assert error_name(resp.error_code) == "NONE", resp
        assert [error_name(p.error_code) for t in resp.responses for p in t.partitions] == ["NONE"]

        def elected() -> bool:
            e = client.node(1).send(ElectLeadersRequest(election_type=PREFERRED, timeout_ms=30000, topic_partitions=[
                ElectLeadersRequest.TopicPartitions(topic=topic, partitions=[0])]))
            codes = [error_name(p.error_code) for t in e.replica_election_results for p in t.partition_result]
            assert codes[0] in ("NONE", "ELECTION_NOT_NEEDED", "PREFERRED_LEADER_NOT_AVAILABLE"), codes
            return _leader(client, topic) == 2

        wait_until(elected, 30, "node 2 leading", interval=0.5)
        holder.heartbeat()
        other.heartbeat()

        # At node 2 the holder takes every record: the one it took at node 1 was never acknowledged, and its
        # acquisition does not travel with the leadership.
        assert _fetch_until_acquired(holder, 2, tid) == [(0, 3, 1)]
        # Node 1 no longer leads the partition: the holder's session there is told so.
        assert holder.fetch(1, tid)[0] == "NOT_LEADER_OR_FOLLOWER"

        # The holder's connection to node 1 closes; what it holds at node 2 stays held.
        holder.disconnect(1)
        for _ in range(5):
            assert other.fetch(2, tid) == ("NONE", [])
            time.sleep(0.2)

        # Released by the holder, the records go to the other member, delivered a second time.
        assert holder.release(2, tid, 0, 3) == "NONE"
        assert _fetch_until_acquired(other, 2, tid) == [(0, 3, 2)]
    finally:
        holder.close()
        other.close()
        client.close()
