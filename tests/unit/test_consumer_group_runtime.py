"""The consumer group type through GroupCoordinatorRuntime over a real log (no sockets): requests
routed and split per partition, and the group reloaded from `__consumer_offsets` by another runtime
(coordinator fail-over: state is the replay of the log)."""

from __future__ import annotations

import asyncio

from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.consumer.topics import StaticTopics, TopicMeta
from shoal.coordinator.group.runtime import GroupCoordinatorRuntime
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.consumer_group_describe_request import ConsumerGroupDescribeRequest
from shoal.protocol.generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from shoal.storage.config import LogConfig
from shoal.storage.manager import LogManager
from tests.unit.consumer_group_harness import TOPIC_IDS, SpreadAssignor

CFG = GroupConfig(offsets_topic_num_partitions=4)
GROUPS = [f"cg-{i}" for i in range(6)]


def _runtime(lm: LogManager) -> GroupCoordinatorRuntime:
    topics = StaticTopics([TopicMeta(topic_id=TOPIC_IDS["t"], name="t", num_partitions=4)])
    return GroupCoordinatorRuntime(1, lm, CFG, topics=topics, assignors={"uniform": SpreadAssignor("uniform")})


def _join(gid: str, member: str) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(group_id=gid, member_id=member, member_epoch=0, rebalance_timeout_ms=1000,
                                         subscribed_topic_names=["t"], topic_partitions=[])


async def _scenario(tmp_path) -> None:
    lm = LogManager([tmp_path], LogConfig())
    rt = _runtime(lm)
    for p in range(4):
        await rt.load_partition(p)
    for gid in GROUPS:
        r = await rt.handle(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, _join(gid, "m"), client_id="c",
                            client_host="/127.0.0.1")
        assert (r.error_code, r.member_epoch) == (0, 2)
    assert len({rt.partition_for(g) for g in GROUPS}) > 1  # the describe below is split
    ask = ConsumerGroupDescribeRequest(group_ids=[*GROUPS, "nope"])
    d = await rt.handle(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, ask)
    assert [g.group_id for g in d.groups] == [*GROUPS, "nope"]
    assert [g.group_state for g in d.groups[:-1]] == ["Stable"] * len(GROUPS)
    await rt.close()
    lm.close()
    # Fail-over: another runtime loads the partitions from the log.
    lm2 = LogManager([tmp_path], LogConfig())
    rt2 = _runtime(lm2)
    for p in range(4):
        await rt2.load_partition(p)
    d2 = await rt2.handle(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, ask)
    assert d2 == d
    hb = ConsumerGroupHeartbeatRequest(group_id=GROUPS[0], member_id="m", member_epoch=2,
                                       topic_partitions=[ConsumerGroupHeartbeatRequest.TopicPartitions(
                                           topic_id=TOPIC_IDS["t"], partitions=[0, 1, 2, 3])])
    r = await rt2.handle(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, hb)
    assert (r.error_code, r.member_epoch) == (0, 2)
    await rt2.close()
    lm2.close()


def test_runtime_routes_splits_and_reloads(tmp_path) -> None:
    asyncio.run(asyncio.wait_for(_scenario(tmp_path), 20))
