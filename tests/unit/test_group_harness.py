"""A fake-clock harness driving GroupCoordinatorShard (and sanity tests of it)."""

from __future__ import annotations

import itertools
import struct
from typing import Any

from shoal.coordinator.group.config import GroupConfig
from shoal.coordinator.group.shard import GroupCoordinatorShard, ShardRequest
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.consumer_protocol_subscription import ConsumerProtocolSubscription
from shoal.protocol.generated.heartbeat_request import HeartbeatRequest
from shoal.protocol.generated.join_group_request import JoinGroupRequest
from shoal.protocol.generated.leave_group_request import LeaveGroupRequest
from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest
from shoal.protocol.generated.offset_fetch_request import OffsetFetchRequest
from shoal.protocol.generated.sync_group_request import SyncGroupRequest

K = ApiKey
JOIN, SYNC, HB, LEAVE, COMMIT, FETCH = K.JOIN_GROUP, K.SYNC_GROUP, K.HEARTBEAT, K.LEAVE_GROUP, K.OFFSET_COMMIT, K.OFFSET_FETCH


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 blob (int16 version + struct)."""
    return struct.pack(">h", 0) + ConsumerProtocolSubscription(topics=list(topics)).encode(0)


class Harness:
    """Sends requests to one shard with a fake clock; collects responses and records."""

    def __init__(self, **config: Any) -> None:
        config.setdefault("group_initial_rebalance_delay_ms", 0)
        self.config = GroupConfig(**config)
        ids = itertools.count(1)
        self.shard = GroupCoordinatorShard(0, self.config, member_id_suffix=lambda: f"m{next(ids)}")
        self.now = 1_000_000
        self._tokens = itertools.count(1)
        self.responses: dict[int, Any] = {}
        self.records: list[tuple[bytes, bytes | None]] = []

    def _collect(self, result) -> None:
        self.records.extend(result.records)
        for token, resp in result.responses:
            assert token not in self.responses, f"token {token} answered twice"
            self.responses[token] = resp

    def send(self, api_key: ApiKey, version: int, request: Any, client_id: str = "c") -> int:
        token = next(self._tokens)
        ctx = ShardRequest(token, api_key, version, client_id, "/127.0.0.1")
        self._collect(self.shard.handle(ctx, request, self.now))
        return token

    def advance(self, ms: int) -> None:
        self.now += ms
        self._collect(self.shard.poll(self.now))

    def resp(self, token: int) -> Any:
        return self.responses.get(token)

    def group(self, gid: str = "g"):
        return self.shard.groups.get(gid)

    # -- request helpers ------------------------------------------------
    def join(self, member_id: str = "", *, gid: str = "g", version: int = 5,
             protocols: list[tuple[str, bytes]] | None = None, session: int = 10000, rebalance: int = 30000,
             instance: str | None = None, ptype: str = "consumer", client_id: str = "c") -> int:
        protocols = protocols if protocols is not None else [("range", subscription("t"))]
        req = JoinGroupRequest(
            group_id=gid, session_timeout_ms=session, rebalance_timeout_ms=rebalance, member_id=member_id,
            group_instance_id=instance, protocol_type=ptype,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
        )
        return self.send(JOIN, version, req, client_id)

    def join_new(self, **kw: Any) -> str:
        """v4+ two-step join of a dynamic member; returns its member id (join left parked or answered)."""
        t = self.join(**kw)
        r = self.resp(t)
        assert r.error_code == 79, r
        kw.pop("member_id", None)
        self.last_join = self.join(r.member_id, **kw)
        return r.member_id

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, *,
             gid: str = "g", version: int = 3, instance: str | None = None,
             ptype: str | None = None, pname: str | None = None) -> int:
        req = SyncGroupRequest(
            group_id=gid, generation_id=generation, member_id=member_id, group_instance_id=instance,
            protocol_type=ptype, protocol_name=pname,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()],
        )
        return self.send(SYNC, version, req)

    def heartbeat(self, member_id: str, generation: int, *, gid: str = "g", version: int = 3,
                  instance: str | None = None) -> int:
        return self.send(HB, version, HeartbeatRequest(group_id=gid, generation_id=generation, member_id=member_id,
                                                       group_instance_id=instance))

    def leave(self, members: list[tuple[str, str | None]], *, gid: str = "g", version: int = 3) -> int:
        if version >= 3:
            req = LeaveGroupRequest(group_id=gid, members=[
                LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i) for m, i in members])
        else:
            req = LeaveGroupRequest(group_id=gid, member_id=members[0][0])
        return self.send(LEAVE, version, req)

    def commit(self, offsets: dict[tuple[str, int], int], *, gid: str = "g", generation: int = -1,
               member_id: str = "", instance: str | None = None, version: int = 8,
               metadata: str | None = "", retention: int = -1) -> int:
        topics: dict[str, list] = {}
        for (t, p), off in offsets.items():
            topics.setdefault(t, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=off, committed_metadata=metadata))
        req = OffsetCommitRequest(
            group_id=gid, generation_id_or_member_epoch=generation, member_id=member_id,
            group_instance_id=instance, retention_time_ms=retention,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )
        return self.send(COMMIT, version, req)

    def commit_errors(self, token: int) -> dict[tuple[str, int], int]:
        r = self.resp(token)
        return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}

    def fetch(self, topics: dict[str, list[int]] | None, *, gid: str = "g", version: int = 7) -> dict:
        req = OffsetFetchRequest(
            group_id=gid,
            topics=None if topics is None else [OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                                                for t, ps in topics.items()],
        )
        r = self.resp(self.send(FETCH, version, req))
        assert r.error_code == 0
        return {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
                for t in r.topics for p in t.partitions}

    def stable_group(self, n: int = 1, **kw: Any) -> tuple[list[str], int]:
        """Grow a Stable group one dynamic member at a time (each addition is a full rebalance)."""
        ids: list[str] = []
        gen = 0
        for _ in range(n):
            mid = self.join_new(**kw)
            tokens = {mid: self.last_join}
            for old in ids:
                tokens[old] = self.join(old, **kw)
            ids.append(mid)
            resps = {m: self.resp(t) for m, t in tokens.items()}
            assert all(r is not None and r.error_code == 0 for r in resps.values()), resps
            gen = resps[mid].generation_id
            leader = resps[mid].leader
            syncs = {m: self.sync(m, gen, {x: f"a-{x}".encode() for x in ids} if m == leader else None,
                                  gid=kw.get("gid", "g"))
                     for m in ids}
            for m, t in syncs.items():
                assert self.resp(t) is not None and self.resp(t).error_code == 0, (m, self.resp(t))
        return ids, gen


def test_harness_forms_a_stable_group() -> None:
    h = Harness()
    ids, gen = h.stable_group(2)
    assert h.group().state.value == "Stable"
    assert gen >= 1
    assert set(h.group().members) == set(ids)
