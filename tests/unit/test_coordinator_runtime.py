"""GroupCoordinatorRuntime over a real LogManager in a tmp dir (no sockets)."""

from __future__ import annotations

import asyncio
import errno
import os

from shoal import fileio
from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.runtime import OFFSETS_TOPIC, GroupCoordinatorRuntime
from shoal.protocol.errors import ErrorCode as E
from shoal.protocol.generated.describe_groups_request import DescribeGroupsRequest
from shoal.protocol.generated.heartbeat_request import HeartbeatRequest
from shoal.protocol.generated.join_group_request import JoinGroupRequest
from shoal.protocol.generated.list_groups_request import ListGroupsRequest
from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest
from shoal.protocol.generated.offset_fetch_request import OffsetFetchRequest
from shoal.protocol.generated.sync_group_request import SyncGroupRequest
from shoal.storage.config import LogConfig
from shoal.storage.manager import LogManager

CFG = GroupConfig(offsets_topic_num_partitions=4, group_initial_rebalance_delay_ms=0)


def _commit(gid: str, offsets: dict[tuple[str, int], int]) -> OffsetCommitRequest:
    topics: dict[str, list] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=p,
                                                                                           committed_offset=o))
    return OffsetCommitRequest(group_id=gid, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()])


def _fetch(gid: str, topic: str, parts: list[int]) -> OffsetFetchRequest:
    return OffsetFetchRequest(group_id=gid, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=parts)])


async def _scenario(tmp_path) -> None:
    lm = LogManager([tmp_path], LogConfig())
    rt = GroupCoordinatorRuntime(1, lm, CFG)
    for p in range(4):
        await rt.load_partition(p)
    assert rt.owned_partitions() == {0, 1, 2, 3}
    groups = [f"group-{i}" for i in range(8)]
    for i, g in enumerate(groups):
        r = await rt.handle(8, 8, _commit(g, {("t", 0): 100 + i, ("t", 1): 200 + i}))
        assert all(p.error_code == 0 for t in r.topics for p in t.partitions)
    # A classic group forms through the runtime (parked JoinGroup answered by the same call).
    join = JoinGroupRequest(group_id="cg", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                            protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")])
    r = await rt.handle(11, 3, join, client_id="cli", client_host="/127.0.0.1")
    assert r.error_code == 0 and r.generation_id == 1
    mid = r.member_id
    s = await rt.handle(14, 3, SyncGroupRequest(group_id="cg", generation_id=1, member_id=mid, assignments=[
        SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid, assignment=b"A")]))
    assert s.error_code == 0 and s.assignment == b"A"
    hb = await rt.handle(12, 3, HeartbeatRequest(group_id="cg", generation_id=1, member_id=mid))
    assert hb.error_code == 0
    listed = await rt.handle(16, 4, ListGroupsRequest(states_filter=[]))
    assert {g.group_id for g in listed.groups} == set(groups) | {"cg"}
    await rt.close()
    lm.close()

    # Another runtime instance over the same files sees the same offsets and group.
    lm2 = LogManager([tmp_path], LogConfig())
    lm2.load_existing()
    rt2 = GroupCoordinatorRuntime(2, lm2, CFG)
    assert (await rt2.handle(9, 5, _fetch("group-0", "t", [0]))).error_code == E.NOT_COORDINATOR
    for p in range(4):
        await rt2.load_partition(p)
    for i, g in enumerate(groups):
        r = await rt2.handle(9, 5, _fetch(g, "t", [0, 1, 2]))
        got = [(p.partition_index, p.committed_offset) for t in r.topics for p in t.partitions]
        assert got == [(0, 100 + i), (1, 200 + i), (2, -1)]
    d = await rt2.handle(15, 5, DescribeGroupsRequest(groups=["cg", "group-1"]))
    assert [(g.group_id, g.group_state) for g in d.groups] == [("cg", "Stable"), ("group-1", "Empty")]
    assert d.groups[0].members[0].member_assignment == b"A"
    # Unloading a partition: NOT_COORDINATOR for its groups.
    p_cg = rt2.partition_for("cg")
    rt2.unload_partition(p_cg)
    hb = await rt2.handle(12, 3, HeartbeatRequest(group_id="cg", generation_id=1, member_id=mid))
    assert hb.error_code == E.NOT_COORDINATOR
    d = await rt2.handle(15, 5, DescribeGroupsRequest(groups=["cg"]))
    assert d.groups[0].error_code == E.NOT_COORDINATOR
    await rt2.close()
    lm2.close()
    assert (tmp_path / f"{OFFSETS_TOPIC}-0").is_dir()


def test_runtime_persists_and_reloads(tmp_path) -> None:
    asyncio.run(asyncio.wait_for(_scenario(tmp_path), 30))


