"""ShareFetch and ShareAcknowledge (KIP-932): share consumers acquire records and acknowledge them.

Both need the share group's READ and each topic's READ. A request names its member's share
session on this node (see `broker.share.sessions`): epoch 0 opens it, -1 closes it (after its
acknowledgements; a final ShareFetch fetches nothing), any other epoch must be the next one.
Acknowledgements are applied before fetching; each partition answers them in
`acknowledge_error_code`. A fetch acquires at most `max_records` records over the session's
partitions, returning the log's batches that hold them and the acquired ranges with their
delivery counts; with nothing to acquire it waits up to `max_wait_ms` for records to be appended
or released.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, filter_allowed
from shoal.broker.handlers.fetch import leader_error
from shoal.broker.share.manager import ShareStateError
from shoal.broker.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from shoal.clock import monotonic_ms
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.share_acknowledge_response import ShareAcknowledgeResponse
from shoal.protocol.generated.share_fetch_response import ShareFetchResponse
from shoal.storage import StorageError

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.share_acknowledge_request import ShareAcknowledgeRequest
    from shoal.protocol.generated.share_fetch_request import ShareFetchRequest

_F = ShareFetchResponse
_A = ShareAcknowledgeResponse
_GROUP, _TOPIC = ResourceType.GROUP, ResourceType.TOPIC
_ACCESS = (Access(_GROUP, AclOperation.READ), Access(_TOPIC, AclOperation.READ))

Partition = tuple[uuid.UUID, int]
RENEW = 4  # the acknowledge type of KIP-1222 (v2)
AckBatches = list[tuple[int, int, list[int]]]


def _acks(topics: Any) -> dict[Partition, AckBatches]:
    """The acknowledgement batches of a request, by (topic id, partition)."""
    out: dict[Partition, AckBatches] = {}
    for t in topics or []:
        for p in t.partitions or []:
            if p.acknowledgement_batches:
                out.setdefault((t.topic_id, p.partition_index), []).extend(
                    (b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches)
    return out


def _partition_error(ctx: RequestContext, topic_id: uuid.UUID, index: int) -> tuple[str | None, ErrorCode]:
    """The topic's name, and why this node cannot serve the partition (or NONE): Fetch's checks (no
    leader epoch is named in a share fetch)."""
    info = ctx.broker.metadata.by_id.get(topic_id)
    if info is None:
        return None, ErrorCode.UNKNOWN_TOPIC_ID
    return info.name, leader_error(ctx, info.name, index, -1)


async def _apply_acks(ctx: RequestContext, group_id: str, member_id: str, acks: dict[Partition, AckBatches],
                      readable: frozenset[str]) -> dict[Partition, ErrorCode]:
    share = ctx.broker.share
    now = monotonic_ms()
    out = {}
    for (topic_id, index), batches in acks.items():
        name, code = _partition_error(ctx, topic_id, index)
        if code == ErrorCode.NONE and name not in readable:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if code == ErrorCode.NONE:
            assert name is not None
            code = await share.acknowledge(group_id, member_id, name, index, batches, now)
        out[(topic_id, index)] = code
    return out


def _readable(ctx: RequestContext, topic_ids: list[uuid.UUID]) -> frozenset[str]:
    names = [info.name for t in topic_ids if (info := ctx.broker.metadata.by_id.get(t)) is not None]
    return frozenset(filter_allowed(ctx, AclOperation.READ, _TOPIC, names))


def _session(ctx: RequestContext, req: Any, adds: list[Partition], forgotten: list[Partition]
             ) -> tuple[ShareSession | None, ErrorCode]:
    """The request's share session: opened (epoch 0), checked, or found for closing (-1)."""
    share = ctx.broker.share
    if req.share_session_epoch == INITIAL_EPOCH:
        session, old, code = share.sessions(ctx.node.node_id).open(req.group_id, req.member_id, ctx.connection, adds)
        if old is not None:
            share.release_session(old, ctx.node.node_id, monotonic_ms())
        return session, code
    session, code = _existing_session(ctx, req)
    if session is not None and req.share_session_epoch != FINAL_EPOCH:
        session.update(adds, forgotten)
    return session, code


def _existing_session(ctx: RequestContext, req: Any) -> tuple[ShareSession | None, ErrorCode]:
    """The session a later request names, checked. As in Kafka, the data path does not ask the group
    coordinator about membership: a session ends when its member closes it or its connection goes
    (a member that left its group keeps acknowledging what it still holds; what it no longer holds
    answers INVALID_RECORD_STATE)."""
    return ctx.broker.share.sessions(ctx.node.node_id).check(req.group_id, req.member_id, req.share_session_epoch)


def _leader(ctx: RequestContext, name: str | None, index: int) -> Any:
    if name is None:
        return -1, -1
    return ctx.broker.metadata.leader(name, index), ctx.broker.metadata.leader_epoch(name, index)


