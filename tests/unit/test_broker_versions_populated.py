"""Populated requests at every advertised version: the answer encodes at that version.

Clients use only some versions; an older or newer client picks others. A
response field set to a non-default value in a version that lacks it would
make the broker drop the connection, so each API is driven with real data at
every version it advertises.
"""

from __future__ import annotations

import asyncio

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.create_partitions_request import CreatePartitionsRequest
from shoal.protocol.generated.create_topics_request import CreateTopicsRequest
from shoal.protocol.generated.delete_topics_request import DeleteTopicsRequest
from shoal.protocol.generated.describe_configs_request import DescribeConfigsRequest
from shoal.protocol.generated.describe_groups_request import DescribeGroupsRequest
from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from shoal.protocol.generated.heartbeat_request import HeartbeatRequest
from shoal.protocol.generated.join_group_request import JoinGroupRequest
from shoal.protocol.generated.leave_group_request import LeaveGroupRequest
from shoal.protocol.generated.list_groups_request import ListGroupsRequest
from shoal.protocol.generated.list_offsets_request import ListOffsetsRequest
from shoal.protocol.generated.metadata_request import MetadataRequest
from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest
from shoal.protocol.generated.offset_fetch_request import OffsetFetchRequest
from shoal.protocol.generated.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest
from shoal.protocol.generated.sync_group_request import SyncGroupRequest
from tests.unit.broker_harness import RawClient, batch, create_req, produce_one, running_broker


def versions(broker, api_key: ApiKey) -> range:
    api = broker.apis.get(api_key)
    return range(api.min_version, api.max_version + 1)


def test_admin_and_data_apis_with_data_at_every_version(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(b.nodes[0].port)
            for v in versions(b, ApiKey.CREATE_TOPICS):
                name = f"ct{v}"
                r = await c.call(ApiKey.CREATE_TOPICS, v, CreateTopicsRequest(timeout_ms=5000, topics=[
                    CreateTopicsRequest.CreatableTopic(name=name, num_partitions=2, replication_factor=1, configs=[
                        CreateTopicsRequest.CreatableTopicConfig(name="retention.ms", value="1000")])]))
                assert r.topics[0].error_code == 0, v
                await produce_one(c, name, 0, batch(3))
            for v in versions(b, ApiKey.METADATA):
                topics = [MetadataRequest.MetadataRequestTopic(name="ct0")]
                # v0-3 cannot say "no auto-create" (the field is v4+; its default is true)
                r = await c.call(ApiKey.METADATA, v, MetadataRequest(topics=topics, allow_auto_topic_creation=v < 4))
                assert r.topics[0].error_code == 0 and len(r.topics[0].partitions) == 2, v
            for v in versions(b, ApiKey.LIST_OFFSETS):
                r = await c.call(ApiKey.LIST_OFFSETS, v, ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
                    name="ct0", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
                part = r.topics[0].partitions[0]
                if v == 0:  # v0 answers a list of offsets (old_style_offsets)
                    assert (part.error_code, part.old_style_offsets) == (0, [3]), v
                else:
                    assert (part.error_code, part.offset) == (0, 3), v
            for v in versions(b, ApiKey.OFFSET_FOR_LEADER_EPOCH):
                r = await c.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, v, OffsetForLeaderEpochRequest(topics=[
                    OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic="ct0", partitions=[
                        OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, leader_epoch=0)])]))
                assert r.topics[0].partitions[0].end_offset == 3, v
            for v in versions(b, ApiKey.DESCRIBE_CONFIGS):
                r = await c.call(ApiKey.DESCRIBE_CONFIGS, v, DescribeConfigsRequest(resources=[
                    DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="ct0",
                                                                   configuration_keys=None),
                    DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="0",
                                                                   configuration_keys=None)],
                    include_synonyms=v >= 1))
                assert [x.error_code for x in r.results] == [0, 0], v
                assert any(e.name == "retention.ms" and e.value == "1000" for e in r.results[0].configs), v
            for v in versions(b, ApiKey.CREATE_PARTITIONS):
                r = await c.call(ApiKey.CREATE_PARTITIONS, v, CreatePartitionsRequest(timeout_ms=5000, topics=[
                    CreatePartitionsRequest.CreatePartitionsTopic(name="ct1", count=3 + v, assignments=None)]))
                assert r.results[0].error_code == 0, v
            for v in versions(b, ApiKey.DELETE_TOPICS):
                req = DeleteTopicsRequest(timeout_ms=5000)
                if v >= 6:
                    req.topics = [DeleteTopicsRequest.DeleteTopicState(name=f"ct{v}")]
                else:
                    req.topic_names = [f"ct{v}"]
                r = await c.call(ApiKey.DELETE_TOPICS, v, req)
                assert r.responses[0].error_code == 0, v
    asyncio.run(asyncio.wait_for(main(), 120))