async def _parked_join_released_by_timer(tmp_path) -> None:
    lm = LogManager([tmp_path], LogConfig())
    cfg = GroupConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=50)
    rt = GroupCoordinatorRuntime(1, lm, cfg)
    await rt.load_partition(0)
    join = JoinGroupRequest(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                            protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")])
    r = await rt.handle(11, 3, join)  # answered by the timer task after the initial delay
    assert r.error_code == 0 and r.generation_id == 1
    # A parked request is answered NOT_COORDINATOR when its partition is unloaded.
    join2 = JoinGroupRequest(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                             protocol_type="consumer",
                             protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")])
    task = asyncio.create_task(rt.handle(11, 3, join2))
    await asyncio.sleep(0.05)
    assert not task.done()
    rt.unload_partition(0)
    assert (await task).error_code == E.NOT_COORDINATOR
    await rt.close()
    lm.close()


def test_runtime_timer_and_unload(tmp_path) -> None:
    asyncio.run(asyncio.wait_for(_parked_join_released_by_timer(tmp_path), 30))


class _FullDisk:
    """The real disk, whose appends to __consumer_offsets fail with ENOSPC while ``full``."""

    def __init__(self) -> None:
        self.full = False

    def __getattr__(self, name: str) -> object:
        return getattr(fileio.OS_DISK, name)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.pwrite(fd, data, offset)


async def _commit_on_a_full_disk(tmp_path) -> None:
    lm = LogManager([tmp_path], LogConfig())
    rt = GroupCoordinatorRuntime(1, lm, CFG)
    for p in range(4):
        await rt.load_partition(p)
    r = await rt.handle(8, 8, _commit("g", {("t", 0): 5}))
    assert r.topics[0].partitions[0].error_code == 0
    disk = _FullDisk()
    fileio.set_disk(disk)
    try:
        disk.full = True
        r = await rt.handle(8, 8, _commit("g", {("t", 0): 9}))
        # as Kafka's coordinator: a storage error is "find the coordinator again", which every client
        # retries (KAFKA_STORAGE_ERROR is fatal to Java's commitSync)
        assert r.topics[0].partitions[0].error_code == E.NOT_COORDINATOR
        disk.full = False
        for _ in range(100):  # the shard is rebuilt from its log, which never got the 9
            f = await rt.handle(9, 7, _fetch("g", "t", [0]))
            if f.error_code == 0 and f.topics[0].partitions[0].error_code == 0:
                break
            await asyncio.sleep(0.01)
        assert f.topics[0].partitions[0].committed_offset == 5
    finally:
        fileio.reset_disk()
        await rt.close()
        lm.close()


def test_a_failed_coordinator_write_answers_not_coordinator_and_keeps_the_log_state(tmp_path) -> None:
    asyncio.run(asyncio.wait_for(_commit_on_a_full_disk(tmp_path), 30))


async def _close_after_a_failed_write(tmp_path) -> None:
    lm = LogManager([tmp_path], LogConfig())
    rt = GroupCoordinatorRuntime(1, lm, CFG)
    for p in range(4):
        await rt.load_partition(p)
    disk = _FullDisk()
    fileio.set_disk(disk)
    try:
        disk.full = True
        await rt.handle(8, 8, _commit("g", {("t", 0): 9}))
        disk.full = False
        await rt.close()  # a restart, or the partition moving away, before the rebuild starts
        await asyncio.sleep(0.3)
        # no rebuild after the close: a zombie shard would write beside the partition's new owner
        # (simulator seeds 566 and 823: it overwrote the new coordinator's offset commits)
        assert rt.owned_partitions() == set()
    finally:
        fileio.reset_disk()
        lm.close()


def test_a_rebuild_after_a_failed_write_does_not_outlive_the_runtime(tmp_path) -> None:
    asyncio.run(asyncio.wait_for(_close_after_a_failed_write(tmp_path), 30))


async def _node_stops_before_the_rebuild(tmp_path) -> None:
    from tests.unit.broker_harness import running_broker

    async with running_broker(tmp_path, nodes=2, offsets_topic_num_partitions="1") as broker:
        coordinators = broker.coordinators
        coordinators.ensure_topic()
        await coordinators.on_leadership_changed()
        await coordinators.wait_loaded()
        first = broker.metadata.leader(OFFSETS_TOPIC, 0)
        other = next(n for n in broker.node_ids if n != first)
        r = await coordinators.runtime(first).handle(8, 8, _commit("g", {("t", 0): 5}))
        assert r.topics[0].partitions[0].error_code == 0
        disk = _FullDisk()
        fileio.set_disk(disk)
        try:
            disk.full = True
            r = await coordinators.runtime(first).handle(8, 8, _commit("g", {("t", 0): 6}))
            assert r.topics[0].partitions[0].error_code == E.NOT_COORDINATOR  # a rebuild is due in 0.1 s
        finally:
            fileio.reset_disk()
        await broker.stop_node(first)  # before the rebuild: the partition moves to the other node
        await asyncio.sleep(0.3)
        await coordinators.wait_loaded()
        r = await coordinators.runtime(other).handle(8, 8, _commit("g", {("t", 0): 7}))
        assert r.topics[0].partitions[0].error_code == 0
        await broker.start_node(first)  # the preferred leader again: it must replay the log, with the 7
        await coordinators.wait_loaded()
        assert broker.metadata.leader(OFFSETS_TOPIC, 0) == first
        f = await coordinators.runtime(first).handle(9, 7, _fetch("g", "t", [0]))
        # simulator seed 4347: the rebuild had run on the stopped node, and its shard, from before the
        # 7, served on its return
        assert f.topics[0].partitions[0].committed_offset == 7


def test_a_rebuild_after_a_failed_write_does_not_run_on_a_stopped_node(tmp_path) -> None:
    asyncio.run(asyncio.wait_for(_node_stops_before_the_rebuild(tmp_path), 30))
