"""The share coordinator (KIP-932): share-partition state in `__share_group_state`."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from shoal.coordinator.partitioning import partition_for
from shoal.coordinator.share.records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareKey,
    ShareUpdate,
    decode_key,
    decode_snapshot,
    snapshot_key,
    update_key,
    update_value,
)
from shoal.coordinator.share.runtime import (
    SHARE_STATE_TOPIC,
    ShareCoordinatorRuntime,
    coordinator_key,
    kafka_uuid,
    parse_coordinator_key,
)
from shoal.coordinator.share.shard import ShareCoordinatorShard
from shoal.coordinator.share.state import ShareState, StateBatch, combine_batches
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from shoal.storage import LogConfig, LogManager
from tests.unit.broker_harness import RawClient, port, run, running_broker

TOPIC = uuid.UUID("12345678-1234-5678-1234-567812345678")
KEY = ShareKey("g1", TOPIC, 3)


def replayed(shard: ShareCoordinatorShard, records: list[tuple[bytes, bytes | None]]) -> ShareCoordinatorShard:
    fresh = ShareCoordinatorShard(shard.partition)
    for k, v in records:
        fresh.replay(k, v)
    return fresh


# ---------------------------------------------------------------- batches


def test_combine_prunes_below_start_and_cuts_straddling_batches():
    old = [StateBatch(0, 9, 2, 1), StateBatch(10, 19, 0, 1)]
    assert combine_batches(old, [], 15) == [StateBatch(15, 19, 0, 1)]


def test_combine_higher_delivery_count_then_state_wins_and_neighbours_coalesce():
    old = [StateBatch(0, 9, 0, 1)]
    new = [StateBatch(5, 14, 0, 2)]
    assert combine_batches(old, new, 0) == [StateBatch(0, 4, 0, 1), StateBatch(5, 14, 0, 2)]
    # same count: the higher state (acknowledged over available) wins
    assert combine_batches([StateBatch(0, 9, 0, 1)], [StateBatch(3, 4, 2, 1)], -1) == [
        StateBatch(0, 2, 0, 1), StateBatch(3, 4, 2, 1), StateBatch(5, 9, 0, 1)]
    # adjacent equal batches become one
    assert combine_batches([StateBatch(0, 4, 2, 1)], [StateBatch(5, 9, 2, 1)], 0) == [StateBatch(0, 9, 2, 1)]


# ---------------------------------------------------------------- records


def test_record_keys_carry_kafkas_record_types():
    assert snapshot_key(KEY)[:2] == SHARE_SNAPSHOT.to_bytes(2, "big")
    assert update_key(KEY)[:2] == SHARE_UPDATE.to_bytes(2, "big")
    assert decode_key(snapshot_key(KEY)) == (SHARE_SNAPSHOT, KEY)
    assert decode_key(update_key(KEY)) == (SHARE_UPDATE, KEY)


# ---------------------------------------------------------------- shard


def test_write_read_and_replay():
    shard = ShareCoordinatorShard(0)
    state = ShareState(state_epoch=1, leader_epoch=2, start_offset=10,
                       state_batches=[StateBatch(12, 14, 2, 1), StateBatch(10, 11, 0, 3)])
    error, result = shard.write(KEY, state, now_ms=1000)
    assert error == ErrorCode.NONE
    [(k, v)] = result.records
    assert decode_key(k) == (SHARE_SNAPSHOT, KEY)
    assert v is not None and decode_snapshot(v).snapshot_epoch == 0
    got = shard.read(KEY)
    assert got is not None
    assert got.start_offset == 10 and got.state_epoch == 1 and got.leader_epoch == 2
    assert got.state_batches == [StateBatch(10, 11, 0, 3), StateBatch(12, 14, 2, 1)]
    assert got.create_timestamp == got.write_timestamp == 1000
    # a second write replaces the state, bumps the snapshot epoch, keeps the creation time
    error, result2 = shard.write(KEY, ShareState(state_epoch=1, leader_epoch=2, start_offset=12,
                                                 state_batches=[StateBatch(12, 12, 4, 5)]), now_ms=2000)
    assert error == ErrorCode.NONE
    got = shard.read(KEY)
    assert got is not None
    assert got.state_batches == [StateBatch(12, 12, 4, 5)] and got.snapshot_epoch == 1
    assert got.create_timestamp == 1000 and got.write_timestamp == 2000
    fresh = replayed(shard, result.records + result2.records)
    assert fresh.states == shard.states


def test_write_update_merges_and_never_moves_the_start_back():
    shard = ShareCoordinatorShard(0)
    shard.write(KEY, ShareState(state_epoch=0, leader_epoch=1, start_offset=0,
                                state_batches=[StateBatch(0, 9, 0, 1)]), 1)
    error, _ = shard.write_update(KEY, 0, 1, 5, [StateBatch(8, 12, 2, 1)], 2)
    assert error == ErrorCode.NONE
    got = shard.read(KEY)
    assert got is not None
    assert got.start_offset == 5
    assert got.state_batches == [StateBatch(5, 7, 0, 1), StateBatch(8, 12, 2, 1)]
    shard.write_update(KEY, 0, 1, 2, [], 3)
    got = shard.read(KEY)
    assert got is not None and got.start_offset == 5


def test_fencing():
    shard = ShareCoordinatorShard(0)
    shard.write(KEY, ShareState(state_epoch=3, leader_epoch=5, start_offset=0), 1)
    assert shard.write(KEY, ShareState(state_epoch=2, leader_epoch=5), 2)[0] == ErrorCode.FENCED_STATE_EPOCH
    assert shard.write(KEY, ShareState(state_epoch=3, leader_epoch=4), 2)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert shard.initialize(KEY, 2, 0, 2)[0] == ErrorCode.FENCED_STATE_EPOCH
    error, result = shard.initialize(KEY, 4, 100, 3)
    assert error == ErrorCode.NONE and len(result.records) == 1
    got = shard.read(KEY)
    assert got is not None and got.state_epoch == 4 and got.start_offset == 100 and got.state_batches == []


def test_delete_writes_tombstones_and_replay_forgets():
    shard = ShareCoordinatorShard(0)
    other = ShareKey("g1", TOPIC, 4)
    records = []
    for k in (KEY, other):
        records += shard.write(k, ShareState(start_offset=0, state_batches=[StateBatch(0, 0, 2, 1)]), 1)[1].records
    error, result = shard.delete([KEY, ShareKey("absent", TOPIC, 0)])
    assert error == ErrorCode.NONE
    assert result.records == [(snapshot_key(KEY), None), (update_key(KEY), None)]
    assert shard.read(KEY) is None and shard.read(other) is not None
    fresh = replayed(shard, records + result.records)
    assert fresh.states == shard.states


def test_replay_of_kafka_share_update_records():
    shard = ShareCoordinatorShard(0)
    records = shard.write(KEY, ShareState(start_offset=0, leader_epoch=1,
                                          state_batches=[StateBatch(0, 9, 0, 1)]), 1)[1].records
    # an update of the current snapshot epoch merges; one of an older epoch is ignored
    stale = update_value(ShareUpdate(snapshot_epoch=7, leader_epoch=1, start_offset=-1, delivery_complete_count=-1,
                                     state_batches=[StateBatch(0, 9, 4, 9)]))
    current = update_value(ShareUpdate(snapshot_epoch=0, leader_epoch=2, start_offset=-1, delivery_complete_count=3,
                                       state_batches=[StateBatch(2, 3, 2, 1)]))
    fresh = replayed(shard, [*records, (update_key(KEY), stale), (update_key(KEY), current)])
    got = fresh.read(KEY)
    assert got is not None
    assert got.leader_epoch == 2 and got.start_offset == 0 and got.delivery_complete_count == 3
    assert got.state_batches == [StateBatch(0, 1, 0, 1), StateBatch(2, 3, 2, 1), StateBatch(4, 9, 0, 1)]


def test_coordinator_key_and_partitioning_are_kafkas():
    key = coordinator_key("a:b", TOPIC, 7)
    assert key == f"a:b:{kafka_uuid(TOPIC)}:7"
    assert parse_coordinator_key(key) == ShareKey("a:b", TOPIC, 7)
    for bad in ("", "onlytwo:parts", f":{kafka_uuid(TOPIC)}:0", "group:not-a-uuid:0", f"g:{kafka_uuid(TOPIC)}:abc"):
        with pytest.raises(ValueError):
            parse_coordinator_key(bad)
    rt = ShareCoordinatorRuntime(0, None)
    assert rt.key_partition("a:b", TOPIC, 7) == partition_for(key, 50)


# ---------------------------------------------------------------- runtime on a real log


def test_runtime_writes_then_reloads_from_the_log(tmp_path):
    async def main():
        logs = LogManager([tmp_path], LogConfig())
        rt = ShareCoordinatorRuntime(0, logs)
        p = rt.key_partition("g1", TOPIC, 3)
        assert await rt.read_state("g1", TOPIC, 3) == (ErrorCode.NOT_COORDINATOR, None)
        await rt.load_partition(p)
        assert await rt.read_state("g1", TOPIC, 3) == (ErrorCode.NONE, None)
        state = ShareState(state_epoch=1, leader_epoch=0, start_offset=5,
                           state_batches=[StateBatch(5, 6, 2, 1), StateBatch(7, 7, 0, 2)])
        assert await rt.write_state("g1", TOPIC, 3, state) == ErrorCode.NONE
        assert await rt.write_update("g1", TOPIC, 3, state_epoch=1, leader_epoch=0, start_offset=-1,
                                     batches=[(8, 9, 4, 5)]) == ErrorCode.NONE
        code, before = await rt.read_state("g1", TOPIC, 3)
        assert code == ErrorCode.NONE and before is not None
        assert before.state_batches == [StateBatch(5, 6, 2, 1), StateBatch(7, 7, 0, 2), StateBatch(8, 9, 4, 5)]
        await rt.close()
        logs.close()

        logs = LogManager([tmp_path], LogConfig())
        rt = ShareCoordinatorRuntime(0, logs)
        await rt.load_partition(p)
        assert await rt.read_state("g1", TOPIC, 3) == (ErrorCode.NONE, before)
        assert await rt.delete_state("g1", TOPIC, [3]) == ErrorCode.NONE
        await rt.close()
        logs.close()

        logs = LogManager([tmp_path], LogConfig())
        rt = ShareCoordinatorRuntime(0, logs)
        await rt.load_partition(p)
        assert await rt.read_state("g1", TOPIC, 3) == (ErrorCode.NONE, None)
        await rt.close()
        logs.close()

    run(main())


# ---------------------------------------------------------------- the broker


def test_broker_persists_share_state_across_a_restart(tmp_path):
    state = ShareState(state_epoch=0, leader_epoch=0, start_offset=0, state_batches=[StateBatch(0, 4, 2, 1)])

    async def first():
        async with running_broker(tmp_path) as broker:
            assert SHARE_STATE_TOPIC not in broker.metadata.topics
            assert await broker.share_coordinators.write_state("g", TOPIC, 0, state) == ErrorCode.NONE
            info = broker.metadata.topics[SHARE_STATE_TOPIC]
            assert info.num_partitions == 50 and info.is_internal
            assert info.configs["min.insync.replicas"] == "1"  # capped to the single node
            code, got = await broker.share_coordinators.read_state("g", TOPIC, 0)
            assert code == ErrorCode.NONE and got is not None and got.state_batches == state.state_batches
            assert await broker.share_coordinators.read_state("g", TOPIC, 1) == (ErrorCode.NONE, None)

    async def second():
        async with running_broker(tmp_path) as broker:
            code, got = await broker.share_coordinators.read_state("g", TOPIC, 0)
            assert code == ErrorCode.NONE and got is not None
            assert got.start_offset == 0 and got.state_batches == state.state_batches

    run(first())
    run(second())


def test_find_coordinator_share_key(tmp_path):
    async def main():
        async with running_broker(tmp_path, nodes=3) as broker:
            client = await RawClient.connect(port(broker))
            try:
                key = coordinator_key("grp", TOPIC, 0)
                resp = await client.call(ApiKey.FIND_COORDINATOR, 6, FindCoordinatorRequest(
                    key_type=2, coordinator_keys=[key, "grp:not-a-uuid:0"]))
                good, bad = resp.coordinators
                assert good.error_code == ErrorCode.NONE
                expected = broker.metadata.leader(SHARE_STATE_TOPIC, broker.share_coordinators.partition_for(key))
                assert good.node_id == expected
                assert bad.error_code == ErrorCode.INVALID_REQUEST
                # as Kafka: below version 6 a share key is INVALID_REQUEST
                resp = await client.call(ApiKey.FIND_COORDINATOR, 5, FindCoordinatorRequest(
                    key_type=2, coordinator_keys=[key]))
                assert resp.coordinators[0].error_code == ErrorCode.INVALID_REQUEST
                resp = await client.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=key, key_type=2))
                assert resp.error_code == ErrorCode.INVALID_REQUEST
            finally:
                await client.close()
            # the state is served by that node's runtime
            assert await broker.share_coordinators.write_state(
                "grp", TOPIC, 0, ShareState(start_offset=1)) == ErrorCode.NONE
            rt = broker.share_coordinators.runtime(expected)
            assert rt.shard(broker.share_coordinators.partition_for(key)).read(ShareKey("grp", TOPIC, 0)) is not None

    run(main())


def test_no_leader_is_coordinator_not_available(tmp_path):
    async def main():
        async with running_broker(tmp_path) as broker:
            broker.share_coordinators.ensure_topic()
            await broker.share_coordinators.on_leadership_changed()
            await broker.share_coordinators.wait_loaded()
            node = broker.node_ids[0]
            await broker.stop_node(node)
            assert await broker.share_coordinators.write_state(
                "g", TOPIC, 0, ShareState()) == ErrorCode.COORDINATOR_NOT_AVAILABLE
            await broker.start_node(node)
            await asyncio.sleep(0)
            assert await broker.share_coordinators.write_state("g", TOPIC, 0, ShareState()) == ErrorCode.NONE

    run(main())
