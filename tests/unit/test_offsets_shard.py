"""OffsetCommit / OffsetFetch / OffsetDelete / DeleteGroups / retention on the sans-IO shard."""

from __future__ import annotations

from shoal.coordinator.group.records import decode_offset_commit_value, key_version
from shoal.coordinator.group.shard import GroupCoordinatorShard, ShardRequest
from shoal.coordinator.group.state import GroupState
from shoal.protocol.errors import ErrorCode as E
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.delete_groups_request import DeleteGroupsRequest
from shoal.protocol.generated.describe_groups_request import DescribeGroupsRequest
from shoal.protocol.generated.list_groups_request import ListGroupsRequest
from shoal.protocol.generated.offset_delete_request import OffsetDeleteRequest
from shoal.protocol.generated.offset_fetch_request import OffsetFetchRequest
from tests.unit.test_group_harness import Harness, subscription

S = GroupState
DAY = 24 * 3600 * 1000


def persisted_state(shard: GroupCoordinatorShard) -> dict:
    """What the log holds of a shard: groups (members, generation, protocol) and their offsets."""
    groups = {}
    for gid, g in sorted(shard.groups.items()):
        groups[gid] = {
            "state": g.state.value, "generation": g.generation_id, "protocol_type": g.protocol_type,
            "protocol": g.protocol_name, "leader": g.leader_id,
            "members": {mid: (m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                              m.rebalance_timeout_ms, m.metadata(g.protocol_name) if g.protocol_name else b"",
                              m.assignment)
                        for mid, m in g.members.items()},
            "offsets": dict(sorted(shard.offset_manager.group_offsets(gid).items())),
        }
    return groups


def test_simple_commit_creates_empty_group_and_fetch_reads_it() -> None:
    h = Harness()
    t = h.commit({("t", 0): 42, ("t", 1): 7}, metadata="meta")
    assert h.commit_errors(t) == {("t", 0): 0, ("t", 1): 0}
    assert h.group().state == S.EMPTY and h.group().protocol_type is None
    assert len(h.records) == 2 and all(key_version(k) == 1 for k, _ in h.records)
    assert h.fetch({"t": [0, 1, 2]}) == {("t", 0): (42, "meta", 0), ("t", 1): (7, "meta", 0), ("t", 2): (-1, "", 0)}
    assert h.fetch(None) == {("t", 0): (42, "meta", 0), ("t", 1): (7, "meta", 0)}
    assert h.fetch({"t": [0]}, gid="unknown") == {("t", 0): (-1, "", 0)}
    assert h.fetch(None, gid="unknown") == {}
    assert h.fetch({"t": [0]}, version=1) == {("t", 0): (42, "meta", 0)}


def test_commit_value_versions() -> None:
    h = Harness()
    h.commit({("t", 0): 1})
    h.commit({("t", 1): 2}, version=2, retention=5000)
    v3, v1 = h.records[0][1], h.records[1][1]
    assert v3[:2] == b"\x00\x03" and v1[:2] == b"\x00\x01"
    assert decode_offset_commit_value(v1).expire_timestamp == h.now + 5000


def test_commit_errors() -> None:
    h = Harness()
    assert set(h.commit_errors(h.commit({("t", 0): 1}, generation=3, member_id="m")).values()) == {E.ILLEGAL_GENERATION}
    (a, b), gen = h.stable_group(2)
    assert set(h.commit_errors(h.commit({("t", 0): 1})).values()) == {E.UNKNOWN_MEMBER_ID}  # simple commit, non-empty
    assert set(h.commit_errors(h.commit({("t", 0): 1}, generation=gen, member_id="x")).values()) == {E.UNKNOWN_MEMBER_ID}
    assert set(h.commit_errors(h.commit({("t", 0): 1}, generation=gen + 1, member_id=a)).values()) == {E.ILLEGAL_GENERATION}
    assert set(h.commit_errors(h.commit({("t", 0): 1}, generation=gen, member_id=a, instance="i9")).values()) == {0}
    errs = h.commit_errors(h.commit({("t", 0): 1}, generation=gen, member_id=a, metadata="x" * 4097))
    assert errs == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert h.commit_errors(h.commit({("t", 0): 5}, generation=gen, member_id=a)) == {("t", 0): 0}
    # PreparingRebalance: commits of the current generation still go through.
    c = h.join_new()
    assert h.group().state == S.PREPARING_REBALANCE
    assert h.commit_errors(h.commit({("t", 0): 6}, generation=gen, member_id=b)) == {("t", 0): 0}
    h.join(a)
    h.join(b)
    assert h.group().state == S.COMPLETING_REBALANCE
    errs = h.commit_errors(h.commit({("t", 0): 7}, generation=gen + 1, member_id=c))
    assert errs == {("t", 0): E.REBALANCE_IN_PROGRESS}
    assert h.fetch({"t": [0]}) == {("t", 0): (6, "", 0)}


