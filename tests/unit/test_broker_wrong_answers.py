"""Answers Kafka gives that shoal once got wrong (issue: every client at every version)."""

from __future__ import annotations

from shoal.protocol import compression
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest
from shoal.protocol.record_encode import build_batch
from tests.unit.broker_harness import (
    RawClient,
    batch,
    create_req,
    port,
    produce_one,
    produce_req,
    run,
    running_broker,
)


def test_zstd_needs_produce_v7(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            zstd = build_batch([(1000, b"k", b"v" * 100, [])], compression=compression.ZSTD)
            for version in (3, 5, 6):
                r = await c.call(ApiKey.PRODUCE, version, produce_req("t", 0, zstd))
                assert r.responses[0].partition_responses[0].error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
            r = await c.call(ApiKey.PRODUCE, 7, produce_req("t", 0, zstd))
            assert r.responses[0].partition_responses[0].error_code == 0
            lz4 = build_batch([(1000, b"k", b"v" * 100, [])], compression=compression.LZ4)
            r = await c.call(ApiKey.PRODUCE, 3, produce_req("t", 0, lz4))
            assert r.responses[0].partition_responses[0].error_code == 0
            assert b.partition_log("t", 0).log_end_offset == 2
    run(main())


def test_offset_commit_to_a_topic_that_does_not_exist(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("real"))
            await c.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g", key_type=0))  # makes __consumer_offsets
            topic = OffsetCommitRequest.OffsetCommitRequestTopic
            part = OffsetCommitRequest.OffsetCommitRequestPartition
            for version in (2, 8):
                r = await c.call(ApiKey.OFFSET_COMMIT, version, OffsetCommitRequest(
                    group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
                        topic(name="nope", partitions=[part(partition_index=0, committed_offset=5),
                                                       part(partition_index=1, committed_offset=5)]),
                        topic(name="real", partitions=[part(partition_index=0, committed_offset=7)])]))
                got = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
                assert got == {("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               ("nope", 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("real", 0): 0}, got
                only = await c.call(ApiKey.OFFSET_COMMIT, version, OffsetCommitRequest(
                    group_id="g", generation_id_or_member_epoch=-1, member_id="",
                    topics=[topic(name="nope", partitions=[part(partition_index=0, committed_offset=1)])]))
                assert only.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    run(main())


def test_txn_offset_commit_to_a_topic_that_does_not_exist(tmp_path):
    """As Kafka's KafkaApis: a topic that does not exist is answered before the transaction is
    looked at; the topic that exists gets the transaction's answer (here: none is open)."""
    from shoal.protocol.generated.txn_offset_commit_request import TxnOffsetCommitRequest

    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("real"))
            await c.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g", key_type=0))
            topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
            part = TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
            for version in (0, 3):
                r = await c.call(ApiKey.TXN_OFFSET_COMMIT, version, TxnOffsetCommitRequest(
                    transactional_id="tx", group_id="g", producer_id=1000, producer_epoch=0, topics=[
                        topic(name="nope", partitions=[part(partition_index=0, committed_offset=5)]),
                        topic(name="real", partitions=[part(partition_index=0, committed_offset=7)])]))
                got = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
                assert got[("nope", 0)] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, got
                assert got[("real", 0)] not in (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), got
    run(main())


def test_describe_configs_reports_kafkas_config_types(tmp_path):
    from shoal.protocol.generated.describe_configs_request import DescribeConfigsRequest

    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            r = await c.call(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(include_synonyms=False, include_documentation=False,
                                                           resources=[
                DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="t",
                                                               configuration_keys=None),
                DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name=str(b.node_ids[0]),
                                                               configuration_keys=None)]))
            topic = {e.name: e.config_type for e in r.results[0].configs}
            node = {e.name: e.config_type for e in r.results[1].configs}
            # BOOLEAN 1, STRING 2, INT 3, SHORT 4, LONG 5, LIST 7
            assert topic["cleanup.policy"] == 7 and topic["retention.ms"] == 5 and topic["segment.bytes"] == 3
            assert topic["compression.type"] == 2 and topic["min.insync.replicas"] == 3
            assert node["auto.create.topics.enable"] == 1 and node["offsets.topic.replication.factor"] == 4
            # listeners is a LIST in Kafka's ConfigDef (Apache Kafka 4.4 reports 7: tests/reference)
            assert node["log.retention.ms"] == 5 and node["listeners"] == 7
            assert 0 not in topic.values() and 0 not in node.values()
    run(main())


def test_list_offsets_v0_as_kafka_3(tmp_path):
    """Burrow and other old clients send ListOffsets v0: offsets of segment starts and the log
    end, newest first, at most max_num_offsets (Kafka 3.x's legacyFetchOffsetsBefore)."""
    from shoal.protocol.generated.list_offsets_request import ListOffsetsRequest

    def req(ts: int, n: int) -> ListOffsetsRequest:
        return ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=ts, max_num_offsets=n)])])

    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t", configs={"segment.bytes": "1000"}))
            for _ in range(6):
                await produce_one(c, "t", 0, batch(3, size=200))  # ~one segment per batch
            bases = [s.base_offset for s in b.partition_log("t", 0).segments]
            assert len(bases) >= 3
            latest = (await c.call(ApiKey.LIST_OFFSETS, 0, req(-1, 1))).topics[0].partitions[0]
            assert latest.error_code == 0 and latest.old_style_offsets == [18]
            earliest = (await c.call(ApiKey.LIST_OFFSETS, 0, req(-2, 1))).topics[0].partitions[0]
            assert earliest.old_style_offsets == [0]
            many = (await c.call(ApiKey.LIST_OFFSETS, 0, req(-1, 100))).topics[0].partitions[0]
            assert many.old_style_offsets == sorted({18, *bases}, reverse=True)
            before_all = (await c.call(ApiKey.LIST_OFFSETS, 0, req(1000, 5))).topics[0].partitions[0]
            assert before_all.old_style_offsets == []  # every segment is newer than 1970
            unknown = await c.call(ApiKey.LIST_OFFSETS, 0, ListOffsetsRequest(replica_id=-1, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name="nope", partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1, max_num_offsets=1)])]))
            assert unknown.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    run(main())