@handles(ApiKey.SHARE_FETCH, min_version=1, max_version=2, access=_ACCESS)
async def share_fetch(ctx: RequestContext, req: ShareFetchRequest) -> ShareFetchResponse:
    if not req.group_id or not req.member_id:
        return _F(error_code=ErrorCode.INVALID_REQUEST, error_message="The group id and member id must be given.")
    if not allowed(ctx, AclOperation.READ, _GROUP, req.group_id):
        return _F(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    acks = _acks(req.topics)
    renews = any(RENEW in types for batches in acks.values() for _, _, types in batches)
    if renews and (ctx.api_version < 2 or not req.is_renew_ack):
        return _F(error_code=ErrorCode.INVALID_REQUEST,
                  error_message="Renew acknowledgements need ShareFetch v2 with IsRenewAck set.")
    # KIP-1222: a fetch carrying renewals only renews (no records are acquired)
    renew_only = ctx.api_version >= 2 and req.is_renew_ack
    if req.share_session_epoch == INITIAL_EPOCH and acks:
        return _F(error_code=ErrorCode.INVALID_REQUEST,
                  error_message="Acknowledge data present on initial epoch")
    adds = [(t.topic_id, p.partition_index) for t in req.topics or [] for p in t.partitions or []]
    forgotten = [(t.topic_id, i) for t in req.forgotten_topics_data or [] for i in t.partitions or []]
    session, code = _session(ctx, req, adds, forgotten)
    if session is None:
        return _F(error_code=code)
    share = ctx.broker.share
    group_id, member_id = req.group_id, req.member_id
    readable = _readable(ctx, [t for t, _ in session.partitions] + [t for t, _ in acks])
    ack_results = await _apply_acks(ctx, group_id, member_id, acks, readable)
    lock_ms = share.lock_duration_ms(group_id)
    if req.share_session_epoch == FINAL_EPOCH:
        share.sessions(ctx.node.node_id).close(session)
        share.release_session(session, ctx.node.node_id, monotonic_ms())
        return _response(ctx, {}, ack_results, lock_ms)
    if req.share_session_epoch != INITIAL_EPOCH:  # a new session already expects epoch 1
        share.sessions(ctx.node.node_id).advance(session)
    deadline = monotonic_ms() + max(req.max_wait_ms, 0)
    max_records = req.max_records if req.max_records > 0 else 500
    # ShareAcquireMode (v2): 0 batch_optimized (v1's only mode), 1 record_limit (KIP-1206)
    batch_optimized = ctx.api_version < 2 or req.share_acquire_mode == 0
    while True:
        if not _still_wanted(ctx, session):
            # the client went away while this fetch waited: acquiring for it now would strand the
            # records under its lock (its connection's end already released what it held)
            return _response(ctx, {}, ack_results, lock_ms)
        fetched = {} if renew_only else await _fetch(ctx, session, readable, max_records, req.max_bytes,
                                                     batch_optimized)
        if fetched and not _still_wanted(ctx, session):
            # it went away while the partition's state loaded (its node stopped, say): give back what
            # was acquired for it, or the records would wait out a lock no one holds
            _give_back(ctx, session, fetched)
            return _response(ctx, {}, ack_results, lock_ms)
        remaining = deadline - monotonic_ms()
        acquired = any(data.get("ranges") for data in fetched.values())
        if acquired or remaining <= 0 or renew_only or not ctx.node.running:
            break
        waits = [(n, i) for (t, i) in session.partitions
                 if (n := _name(ctx, t)) is not None and n in readable]
        await ctx.broker.fetch_waiters.wait(waits, remaining / 1000)
    return _response(ctx, fetched, ack_results, lock_ms)


def _still_wanted(ctx: RequestContext, session: ShareSession) -> bool:
    """Whether the fetch's session is still open and its connection still there."""
    current = ctx.broker.share.sessions(ctx.node.node_id).get(session.group_id, session.member_id)
    return current is session and not (ctx.connection is not None and ctx.connection.closed)


def _give_back(ctx: RequestContext, session: ShareSession, fetched: dict[Partition, dict[str, Any]]) -> None:
    now = monotonic_ms()
    for (_topic_id, index), data in fetched.items():
        if data.get("ranges"):
            ctx.broker.share.release_acquired(session.group_id, session.member_id, data["name"], index,
                                              [(f, last) for f, last, _ in data["ranges"]], now)


def _name(ctx: RequestContext, topic_id: uuid.UUID) -> str | None:
    info = ctx.broker.metadata.by_id.get(topic_id)
    return None if info is None else info.name


async def _fetch(ctx: RequestContext, session: ShareSession, readable: frozenset[str], max_records: int,
                 max_bytes: int, batch_optimized: bool) -> dict[Partition, dict[str, Any]]:
    """Acquire over the session's partitions, in turn, up to ``max_records`` and ``max_bytes``."""
    share = ctx.broker.share
    now = monotonic_ms()
    out: dict[Partition, dict[str, Any]] = {}
    records_left, bytes_left = max_records, max(max_bytes, 1)
    for topic_id, index in list(session.partitions):
        name, code = _partition_error(ctx, topic_id, index)
        if code == ErrorCode.NONE and name not in readable:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if code != ErrorCode.NONE:
            out[(topic_id, index)] = {"error": code, "name": name}
            continue
        if records_left <= 0 or bytes_left <= 0:
            continue
        assert name is not None
        try:
            got = await share.acquire(session.group_id, session.member_id, name, index, records_left, bytes_left,
                                      now, batch_optimized)
        except ShareStateError as e:  # the share coordinator cannot give the partition's state now
            out[(topic_id, index)] = {"error": e.code, "name": name}
            continue
        except StorageError:  # the log is offline (a failed fsync): KAFKA_STORAGE_ERROR, as Fetch answers
            out[(topic_id, index)] = {"error": ErrorCode.KAFKA_STORAGE_ERROR, "name": name}
            continue
        if got.ranges:
            records_left -= sum(last - first + 1 for first, last, _ in got.ranges)
            bytes_left -= len(got.records)
            out[(topic_id, index)] = {"records": got.records, "ranges": got.ranges, "name": name}
            ctx.broker.metrics.fetched(name, len(got.records))
    return out


def _response(ctx: RequestContext, fetched: dict[Partition, dict[str, Any]],
              ack_results: dict[Partition, ErrorCode], lock_ms: int) -> ShareFetchResponse:
    parts = []
    for key in dict.fromkeys([*fetched, *ack_results]):
        data = fetched.get(key, {})
        parts.append((key, data.get("name"), data.get("error", ErrorCode.NONE), {
            "acknowledge_error_code": ack_results.get(key, ErrorCode.NONE),
            "records": data.get("records") or b"",  # never null: librdkafka refuses a null record set
            "acquired_records": [_F.AcquiredRecords(first_offset=f, last_offset=la, delivery_count=c)
                                 for f, la, c in data.get("ranges", [])]}))
    resp: ShareFetchResponse = _answer(ctx, _F, _F.ShareFetchableTopicResponse, lock_ms, parts)
    return resp


def _answer(ctx: RequestContext, cls: Any, topic_cls: Any, lock_ms: int,
            parts: list[tuple[Partition, str | None, ErrorCode, dict[str, Any]]]) -> Any:
    """A ShareFetch or ShareAcknowledge response: each partition's answer (its error, current leader
    and ``fields``) by topic, and the endpoints of the leaders a NOT_LEADER_OR_FOLLOWER points to."""
    topics: dict[uuid.UUID, list[Any]] = {}
    leaders: set[int] = set()
    for (topic_id, index), name, error, fields in parts:
        leader_id, leader_epoch = _leader(ctx, name or _name(ctx, topic_id), index)
        if error == ErrorCode.NOT_LEADER_OR_FOLLOWER and leader_id >= 0:
            leaders.add(leader_id)
        topics.setdefault(topic_id, []).append(cls.PartitionData(
            partition_index=index, error_code=error,
            current_leader=cls.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch), **fields))
    endpoints = []
    for node_id in sorted(leaders):
        node = ctx.broker.nodes.get(node_id)
        if node is not None:
            host, port = ctx.address_of(node)
            endpoints.append(cls.NodeEndpoint(node_id=node_id, host=host, port=port, rack=None))
    return cls(error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=lock_ms,
               responses=[topic_cls(topic_id=t, partitions=ps) for t, ps in topics.items()], node_endpoints=endpoints)