def test_offset_fetch_multi_group_v8() -> None:
    h = Harness()
    h.commit({("t", 0): 1}, gid="g1")
    h.commit({("u", 3): 9}, gid="g2")
    req = OffsetFetchRequest(groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g1", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1])]),
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g2", topics=None),
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g3", topics=None),
    ])
    r = h.resp(h.send(ApiKey.OFFSET_FETCH, 8, req))
    got = {g.group_id: {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions}
           for g in r.groups}
    assert got == {"g1": {("t", 0): 1, ("t", 1): -1}, "g2": {("u", 3): 9}, "g3": {}}
    assert all(g.error_code == 0 for g in r.groups)


def test_retention_simple_group_counts_from_commit_time() -> None:
    h = Harness(offsets_retention_minutes=60, offsets_retention_check_interval_ms=60_000)
    h.commit({("t", 0): 1})
    h.advance(30 * 60_000)
    h.commit({("t", 1): 1})
    h.records.clear()
    h.advance(30 * 60_000)  # t0 is 60 min old -> expired; t1 30 min old stays
    assert [(key_version(k), v) for k, v in h.records] == [(1, None)]
    assert h.fetch({"t": [0, 1]}) == {("t", 0): (-1, "", 0), ("t", 1): (1, "", 0)}
    h.records.clear()
    h.advance(30 * 60_000)
    # Last offset expired: the Empty group dies and gets a GroupMetadata tombstone.
    assert [(key_version(k), v) for k, v in h.records] == [(1, None), (2, None)]
    assert h.group() is None


def test_retention_consumer_group_counts_from_becoming_empty() -> None:
    h = Harness(offsets_retention_minutes=60, offsets_retention_check_interval_ms=60_000)
    (a,), gen = h.stable_group(1, session=300_000)
    h.commit({("t", 0): 5}, generation=gen, member_id=a)
    h.commit({("other", 0): 5}, generation=gen, member_id=a)
    # Stable consumer group: offsets of subscribed topics never expire; others do from commit time.
    for _ in range(60):
        h.advance(60_000)
        h.heartbeat(a, gen)
    assert h.fetch({"t": [0], "other": [0]}) == {("t", 0): (5, "", 0), ("other", 0): (-1, "", 0)}
    h.leave([(a, None)])
    empty_since = h.now
    assert h.group().state == S.EMPTY and h.group().current_state_timestamp == empty_since
    h.advance(59 * 60_000)
    assert h.fetch({"t": [0]}) == {("t", 0): (5, "", 0)}
    h.advance(60_000 + 60_000)
    assert h.group() is None


def test_retention_explicit_expire_timestamp() -> None:
    h = Harness(offsets_retention_check_interval_ms=1000)
    h.commit({("t", 0): 1}, version=2, retention=5000)
    h.advance(4000)
    assert h.fetch({"t": [0]})[("t", 0)][0] == 1
    h.advance(1000)
    assert h.fetch({"t": [0]})[("t", 0)][0] == -1


def test_delete_groups() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1, gid="busy")
    h.commit({("t", 0): 1}, gid="idle")
    req = DeleteGroupsRequest(groups_names=["busy", "idle", "nope"])
    h.records.clear()
    r = h.resp(h.send(ApiKey.DELETE_GROUPS, 2, req))
    assert [(x.group_id, x.error_code) for x in r.results] == [
        ("busy", E.NON_EMPTY_GROUP), ("idle", 0), ("nope", E.GROUP_ID_NOT_FOUND)]
    assert [(key_version(k), v) for k, v in h.records] == [(1, None), (2, None)]
    assert "idle" not in h.shard.groups


def _offset_delete(h: Harness, gid: str, topics: dict[str, list[int]]):
    req = OffsetDeleteRequest(group_id=gid, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name=t, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
        for t, ps in topics.items()])
    return h.resp(h.send(ApiKey.OFFSET_DELETE, 0, req))


