"""Scripted group scenarios at the wire level, so their outcomes can be diffed between brokers.

A scenario drives `WireMember`s (one coordinator connection each, shoal's generated
codecs) and records what it observes in a `Transcript`: error codes, generations,
who leads, decoded assignments, committed offsets. Member ids are random on both
brokers, so the transcript names them by the order it first saw them (m1, m2, ...);
everything else is recorded as the broker answered it. The same scenario run
against shoal and Apache Kafka must give equal transcripts.

Versions are pinned (not negotiated) so both brokers are asked the same question.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from shoal.assignors.consumer_protocol import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from shoal.assignors.types import Assignment, Subscription, TopicPartition
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.describe_groups_request import DescribeGroupsRequest
from shoal.protocol.generated.heartbeat_request import HeartbeatRequest
from shoal.protocol.generated.join_group_request import JoinGroupRequest
from shoal.protocol.generated.leave_group_request import LeaveGroupRequest
from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest
from shoal.protocol.generated.offset_fetch_request import OffsetFetchRequest
from shoal.protocol.generated.sync_group_request import SyncGroupRequest
from shoal.tools.wire import BrokerConnection, ToolClient, ToolError

JOIN_V, SYNC_V, HEARTBEAT_V, LEAVE_V, COMMIT_V, FETCH_V, DESCRIBE_V = 9, 5, 4, 5, 8, 7, 5
SESSION_MS = 6000  # group.min.session.timeout.ms on both brokers: the shortest a member may ask for
REBALANCE_MS = 10000


def err(code: int) -> str:
    """An error code by Kafka's name: transcripts read as the protocol does."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class Transcript:
    """What a scenario observed, step by step, with member ids replaced by stable labels."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, dict[str, Any]]] = []
        self._labels: dict[str, str] = {}
        self._lock = threading.Lock()

    def label(self, member_id: str | None) -> str | None:
        if not member_id:
            return member_id
        with self._lock:
            return self._labels.setdefault(member_id, f"m{len(self._labels) + 1}")

    def add(self, step: str, **observed: Any) -> None:
        with self._lock:
            self.steps.append((step, observed))

    def as_dict(self) -> dict[str, dict[str, Any]]:
        """Steps by name (names are unique in a scenario), for a diff that names each step."""
        return dict(self.steps)


def _coordinator(bootstrap: str, group: str, timeout: float) -> tuple[ToolClient, BrokerConnection]:
    # The first FindCoordinator may find __consumer_offsets still being created: retry.
    deadline = time.monotonic() + 30
    while True:
        client = ToolClient(bootstrap, timeout=timeout)
        try:
            return client, client.find_coordinator(group)
        except ToolError:
            client.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


class WireMember:
    """One classic-protocol group member on its own coordinator connection."""

    def __init__(self, bootstrap: str, group: str, transcript: Transcript, client_id: str,
                 instance_id: str | None = None) -> None:
        self.group = group
        self.t = transcript
        self.instance_id = instance_id
        self.member_id = ""
        self.generation = -1
        self.client, self.conn = _coordinator(bootstrap, group, timeout=REBALANCE_MS / 1000 + 20)
        self.conn.client_id = client_id
        # Kafka names its coordinator while __consumer_offsets is still loading there (NOT_COORDINATOR,
        # COORDINATOR_LOAD_IN_PROGRESS for a while): scenarios start once the coordinator answers.
        wait_for(lambda: self.describe()["error"] == "NONE", 30, f"the coordinator of {group} to be ready")

    def close(self) -> None:
        self.client.close()

    # -- the group protocol --------------------------------------------

    def join(self, topics: list[str], protocols: tuple[str, ...] = ("range",), member_id: str | None = None,
             session_ms: int = SESSION_MS, protocol_type: str = "consumer", version: int = JOIN_V) -> Any:
        """JoinGroup; on success the member takes the id and generation it was given."""
        meta = encode_subscription(Subscription(topics=topics), 1)
        req = JoinGroupRequest(group_id=self.group, session_timeout_ms=session_ms, rebalance_timeout_ms=REBALANCE_MS,
                               member_id=self.member_id if member_id is None else member_id,
                               group_instance_id=self.instance_id, protocol_type=protocol_type,
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=p, metadata=meta)
                                          for p in protocols])
        resp = self.conn.send(req, version)
        # Label ids as the script hands them out, so labels never depend on the order of a list.
        self.t.label(resp.member_id)
        if resp.member_id and resp.error_code in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
            self.member_id = resp.member_id
        if resp.error_code == ErrorCode.NONE:
            self.generation = resp.generation_id
        return resp

    def join_observed(self, resp: Any) -> dict[str, Any]:
        return {"error": err(resp.error_code), "member": self.t.label(resp.member_id),
                "generation": resp.generation_id, "protocol": resp.protocol_name,
                "leader": self.t.label(resp.leader), "skip_assignment": resp.skip_assignment,
                "members": sorted((self.t.label(m.member_id), m.group_instance_id) for m in resp.members)}

    def sync(self, assignments: dict[str, list[tuple[str, int]]] | None = None, generation: int | None = None,
             member_id: str | None = None) -> tuple[str, list[tuple[str, int]]]:
        """SyncGroup (the leader passes member id -> partitions); (error, this member's partitions)."""
        blobs = [SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=mid, assignment=encode_assignment(Assignment([TopicPartition(*tp) for tp in parts]), 1))
            for mid, parts in (assignments or {}).items()]
        req = SyncGroupRequest(group_id=self.group, generation_id=self.generation if generation is None else generation,
                               member_id=self.member_id if member_id is None else member_id,
                               group_instance_id=self.instance_id, protocol_type="consumer",
                               protocol_name="range", assignments=blobs)
        resp = self.conn.send(req, SYNC_V)
        parts = sorted(decode_assignment(resp.assignment).partitions) if resp.assignment else []
        return err(resp.error_code), [tuple(p) for p in parts]

    def heartbeat(self, generation: int | None = None, member_id: str | None = None) -> str:
        req = HeartbeatRequest(group_id=self.group, generation_id=self.generation if generation is None else generation,
                               member_id=self.member_id if member_id is None else member_id,
                               group_instance_id=self.instance_id)
        return err(self.conn.send(req, HEARTBEAT_V).error_code)

    def leave(self, member_id: str | None = None) -> tuple[str, list[tuple[str | None, str]]]:
        req = LeaveGroupRequest(group_id=self.group, members=[LeaveGroupRequest.MemberIdentity(
            member_id=self.member_id if member_id is None else member_id, group_instance_id=self.instance_id)])
        resp = self.conn.send(req, LEAVE_V)
        return err(resp.error_code), [(m.group_instance_id, err(m.error_code)) for m in resp.members]

    def commit(self, offsets: dict[tuple[str, int], int], generation: int | None = None,
               member_id: str | None = None, metadata: str = "") -> list[tuple[str, int, str]]:
        topics: dict[str, list[Any]] = {}
        for (topic, part), off in sorted(offsets.items()):
            topics.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=part, committed_offset=off, committed_metadata=metadata))
        req = OffsetCommitRequest(
            group_id=self.group, generation_id_or_member_epoch=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id, group_instance_id=self.instance_id,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()])
        resp = self.conn.send(req, COMMIT_V)
        return sorted((t.name, p.partition_index, err(p.error_code)) for t in resp.topics for p in t.partitions)

    def fetch(self, topic: str, partitions: int) -> tuple[str, list[tuple[int, int, str]]]:
        req = OffsetFetchRequest(group_id=self.group, require_stable=True, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=list(range(partitions)))])
        resp = self.conn.send(req, FETCH_V)
        return err(resp.error_code), sorted((p.partition_index, p.committed_offset, err(p.error_code))
                                            for t in resp.topics for p in t.partitions)

    def describe(self) -> dict[str, Any]:
        resp = self.conn.send(DescribeGroupsRequest(groups=[self.group]), DESCRIBE_V)
        g = resp.groups[0]
        return {"error": err(g.error_code), "state": g.group_state, "protocol_type": g.protocol_type,
                "protocol": g.protocol_data,
                "members": sorted((self.t.label(m.member_id), m.group_instance_id, m.client_id,
                                   tuple(sorted(tuple(p) for p in decode_assignment(m.member_assignment).partitions)))
                                  # by client id: labels given here must not follow the broker's order
                                  for m in sorted(g.members, key=lambda m: (m.client_id, m.group_instance_id or "")))}


def in_thread(fn: Callable[[], Any]) -> Callable[[float], Any]:
    """Start ``fn`` on a thread (a JoinGroup blocks until the rebalance completes); return a join(timeout)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller, not lost in the thread
            box["error"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()

    def result(timeout: float) -> Any:
        th.join(timeout)
        if th.is_alive():
            raise AssertionError(f"blocked call did not return in {timeout}s")
        if "error" in box:
            raise box["error"]
        return box["value"]

    return result


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def diff(shoal: dict[str, Any], kafka: dict[str, Any]) -> list[str]:
    """One line per step whose observation differs (or that only one side has)."""
    out = []
    for step in list(kafka) + [s for s in shoal if s not in kafka]:
        if shoal.get(step) != kafka.get(step):
            out.append(f"{step}: shoal={shoal.get(step)!r} kafka={kafka.get(step)!r}")
    return out