@handles(ApiKey.SHARE_ACKNOWLEDGE, min_version=1, max_version=2, access=_ACCESS)
async def share_acknowledge(ctx: RequestContext, req: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    if not req.group_id or not req.member_id:
        return _A(error_code=ErrorCode.INVALID_REQUEST, error_message="The group id and member id must be given.")
    if not allowed(ctx, AclOperation.READ, _GROUP, req.group_id):
        return _A(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if req.share_session_epoch == INITIAL_EPOCH:
        return _A(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    share = ctx.broker.share
    session, code = _existing_session(ctx, req)
    if session is None:
        return _A(error_code=code)
    acks = _acks(req.topics)
    if any(RENEW in types for batches in acks.values() for _, _, types in batches) and (
            ctx.api_version < 2 or not req.is_renew_ack):
        return _A(error_code=ErrorCode.INVALID_REQUEST,
                  error_message="Renew acknowledgements need ShareAcknowledge v2 with IsRenewAck set.")
    results = await _apply_acks(ctx, req.group_id, req.member_id, acks, _readable(ctx, [t for t, _ in acks]))
    if req.share_session_epoch == FINAL_EPOCH:
        share.sessions(ctx.node.node_id).close(session)
        share.release_session(session, ctx.node.node_id, monotonic_ms())
    else:
        share.sessions(ctx.node.node_id).advance(session)
    lock_ms = share.lock_duration_ms(req.group_id) if ctx.api_version >= 2 else 0  # v2+ field
    resp: ShareAcknowledgeResponse = _answer(ctx, _A, _A.ShareAcknowledgeTopicResponse, lock_ms,
                                             [(key, None, error, {}) for key, error in results.items()])
    return resp
