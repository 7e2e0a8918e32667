"""Describe, Alter and DeleteShareGroupOffsets over a socket: start offsets and lag of a share group."""

from __future__ import annotations

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.alter_share_group_offsets_request import AlterShareGroupOffsetsRequest
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.delete_share_group_offsets_request import DeleteShareGroupOffsetsRequest
from shoal.protocol.generated.describe_share_group_offsets_request import DescribeShareGroupOffsetsRequest
from shoal.protocol.generated.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from tests.unit.broker_harness import RawClient, run, running_broker
from tests.unit.test_share_fetch import ACCEPT, Member, acquired, setup


async def heartbeat(c: RawClient, member: Member, epoch: int) -> int:
    resp = await c.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, ShareGroupHeartbeatRequest(
        group_id=member.group, member_id=member.member_id, member_epoch=epoch,
        subscribed_topic_names=["q"] if epoch == 0 else None))
    assert resp.error_code == 0, resp
    return resp.member_epoch


async def describe(c: RawClient, group: str, version: int = 1, topics: list | None = None):  # noqa: ANN201
    d = DescribeShareGroupOffsetsRequest
    req = d(groups=[d.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics)])
    return (await c.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version, req)).groups[0]


def alter(group: str, offset: int) -> AlterShareGroupOffsetsRequest:
    a = AlterShareGroupOffsetsRequest
    return a(group_id=group, topics=[a.AlterShareGroupOffsetsRequestTopic(topic_name="q", partitions=[
        a.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=offset)])])


def test_describe_alter_and_delete_share_group_offsets(tmp_path):
    async def go():
        async with running_broker(tmp_path) as broker:
            c, tid = await setup(broker, records=6)
            m = Member(c, "sg", tid)
            await broker.coordinators.locate("sg")  # as FindCoordinator does: the offsets topic exists
            await broker.coordinators.wait_loaded()
            epoch = await heartbeat(c, m, 0)
            assert acquired(await m.fetch(max_records=3)) == [(0, 2, 1)]
            r = await m.ack([(0, 1, [ACCEPT])])
            assert r.error_code == 0
            g = await describe(c, "sg")
            assert g.error_code == 0 and [t.topic_name for t in g.topics] == ["q"]
            p = g.topics[0].partitions[0]
            assert (p.partition_index, p.start_offset, p.lag, p.error_code) == (0, 2, 4, 0)
            # v0 has no lag; unknown groups and partitions answer with errors
            assert (await describe(c, "sg", version=0)).topics[0].partitions[0].start_offset == 2
            assert (await describe(c, "nope")).error_code == ErrorCode.GROUP_ID_NOT_FOUND
            d = DescribeShareGroupOffsetsRequest
            g = await describe(c, "sg", topics=[d.DescribeShareGroupOffsetsRequestTopic(topic_name="q",
                                                                                         partitions=[0, 5])])
            assert [x.error_code for x in g.topics[0].partitions] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
            # a group with members may not be altered
            resp = await c.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter("sg", 4))
            assert resp.error_code == ErrorCode.NON_EMPTY_GROUP
            await m.ack([], final=True)
            await heartbeat(c, m, -1)
            assert epoch > 0
            resp = await c.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter("sg", 4))
            assert resp.error_code == 0 and resp.responses[0].partitions[0].error_code == 0
            p = (await describe(c, "sg")).topics[0].partitions[0]
            assert (p.start_offset, p.lag) == (4, 2)
            # the next member starts at 4, with no memory of the earlier deliveries
            m2 = Member(c, "sg", tid)
            await heartbeat(c, m2, 0)
            assert acquired(await m2.fetch()) == [(4, 5, 1)]
            await m2.ack([], final=True)
            await heartbeat(c, m2, -1)
            # deleted: the group starts over at share.auto.offset.reset (earliest here)
            resp = await c.call(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, DeleteShareGroupOffsetsRequest(
                group_id="sg", topics=[DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(
                    topic_name="q")]))
            assert resp.error_code == 0 and resp.responses[0].error_code == 0
            # the topic leaves the group's offsets; deleting again finds nothing (Kafka's answer)
            assert (await describe(c, "sg")).topics == []
            resp = await c.call(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, DeleteShareGroupOffsetsRequest(
                group_id="sg", topics=[DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(
                    topic_name="q")]))
            assert (resp.responses[0].error_code, resp.responses[0].error_message) == (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")
            m3 = Member(c, "sg", tid)
            assert acquired(await m3.fetch()) == [(0, 5, 1)]
            await c.close()
    run(go())


def test_the_last_acknowledgements_of_a_member_that_leaves_still_apply(tmp_path):
    """librdkafka's close sends its leave heartbeat beside its final ShareAcknowledge (epoch -1); the
    heartbeat may be applied first, and the acknowledgements still count (as Kafka)."""
    async def go():
        async with running_broker(tmp_path) as broker:
            c, tid = await setup(broker, records=4)
            await broker.coordinators.locate("sg")
            await broker.coordinators.wait_loaded()
            m = Member(c, "sg", tid)
            await heartbeat(c, m, 0)
            assert acquired(await m.fetch(max_records=4)) == [(0, 3, 1)]
            await heartbeat(c, m, -1)
            r = await m.ack([(0, 3, [ACCEPT])], final=True)
            assert r.error_code == 0 and [p.error_code for t in r.responses for p in t.partitions] == [0]
            assert broker.share.partition("sg", "q", 0).start_offset == 4
            await c.close()
    run(go())
