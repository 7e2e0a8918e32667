"""The request corpus of the differential conformance run (issue 15, item 3).

Each :class:`Case` is one request template, built with shoal's generated codec
classes; the runner sends it at every version both brokers (and the codec)
support. A field the template sets that a version does not have is reset to its
default by the runner, so one template serves every version. ``names`` holds the
run's unique topic/group names, so session brokers shared with other tests are
not disturbed; ``v`` lets a case use a fresh group per version where state
carried from one version to the next would change the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shoal.protocol.generated.create_partitions_request import CreatePartitionsRequest as CP
from shoal.protocol.generated.create_topics_request import CreateTopicsRequest as CT
from shoal.protocol.generated.delete_groups_request import DeleteGroupsRequest
from shoal.protocol.generated.delete_records_request import DeleteRecordsRequest as DR
from shoal.protocol.generated.delete_topics_request import DeleteTopicsRequest as DT
from shoal.protocol.generated.describe_groups_request import DescribeGroupsRequest
from shoal.protocol.generated.end_txn_request import EndTxnRequest
from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from shoal.protocol.generated.heartbeat_request import HeartbeatRequest
from shoal.protocol.generated.init_producer_id_request import InitProducerIdRequest
from shoal.protocol.generated.join_group_request import JoinGroupRequest as JG
from shoal.protocol.generated.leave_group_request import LeaveGroupRequest as LG
from shoal.protocol.generated.list_offsets_request import ListOffsetsRequest as LO
from shoal.protocol.generated.metadata_request import MetadataRequest as MD
from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest as OC
from shoal.protocol.generated.offset_delete_request import OffsetDeleteRequest as OD
from shoal.protocol.generated.offset_fetch_request import OffsetFetchRequest as OF
from shoal.protocol.generated.produce_request import ProduceRequest as PR
from shoal.protocol.generated.sync_group_request import SyncGroupRequest
from shoal.protocol.record_encode import build_batch

Names = dict[str, str]
Builder = Callable[[Names, int], Any]

# Fields whose values legitimately differ between two brokers, whatever the request.
DEFAULT_IGNORED = frozenset({
    "throttle_time_ms", "cluster_id", "controller_id", "node_id", "host", "port", "leader_id",
    "brokers", "leader_epoch", "topic_id", "cluster_authorized_operations",
    "topic_authorized_operations", "authorized_operations", "log_append_time_ms",
    "current_leader", "node_endpoints", "rack", "isr_nodes", "replica_nodes", "offline_replicas",
})


@dataclass(frozen=True)
class Case:
    """One request template and what to ignore when comparing the answers."""

    name: str
    api_key: int
    build: Builder
    needs: str = "topic with 3 partitions and 3 records in partition 0"
    ignore: frozenset[str] = field(default_factory=frozenset)  # extra field names to normalise away
    unordered: bool = True  # lists compared as multisets: Kafka promises no order for them
    min_version: int = 0  # versions below are skipped (the case means nothing there)
    max_version: int = 99


def _md(*topics: str, auto: bool = False) -> MD:
    return MD(topics=[MD.MetadataRequestTopic(name=t) for t in topics], allow_auto_topic_creation=auto)


def _lo(topic: str, parts: list[int], ts: int) -> LO:
    return LO(replica_id=-1, topics=[LO.ListOffsetsTopic(name=topic, partitions=[
        LO.ListOffsetsPartition(partition_index=p, timestamp=ts, max_num_offsets=1) for p in parts])])


def _ct(name: str, parts: int = 1, configs: dict[str, str] | None = None, validate: bool = True) -> CT:
    cfg = [CT.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()]
    return CT(topics=[CT.CreatableTopic(name=name, num_partitions=parts, replication_factor=1, configs=cfg)],
              timeout_ms=10000, validate_only=validate)


def _join(group: str, member: str = "") -> JG:
    return JG(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member,
              protocol_type="consumer", protocols=[JG.JoinGroupRequestProtocol(name="range", metadata=b"")])


def _commit(group: str, topic: str, generation: int, member: str) -> OC:
    return OC(group_id=group, generation_id_or_member_epoch=generation, member_id=member, topics=[
        OC.OffsetCommitRequestTopic(name=topic, partitions=[
            OC.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])


def _fetch_offsets(group: str, topic: str) -> OF:
    return OF(group_id=group, topics=[OF.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1])],
              groups=[OF.OffsetFetchRequestGroup(group_id=group, topics=[
                  OF.OffsetFetchRequestTopics(name=topic, partition_indexes=[0, 1])])])


def _leave(group: str, member: str) -> LG:
    return LG(group_id=group, member_id=member, members=[LG.MemberIdentity(member_id=member)])


def _produce(topic: str, partition: int, value_size: int = 2, pid: int = -1, epoch: int = -1, seq: int = -1,
             acks: int = 1) -> PR:
    # a fixed timestamp keeps both brokers' answers (and timestamp-based lookups) comparable
    batch = build_batch([(1_700_000_000_000, b"k", b"v" * value_size, None)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq)
    return PR(acks=acks, timeout_ms=10000, topic_data=[PR.TopicProduceData(
        name=topic, partition_data=[PR.PartitionProduceData(index=partition, records=batch)])])


def _delete_records(topic: str, partition: int, offset: int) -> DR:
    return DR(timeout_ms=10000, topics=[DR.DeleteRecordsTopic(name=topic, partitions=[
        DR.DeleteRecordsPartition(partition_index=partition, offset=offset)])])


CASES: list[Case] = [
    Case("produce/valid", 0, lambda n, v: _produce(n["topic"], 1), min_version=3),
    Case("produce/bad-partition", 0, lambda n, v: _produce(n["topic"], 9), min_version=3),
    Case("produce/unknown-topic", 0, lambda n, v: _produce(n["missing"], 0), min_version=3),
    Case("produce/oversized-record", 0, lambda n, v: _produce(n["topic"], 2, value_size=1_100_000),
         ignore=frozenset({"error_message"}), min_version=3),
    Case("produce/unknown-producer-id", 0, lambda n, v: _produce(n["topic"], 2, pid=987_654, epoch=0, seq=0),
         ignore=frozenset({"error_message"}), min_version=3),
    # Produce v0-2 carry only magic 0/1 message sets: the other produce cases start at v3, and this
    # one checks what each broker does with a v2 batch in an old request.
    Case("produce/v2-batch-in-old-version", 0, lambda n, v: _produce(n["topic"], 1), max_version=2),
    Case("delete-records/beyond-high-watermark", 21, lambda n, v: _delete_records(n["topic"], 0, 1000)),
    Case("delete-records/bad-partition", 21, lambda n, v: _delete_records(n["topic"], 9, 0)),
    Case("delete-records/unknown-topic", 21, lambda n, v: _delete_records(n["missing"], 0, 0)),
    Case("offset-delete/unknown-group", 47, lambda n, v: OD(group_id=n["group"] + "-none", topics=[
        OD.OffsetDeleteRequestTopic(name=n["topic"], partitions=[OD.OffsetDeleteRequestPartition(partition_index=0)])])),
    Case("end-txn/unknown-transactional-id", 26, lambda n, v: EndTxnRequest(
        transactional_id=n["group"] + "-txn-none", producer_id=987_654, producer_epoch=0, committed=True)),
    Case("init-producer-id/transactional", 22, lambda n, v: InitProducerIdRequest(
        transactional_id=n["group"] + f"-txn-v{v}", transaction_timeout_ms=60000), ignore=frozenset({"producer_id"})),
    Case("init-producer-id/unknown-producer-epoch", 22, lambda n, v: InitProducerIdRequest(
        transactional_id=n["group"] + f"-txn-ep-v{v}", transaction_timeout_ms=60000, producer_id=987_654,
        producer_epoch=5), ignore=frozenset({"producer_id"}), min_version=3),
    Case("join-group/invalid-session-timeout", 11, lambda n, v: JG(
        group_id=n["group"] + f"-st{v}", session_timeout_ms=1, rebalance_timeout_ms=10000, member_id="",
        protocol_type="consumer", protocols=[JG.JoinGroupRequestProtocol(name="range", metadata=b"")])),
    Case("join-group/empty-group-id", 11, lambda n, v: _join("")),
    Case("heartbeat/empty-group-id", 12, lambda n, v: HeartbeatRequest(group_id="", generation_id=1,
                                                                      member_id="nobody")),
    Case("sync-group/empty-group-id", 14, lambda n, v: SyncGroupRequest(
        group_id="", generation_id=1, member_id="nobody", protocol_type="consumer", protocol_name="range",
        assignments=[])),
    Case("leave-group/empty-group-id", 13, lambda n, v: _leave("", "nobody")),
    Case("offset-commit/bad-partition", 8, lambda n, v: OC(
        group_id=n["group"] + "-c", generation_id_or_member_epoch=-1, member_id="", topics=[
            OC.OffsetCommitRequestTopic(name=n["topic"], partitions=[
                OC.OffsetCommitRequestPartition(partition_index=9, committed_offset=1)])])),
    Case("create-topics/empty-name", 19, lambda n, v: _ct(""), ignore=frozenset({"error_message"})),
    Case("create-topics/replication-factor-too-large", 19, lambda n, v: CT(topics=[CT.CreatableTopic(
        name=n["new"] + "-rf", num_partitions=1, replication_factor=3)], timeout_ms=10000, validate_only=True),
         ignore=frozenset({"error_message"})),
    Case("metadata/empty-topic-list", 3, lambda n, v: MD(topics=[], allow_auto_topic_creation=False),
         min_version=1),
    Case("list-offsets/by-timestamp", 2, lambda n, v: _lo(n["topic"], [0, 1], 1_700_000_000_001)),
    Case("describe-groups/empty-list", 15, lambda n, v: DescribeGroupsRequest(groups=[])),
    Case("init-producer-id/bad-timeout", 22, lambda n, v: InitProducerIdRequest(
        transactional_id=n["group"] + f"-txn-bad-v{v}", transaction_timeout_ms=-1)),
    Case("metadata/existing-topic", 3, lambda n, v: _md(n["topic"])),
    # v0-3 always auto-create; the case that must not create starts at v4
    Case("metadata/unknown-topic", 3, lambda n, v: _md(n["missing"] + f"-v{v}"), min_version=4),
    Case("metadata/auto-create", 3, lambda n, v: _md(n["new"] + f"-auto-v{v}", auto=True)),
    Case("metadata/invalid-topic-name", 3, lambda n, v: _md("bad name!")),
    Case("list-offsets/earliest", 2, lambda n, v: _lo(n["topic"], [0, 1, 2], -2)),
    Case("list-offsets/latest", 2, lambda n, v: _lo(n["topic"], [0, 1, 2], -1)),
    Case("list-offsets/bad-partition", 2, lambda n, v: _lo(n["topic"], [7], -1)),
    Case("list-offsets/unknown-topic", 2, lambda n, v: _lo(n["missing"], [0], -1)),
    Case("create-topics/validate-only", 19, lambda n, v: _ct(n["new"] + f"-v{v}", 2)),
    Case("create-topics/already-exists", 19, lambda n, v: _ct(n["topic"], 3), ignore=frozenset({"error_message"})),
    Case("create-topics/invalid-name", 19, lambda n, v: _ct("bad name!"), ignore=frozenset({"error_message"})),
    Case("create-topics/bad-partition-count", 19, lambda n, v: _ct(n["new"] + "-z", -5),
         ignore=frozenset({"error_message"})),
    Case("create-topics/unknown-config", 19, lambda n, v: _ct(n["new"] + "-c", 1, {"no.such.config": "1"}),
         ignore=frozenset({"error_message"})),
    Case("create-topics/invalid-config-value", 19,
         lambda n, v: _ct(n["new"] + "-c2", 1, {"cleanup.policy": "sideways"}), ignore=frozenset({"error_message"})),
    Case("delete-topics/unknown-topic", 20, lambda n, v: DT(
        topic_names=[n["missing"]], topics=[DT.DeleteTopicState(name=n["missing"])], timeout_ms=10000),
         ignore=frozenset({"error_message"})),
    Case("create-partitions/decrease", 37, lambda n, v: CP(
        topics=[CP.CreatePartitionsTopic(name=n["topic"], count=2, assignments=None)], timeout_ms=10000,
        validate_only=True), ignore=frozenset({"error_message"})),
    Case("create-partitions/unknown-topic", 37, lambda n, v: CP(
        topics=[CP.CreatePartitionsTopic(name=n["missing"], count=4, assignments=None)], timeout_ms=10000,
        validate_only=True), ignore=frozenset({"error_message"})),
    Case("find-coordinator/group", 10, lambda n, v: FindCoordinatorRequest(
        key=n["group"], key_type=0, coordinator_keys=[n["group"]]), ignore=frozenset({"error_message"})),
    Case("join-group/new-member", 11, lambda n, v: _join(n["group"] + f"-j{v}"),
         ignore=frozenset({"member_id", "leader", "members"})),
    Case("join-group/unknown-member-id", 11, lambda n, v: _join(n["group"] + f"-u{v}", "nobody")),
    Case("heartbeat/unknown-group", 12, lambda n, v: HeartbeatRequest(
        group_id=n["group"] + "-none", generation_id=1, member_id="nobody")),
    Case("sync-group/unknown-member", 14, lambda n, v: SyncGroupRequest(
        group_id=n["group"] + "-none", generation_id=1, member_id="nobody", assignments=[])),
    Case("sync-group/unknown-member-with-protocol", 14, lambda n, v: SyncGroupRequest(
        group_id=n["group"] + "-none", generation_id=1, member_id="nobody", protocol_type="consumer",
        protocol_name="range", assignments=[])),
    Case("leave-group/unknown-member", 13, lambda n, v: _leave(n["group"] + "-none", "nobody")),
    Case("offset-commit/simple-group", 8, lambda n, v: _commit(n["group"] + "-c", n["topic"], -1, "")),
    Case("offset-commit/wrong-generation", 8, lambda n, v: _commit(n["group"] + "-c", n["topic"], 5, "nobody")),
    Case("offset-commit/unknown-topic", 8, lambda n, v: _commit(n["group"] + "-c", n["missing"], -1, "")),
    Case("offset-fetch/unknown-group", 9, lambda n, v: _fetch_offsets(n["group"] + "-none", n["topic"])),
    Case("describe-groups/unknown-group", 15, lambda n, v: DescribeGroupsRequest(groups=[n["group"] + "-none"])),
    Case("delete-groups/unknown-group", 42, lambda n, v: DeleteGroupsRequest(groups_names=[n["group"] + "-none"])),
    Case("init-producer-id/idempotent", 22, lambda n, v: InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000), ignore=frozenset({"producer_id"})),
]