def test_offset_delete() -> None:
    h = Harness()
    assert _offset_delete(h, "g", {"t": [0]}).error_code == E.GROUP_ID_NOT_FOUND
    (a,), gen = h.stable_group(1, protocols=[("range", subscription("t"))])
    h.commit({("t", 0): 1, ("u", 0): 2}, generation=gen, member_id=a)
    r = _offset_delete(h, "g", {"t": [0], "u": [0]})
    assert r.error_code == 0
    assert {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions} == {
        ("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0}
    assert h.fetch({"t": [0], "u": [0]}) == {("t", 0): (1, "", 0), ("u", 0): (-1, "", 0)}
    # A non-consumer protocol group with members: NON_EMPTY_GROUP.
    h2 = Harness()
    h2.stable_group(1, ptype="connect")
    assert _offset_delete(h2, "g", {"t": [0]}).error_code == E.NON_EMPTY_GROUP


def test_describe_and_list_groups() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    h.commit({("t", 0): 1}, gid="simple")
    r = h.resp(h.send(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["g", "simple", "none"])))
    g, simple, none = r.groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert {m.member_id: m.member_assignment for m in g.members} == {a: f"a-{a}".encode(), b: f"a-{b}".encode()}
    assert (simple.group_state, simple.protocol_type, simple.members) == ("Empty", "", [])
    assert (none.error_code, none.group_state) == (0, "Dead")
    r = h.resp(h.send(ApiKey.LIST_GROUPS, 4, ListGroupsRequest(states_filter=["stable"])))
    assert [(x.group_id, x.group_state) for x in r.groups] == [("g", "Stable")]
    r = h.resp(h.send(ApiKey.LIST_GROUPS, 5, ListGroupsRequest(states_filter=[], types_filter=["consumer"])))
    assert r.groups == []
    r = h.resp(h.send(ApiKey.LIST_GROUPS, 0, ListGroupsRequest()))
    assert {x.group_id for x in r.groups} == {"g", "simple"}


def test_delete_offsets_for_deleted_topics() -> None:
    h = Harness()
    h.commit({("t", 0): 1, ("u", 0): 1})
    h.commit({("t", 0): 1}, gid="only-t")
    res = h.shard.delete_offsets_for_topics({"t"}, h.now)
    assert len([v for k, v in res.records if key_version(k) == 1]) == 2
    assert "only-t" not in h.shard.groups  # left Empty with no offsets
    assert h.fetch({"u": [0]}) == {("u", 0): (1, "", 0)}


def test_replay_gives_same_state_as_live() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    h.commit({("t", 0): 10, ("t", 1): 11}, generation=gen, member_id=a)
    h.commit({("x", 0): 1}, gid="simple", metadata="m")
    h.commit({("x", 0): 2}, gid="simple", version=2, retention=99999)
    _static = h.join(instance="s1", gid="static")
    h.sync(h.resp(_static).member_id, 1, {h.resp(_static).member_id: b"S"}, gid="static")
    h.stable_group(1, gid="gone")
    h.leave([(list(h.shard.groups["gone"].members)[0], None)], gid="gone")  # Empty with generation 2
    h.commit({("y", 0): 3}, gid="deleted")
    h.send(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=["deleted"]))
    live = persisted_state(h.shard)
    fresh = GroupCoordinatorShard(0, h.config)
    for k, v in h.records:
        fresh.replay(k, v)
    assert persisted_state(fresh) == live
    assert fresh.groups["g"].state == S.STABLE and fresh.groups["gone"].state == S.EMPTY
    assert fresh.groups["gone"].current_state_timestamp == h.shard.groups["gone"].current_state_timestamp
    assert "deleted" not in fresh.groups
    # Loaded members must heartbeat within their session timeout.
    fresh.on_loaded(h.now)
    fresh.poll(h.now + 10001)
    assert fresh.groups["g"].state == S.EMPTY and not fresh.groups["g"].members


def test_replayed_shard_keeps_serving() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1)
    fresh = GroupCoordinatorShard(0, h.config)
    for k, v in h.records:
        fresh.replay(k, v)
    fresh.on_loaded(h.now)
    from shoal.protocol.generated.heartbeat_request import HeartbeatRequest
    res = fresh.handle(ShardRequest(1, ApiKey.HEARTBEAT, 3, "c", "h"), HeartbeatRequest(group_id="g", generation_id=gen,
                                                                             member_id=a), h.now)
    assert res.responses[0][1].error_code == 0


def test_records_no_plugin_replays_are_logged_once_and_skipped(caplog) -> None:
    import struct
    h = Harness()
    h.commit({("t", 0): 1}, gid="simple")
    # key version 9 (ShareGroupPartitionMetadata, dropped before Kafka 4.0): no plug-in replays it
    kip848 = struct.pack(">h", 9) + b"\x00\x01g"
    with caplog.at_level("WARNING", logger="shoal.coordinator.shard"):
        h.shard.replay(kip848, b"\x00\x00")
        h.shard.replay(kip848, None)
    assert [r.getMessage() for r in caplog.records].count(
        "Partition 0: skipping records with unknown key version 9 (no coordinator component replays them)") == 1
    assert set(h.shard.groups) == {"simple"}