def test_group_apis_with_data_at_every_version(tmp_path):
    """One member joins, syncs, heartbeats, commits, fetches and leaves at each JoinGroup version."""

    async def main():
        async with running_broker(tmp_path, offsets_topic_num_partitions="3") as b:
            c = await RawClient.connect(b.nodes[0].port)
            for v in versions(b, ApiKey.FIND_COORDINATOR):
                req = FindCoordinatorRequest(coordinator_keys=["g"]) if v >= 4 else FindCoordinatorRequest(key="g")
                r = await c.call(ApiKey.FIND_COORDINATOR, v, req)
                assert (r.coordinators[0].error_code if v >= 4 else r.error_code) == 0, v
            await b.coordinators.wait_loaded()
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("gt", 1))
            for jv in versions(b, ApiKey.JOIN_GROUP):
                group = f"g{jv}"
                join = JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                        member_id="", protocol_type="consumer", protocols=[
                                            JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")])
                r = await c.call(ApiKey.JOIN_GROUP, jv, join)
                if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                    join.member_id = r.member_id
                    r = await c.call(ApiKey.JOIN_GROUP, jv, join)
                assert r.error_code == 0, jv
                member, gen = r.member_id, r.generation_id
                sv = min(jv, max(versions(b, ApiKey.SYNC_GROUP)))
                r = await c.call(ApiKey.SYNC_GROUP, sv, SyncGroupRequest(
                    group_id=group, generation_id=gen, member_id=member, protocol_type="consumer",
                    protocol_name="range",
                    assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"a")]))
                assert (r.error_code, bytes(r.assignment)) == (0, b"a"), jv
                hv = min(jv, max(versions(b, ApiKey.HEARTBEAT)))
                r = await c.call(ApiKey.HEARTBEAT, hv, HeartbeatRequest(group_id=group, generation_id=gen, member_id=member))
                assert r.error_code == 0, jv
                # v0 carries no generation: a member's commit needs v1+ (v0 gets UNKNOWN_MEMBER_ID)
                cv = max(1, min(jv, max(versions(b, ApiKey.OFFSET_COMMIT))))
                r = await c.call(ApiKey.OFFSET_COMMIT, cv, OffsetCommitRequest(
                    group_id=group, generation_id_or_member_epoch=gen, member_id=member, topics=[
                        OffsetCommitRequest.OffsetCommitRequestTopic(name="gt", partitions=[
                            OffsetCommitRequest.OffsetCommitRequestPartition(
                                partition_index=0, committed_offset=7, committed_metadata="md")])]))
                assert r.topics[0].partitions[0].error_code == 0, jv
                for fv in versions(b, ApiKey.OFFSET_FETCH):
                    if fv >= 8:
                        req = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                            group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopics(
                                name="gt", partition_indexes=[0])])])
                        r = await c.call(ApiKey.OFFSET_FETCH, fv, req)
                        got = r.groups[0].topics[0].partitions[0].committed_offset
                    else:
                        req = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
                            name="gt", partition_indexes=[0])])
                        r = await c.call(ApiKey.OFFSET_FETCH, fv, req)
                        got = r.topics[0].partitions[0].committed_offset
                    assert got == 7, (jv, fv)
                for dv in versions(b, ApiKey.DESCRIBE_GROUPS):
                    r = await c.call(ApiKey.DESCRIBE_GROUPS, dv, DescribeGroupsRequest(groups=[group]))
                    assert (r.groups[0].error_code, len(r.groups[0].members)) == (0, 1), (jv, dv)
                for lv in versions(b, ApiKey.LIST_GROUPS):
                    r = await c.call(ApiKey.LIST_GROUPS, lv, ListGroupsRequest(states_filter=[]))
                    assert group in {g.group_id for g in r.groups}, (jv, lv)
                lv = min(jv, max(versions(b, ApiKey.LEAVE_GROUP)))
                leave = LeaveGroupRequest(group_id=group)
                if lv >= 3:
                    leave.members = [LeaveGroupRequest.MemberIdentity(member_id=member)]
                else:
                    leave.member_id = member
                r = await c.call(ApiKey.LEAVE_GROUP, lv, leave)
                assert r.error_code == 0, jv
    asyncio.run(asyncio.wait_for(main(), 120))
