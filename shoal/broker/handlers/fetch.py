"""Fetch: whole batches sliced from segment files, with long polling.

Limits follow KIP-74: `max_bytes` bounds the response and
`partition_max_bytes` each partition, and the broker's `fetch.max.bytes`
bounds every response whatever the client asks, except that the first batch of the
first partition with data is returned whole even when larger, so a consumer
always makes progress. When less than `min_bytes` is ready the request waits
(up to `max_wait_ms`) for an append to any of its partitions.

read_committed (isolation level 1) reads up to the last stable offset and
lists the aborted transactions overlapping what it returns, so the consumer
can drop their batches; control batches (markers) are returned at both
levels, and read_uncommitted gets no aborted list (null, as Kafka).

Fetch sessions (KIP-227) are not kept: the broker answers session id 0, which
tells clients to send full fetch requests, as Kafka does when it has no room
in its session cache.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, filter_allowed
from shoal.clock import monotonic_ms
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.compression import ZSTD
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.fetch_response import FetchResponse
from shoal.protocol.legacy_records import encode_message
from shoal.protocol.record_batch import CONTROL_MASK, TIMESTAMP_TYPE_MASK, iter_batches, iter_records
from shoal.storage import OffsetOutOfRangeError, StorageError

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.fetch_request import FetchRequest
    from shoal.storage import PartitionLog

PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction
TopicResponse = FetchResponse.FetchableTopicResponse


def leader_epoch_error(current_epoch: int, requested: int) -> ErrorCode:
    """KIP-320: a client's view of the leader epoch must match the leader's."""
    if requested < 0 or requested == current_epoch:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if requested < current_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH


def leader_error(ctx: RequestContext, topic: str, index: int, current_leader_epoch: int) -> ErrorCode:
    """Why this node may not answer for the partition (unknown, not its leader, another leader
    epoch than the client's; -1: the client names none), or NONE."""
    metadata = ctx.broker.metadata
    info = metadata.topics.get(topic)
    if info is None or not 0 <= index < info.num_partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if metadata.leader(topic, index) != ctx.node.node_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return leader_epoch_error(metadata.leader_epoch(topic, index), current_leader_epoch)


class UnsupportedCompression(Exception):
    """A batch compressed with a codec the requested message format does not have."""


def downconvert(records: bytes, fetch_offset: int, magic: int, limit: int, first: bool) -> bytes:
    """v2 batches as a message set of ``magic``: uncompressed messages from ``fetch_offset`` on,
    control batches left out (headers have no place in them), at most ``limit`` bytes except the
    first message when ``first`` (so a consumer always progresses)."""
    out: list[bytes] = []
    size = 0
    for h in iter_batches(records):
        if h.attributes & CONTROL_MASK:
            continue
        if h.compression == ZSTD:
            if out:
                break
            raise UnsupportedCompression
        for r in iter_records(records, h):
            if r.offset < fetch_offset:
                continue
            ts_type = 1 if h.attributes & TIMESTAMP_TYPE_MASK else 0
            entry = encode_message(r.offset, magic, r.timestamp, ts_type, r.key, r.value)
            if size + len(entry) > limit and not (first and not out):
                return b"".join(out)
            out.append(entry)
            size += len(entry)
    return b"".join(out)


def _partition_error(p: int, code: ErrorCode, plog: PartitionLog | None = None) -> PartitionData:
    """A partition's error answer; with its log, the log's offsets (OFFSET_OUT_OF_RANGE and an
    unsupported compression name them)."""
    hw, lso, start = (-1, -1, -1) if plog is None else (
        plog.high_watermark, plog.last_stable_offset, plog.log_start_offset)
    return PartitionData(partition_index=p, error_code=code, high_watermark=hw, last_stable_offset=lso,
                         log_start_offset=start, records=b"")


def _leader_log(ctx: RequestContext, topic: str | None, fp) -> PartitionLog | ErrorCode:  # noqa: ANN001
    """The partition's log if this node leads it in the epoch the client knows, else the error."""
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic is None else \
        leader_error(ctx, topic, fp.partition, fp.current_leader_epoch)
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and ctx.api_version >= 13:
        return ErrorCode.UNKNOWN_TOPIC_ID  # v13+ names topics by id
    if code != ErrorCode.NONE or topic is None:
        return code
    return ctx.broker.partition_log(topic, fp.partition)


def read_partition(ctx: RequestContext, topic: str | None, fp, budget: int, first: bool,  # noqa: ANN001
                   read_committed: bool) -> tuple[PartitionData, PartitionLog | None]:
    """One partition's answer, and its log (None when in error)."""
    p = fp.partition
    plog = _leader_log(ctx, topic, fp)
    if isinstance(plog, ErrorCode):
        return _partition_error(p, plog), None
    hw = plog.high_watermark
    lso = plog.last_stable_offset
    limit = min(fp.partition_max_bytes, budget)
    records: bytes | memoryview
    try:
        if limit <= 0 and not first:
            records, next_offset = b"", -1
        else:
            records, next_offset = plog.read_with_end(fp.fetch_offset, max(limit, 0), min_one=first,
                                                      max_offset=lso if read_committed else hw)
    except OffsetOutOfRangeError:
        return _partition_error(p, ErrorCode.OFFSET_OUT_OF_RANGE, plog), None
    except StorageError:  # the log is offline (a failed fsync): KAFKA_STORAGE_ERROR until a restart
        return _partition_error(p, ErrorCode.KAFKA_STORAGE_ERROR), None
    if ctx.api_version < 4 and records:
        # Fetch v0-v3 know only message sets: v0-v1 magic 0, v2-v3 magic 1 (as Kafka 3.x's
        # down-conversion); a zstd batch cannot be expressed in them.
        try:
            records = downconvert(records, fp.fetch_offset, 0 if ctx.api_version < 2 else 1, max(limit, 0), first)
        except UnsupportedCompression:
            return _partition_error(p, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, plog), None
    aborted = None
    if read_committed:
        aborted = [] if next_offset < 0 else [
            AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
            for a in plog.aborted_transactions(fp.fetch_offset, next_offset)]
    return PartitionData(partition_index=p, error_code=ErrorCode.NONE, high_watermark=hw,
                         last_stable_offset=lso, log_start_offset=plog.log_start_offset,
                         aborted_transactions=aborted, preferred_read_replica=-1, records=records), plog


def read_all(ctx: RequestContext, req: FetchRequest, names: list[str | None],
             budget: int, denied: frozenset[str] = frozenset()) -> tuple[list[TopicResponse], int, bool]:
    """Every partition's answer within ``budget`` bytes; their size in all; whether any failed.
    The partitions of ``denied`` topics (not readable by the principal) answer TOPIC_AUTHORIZATION_FAILED
    and do not end the wait for the others, as in Kafka."""
    read_committed = ctx.api_version >= 4 and req.isolation_level == 1
    total = 0
    any_error = False
    out = []
    for topic_req, name in zip(req.topics, names, strict=True):
        parts = []
        for fp in topic_req.partitions:
            if name is not None and name in denied:
                parts.append(_partition_error(fp.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            data, plog = read_partition(ctx, name, fp, budget - total, total == 0, read_committed)
            if plog is None:
                any_error = True
            total += len(data.records) if data.records is not None else 0
            parts.append(data)
        out.append(TopicResponse(topic=name or "", topic_id=topic_req.topic_id, partitions=parts))
    return out, total, any_error


def _topic_names(ctx: RequestContext, req: FetchRequest) -> list[str | None]:
    """The topics' names (v13+ names them by id: None for an unknown id); before v13, the
    request's topic ids are filled in for the response."""
    metadata = ctx.broker.metadata
    if ctx.api_version >= 13:
        names: list[str | None] = []
        for t in req.topics:
            info = metadata.by_id.get(t.topic_id)
            names.append(info.name if info is not None else None)
        return names
    for t in req.topics:
        info = metadata.topics.get(t.topic)
        t.topic_id = info.topic_id if info is not None else uuid.UUID(int=0)
    return [t.topic for t in req.topics]


@handles(ApiKey.FETCH, access=(Access(ResourceType.TOPIC, AclOperation.READ),))
async def fetch(ctx: RequestContext, req: FetchRequest) -> FetchResponse:
    if ctx.api_version >= 7 and req.session_id != 0:
        # We never hand out session ids, so any id the client names is unknown.
        return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                             session_id=0, responses=[])
    broker = ctx.broker
    names = _topic_names(ctx, req)
    known = [n for n in names if n is not None]
    # a consumer needs each topic's READ; a follower (replica id >= 0) the cluster's CLUSTER_ACTION
    replica = req.replica_state.replica_id if ctx.api_version >= 15 and req.replica_state else req.replica_id
    if replica >= 0:
        denied = frozenset() if allowed(ctx, AclOperation.CLUSTER_ACTION) else frozenset(known)
    else:
        denied = frozenset(known) - filter_allowed(ctx, AclOperation.READ, ResourceType.TOPIC, known)
    # nothing left to wait for when every topic is denied (Kafka answers at once)
    nothing_readable = bool(denied) and all(n is not None and n in denied for n in names)
    deadline = monotonic_ms() + max(req.max_wait_ms, 0)
    want = min(req.max_bytes if ctx.api_version >= 3 else 0x7FFFFFFF, broker.config.get_int("fetch.max.bytes"))
    memory = broker.response_memory
    while True:
        # What this response may hold comes from the broker's response budget (it is read
        # and copied, not sent with sendfile); given back once the response has been sent.
        granted = await memory.acquire(want)
        try:
            responses, total, any_error = read_all(ctx, req, names, granted, denied)
        except BaseException:
            memory.release(granted)
            raise
        memory.adjust(granted, total)
        remaining = deadline - monotonic_ms()
        if total >= req.min_bytes or any_error or nothing_readable or remaining <= 0 or not ctx.node.running:
            if ctx.connection is not None:
                ctx.connection.release_when_sent(memory, total)
            else:
                memory.release(total)
            break
        memory.release(total)
        await broker.fetch_waiters.wait(
            [(name, fp.partition) for name, t in zip(names, req.topics, strict=True) for fp in t.partitions],
            remaining / 1000)
    for t in responses:
        if t.topic:
            broker.metrics.fetched(t.topic, sum(len(p.records) for p in t.partitions if p.records is not None))
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=responses)
