"""Offset commits and fetches of a group member, classic or consumer-protocol (KIP-848).

A KIP-848 member's OffsetCommit v9+ and OffsetFetch v9 carry the member id and the member epoch,
and the broker answers a stale epoch with STALE_MEMBER_EPOCH (retried with the newer epoch) or an
unknown member with UNKNOWN_MEMBER_ID (the commit fails: the partitions may already be someone
else's). A classic member commits with its generation and fetches up to v7 (not naming itself)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shoal.protocol.errors import ErrorCode, error_name
from shoal.protocol.generated.api_keys import ApiKey

from .cluster import now_ms
from .errors import KafkaConnectionError, KafkaTimeoutError, error_for
from .membership import MemberBase
from .protocol import request_class
from .structs import OffsetAndMetadata, TopicPartition, by_topic

COORDINATOR_ERRORS = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)
RETRY_ERRORS = COORDINATOR_ERRORS + (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT,
                                     ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.UNSTABLE_OFFSET_COMMIT)
# A member that is no longer in the group cannot commit or fetch (Java: CommitFailedException).
MEMBERSHIP_ERRORS = (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.ILLEGAL_GENERATION,
                     ErrorCode.FENCED_INSTANCE_ID)

#: OffsetFetch v9 is the first with the member id and epoch (v8 batches groups).
OFFSET_FETCH_MEMBER_VERSION = 9


@dataclass(frozen=True)
class MemberIdentity:
    """What a commit or fetch says about the member: epoch -1 and id "" when not in the group."""

    member_epoch: int
    member_id: str
    instance_id: str | None


async def commit_offsets(channel: MemberBase, offsets: dict[TopicPartition, OffsetAndMetadata],
                         identity: Callable[[], MemberIdentity], timeout_ms: int | None = None) -> None:
    """OffsetCommit of ``offsets`` (not empty) with the member's current epoch (read before each try)."""
    ccls = request_class(ApiKey.OFFSET_COMMIT)
    cfg = channel.config
    deadline = now_ms() + (timeout_ms if timeout_ms is not None else cfg["default.api.timeout.ms"])
    topics = offset_commit_topics(offsets)
    while True:
        me = identity()
        req = ccls(group_id=channel.group_id, generation_id_or_member_epoch=me.member_epoch,
                   member_id=me.member_id, group_instance_id=me.instance_id, topics=topics)
        try:
            resp = await channel.send_group(req)
        except (KafkaConnectionError, KafkaTimeoutError, OSError):
            retry = True
        else:
            retry = _commit_needs_retry(channel, resp)
        if not retry:
            return
        if now_ms() >= deadline:
            raise KafkaTimeoutError("offset commit timed out")
        await asyncio.sleep(cfg["retry.backoff.ms"] / 1000)


def offset_commit_topics(offsets: dict[TopicPartition, OffsetAndMetadata | int]) -> list[Any]:
    """The topics of an OffsetCommit request of ``offsets`` (a bare int is an offset)."""
    ccls = request_class(ApiKey.OFFSET_COMMIT)
    parts = []
    for tp, om in offsets.items():
        om = om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(om)
        parts.append((tp, ccls.OffsetCommitRequestPartition(
            partition_index=tp[1], committed_offset=om.offset,
            committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata)))
    return [ccls.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic(parts).items()]


def _commit_needs_retry(channel: MemberBase, resp: Any) -> bool:
    retry = False
    for t in resp.topics:
        for p in t.partitions:
            code = p.error_code
            if code in RETRY_ERRORS:
                if code in COORDINATOR_ERRORS:
                    channel.coordinator_dead(f"OffsetCommit {error_name(code)}")
                retry = True
            elif code:
                raise channel.commit_error(code, f"OffsetCommit {t.name}-{p.partition_index}")
    return retry


def build_offset_fetch(version: int, group_id: str, partitions: list[TopicPartition], me: MemberIdentity,
                       require_stable: bool) -> Any:
    """An OffsetFetch request in the shape of ``version``: v8+ batches groups (v9: member id and epoch)."""
    fcls = request_class(ApiKey.OFFSET_FETCH)
    topics = by_topic((tp, tp.partition) for tp in partitions)
    if version < 8:
        return fcls(group_id=group_id, require_stable=require_stable and version >= 7,
                    topics=[fcls.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in topics.items()])
    in_group = version >= OFFSET_FETCH_MEMBER_VERSION and me.member_epoch >= 0 and bool(me.member_id)
    group = fcls.OffsetFetchRequestGroup(
        group_id=group_id,
        member_id=me.member_id if in_group else None,
        member_epoch=me.member_epoch if in_group else -1,
        topics=[fcls.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics.items()])
    return fcls(groups=[group], require_stable=require_stable)


def parse_offset_fetch(version: int, resp: Any) -> tuple[int, list[tuple[str, Any]]]:
    """(the group's error code, [(topic name, partition response)]) of either response shape."""
    if version < 8:
        return getattr(resp, "error_code", 0), [(t.name, p) for t in resp.topics for p in t.partitions]
    if not resp.groups:
        return ErrorCode.UNKNOWN_SERVER_ERROR, []
    g = resp.groups[0]
    return g.error_code, [(t.name, p) for t in g.topics for p in t.partitions]


async def fetch_offsets(channel: MemberBase, partitions: list[TopicPartition],
                        identity: Callable[[], MemberIdentity], timeout_ms: int | None = None,
                        highest: int = OFFSET_FETCH_MEMBER_VERSION) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """Committed offsets of ``partitions`` (None: nothing committed), as this member, with
    OffsetFetch up to version ``highest``."""
    cfg = channel.config
    deadline = now_ms() + (timeout_ms if timeout_ms is not None else cfg["default.api.timeout.ms"])
    while True:
        try:
            version = await channel.group_version_up_to(ApiKey.OFFSET_FETCH, highest)
            req = build_offset_fetch(version, channel.group_id, partitions, identity(), True)
            resp = await channel.send_group(req, version=version)
        except (KafkaConnectionError, KafkaTimeoutError, OSError):
            resp = None
        if resp is not None:
            out = _fetch_result(channel, version, resp)
            if out is not None:
                return out
        if now_ms() >= deadline:
            raise KafkaTimeoutError("offset fetch timed out")
        await asyncio.sleep(cfg["retry.backoff.ms"] / 1000)


def _fetch_result(channel: MemberBase, version: int, resp: Any
                  ) -> dict[TopicPartition, OffsetAndMetadata | None] | None:
    """The offsets of a response, None to retry; raises for an error that ends the fetch."""
    code, parts = parse_offset_fetch(version, resp)
    if code in COORDINATOR_ERRORS:
        channel.coordinator_dead(f"OffsetFetch {error_name(code)}")
    if code in RETRY_ERRORS:
        return None
    if code in MEMBERSHIP_ERRORS:
        raise error_for(code, f"OffsetFetch for group {channel.group_id}: this member is not in the group")
    if code:
        raise error_for(code, "OffsetFetch")
    out: dict[TopicPartition, OffsetAndMetadata | None] = {}
    retry = False
    for name, p in parts:
        if p.error_code in RETRY_ERRORS:
            retry = True
            continue
        if p.error_code:
            raise error_for(p.error_code, f"OffsetFetch {name}-{p.partition_index}")
        out[TopicPartition(name, p.partition_index)] = (
            OffsetAndMetadata(p.committed_offset, p.metadata or "", getattr(p, "committed_leader_epoch", -1))
            if p.committed_offset >= 0 else None)
    return None if retry else out
