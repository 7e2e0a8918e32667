"""`shoal offsets dump`: print `__consumer_offsets` as Kafka's console formatters do.

Reads each partition over the wire (Fetch from its leader, from the log start
to the high watermark seen at the start, then stops) and prints every
OffsetCommit record as OffsetsMessageFormatter does and every GroupMetadata
record as GroupMetadataMessageFormatter does (the lines come from
`shoal.coordinator.group.formatter`, a pure module).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from shoal.coordinator.group.formatter import format_record
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.fetch_request import FetchRequest
from shoal.protocol.generated.list_offsets_request import ListOffsetsRequest
from shoal.protocol.record_batch import RecordBatchError, iter_all_records, iter_batches
from shoal.tools.wire import BrokerConnection, ToolClient, ToolError, check_error, error_name

__all__ = ["OFFSETS_TOPIC", "DumpStats", "dump_offsets", "dump_partition", "format_fetched"]

OFFSETS_TOPIC = "__consumer_offsets"
EARLIEST_TIMESTAMP = -2
_MAX_PARTITION_BYTES = 64 * 1024 * 1024
_ZERO_UUID = uuid.UUID(int=0)


@dataclass
class DumpStats:
    printed: int = 0
    skipped: int = 0  # records neither formatter prints (e.g. other key versions)
    unreadable: int = 0


def _earliest(conn: BrokerConnection, partition: int) -> int:
    v = conn.version(ApiKey.LIST_OFFSETS)
    req = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=OFFSETS_TOPIC, partitions=[ListOffsetsRequest.ListOffsetsPartition(
            partition_index=partition, timestamp=EARLIEST_TIMESTAMP, current_leader_epoch=-1, max_num_offsets=1)])])
    p = conn.send(req, v).topics[0].partitions[0]
    check_error(p.error_code, f"ListOffsets for {OFFSETS_TOPIC}-{partition} failed")
    return p.offset if v >= 1 else (p.old_style_offsets[0] if p.old_style_offsets else 0)


def _print_record(key: bytes | None, value: bytes | None, out: Callable[[str], None], stats: DumpStats) -> None:
    if key is None:
        stats.skipped += 1
        return
    try:
        line = format_record(bytes(key), None if value is None else bytes(value))
    except (ValueError, IndexError):
        stats.unreadable += 1
        return
    if line is None:
        stats.skipped += 1
    else:
        out(line)
        stats.printed += 1


def format_fetched(records: bytes | memoryview, offset: int, end: int, out: Callable[[str], None],
                   stats: DumpStats) -> int:
    """Print the records of fetched batches in ``[offset, end)``; return the next offset to fetch.

    Batches may start before ``offset`` (Fetch returns whole batches); control
    batches (transaction markers) print nothing but still move the position on.
    """
    next_offset = offset
    for header in iter_batches(records):
        next_offset = max(next_offset, header.last_offset + 1)
    for _, record in iter_all_records(records, skip_control=True):
        if offset <= record.offset < end:
            _print_record(record.key, record.value, out, stats)
    return next_offset


def dump_partition(conn: BrokerConnection, partition: int, topic_id: uuid.UUID, out: Callable[[str], None],
                   stats: DumpStats, *, max_bytes: int = 1024 * 1024) -> None:
    """Print every record of one `__consumer_offsets` partition, from log start to the current end."""
    v = conn.version(ApiKey.FETCH)
    if v >= 13 and topic_id == _ZERO_UUID:
        v = conn.version(ApiKey.FETCH, 12)  # no topic id known: use the last version that names topics
    offset = _earliest(conn, partition)
    end: int | None = None
    partition_bytes = max_bytes
    while end is None or offset < end:
        req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=partition_bytes,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=[
                               FetchRequest.FetchTopic(topic=OFFSETS_TOPIC, topic_id=topic_id, partitions=[
                                   FetchRequest.FetchPartition(partition=partition, fetch_offset=offset,
                                                               partition_max_bytes=partition_bytes)])])
        resp = conn.send(req, v)
        if v >= 7 and resp.error_code != ErrorCode.NONE:
            raise ToolError(f"Fetch from {OFFSETS_TOPIC}-{partition} failed: {error_name(resp.error_code)}")
        pd = resp.responses[0].partitions[0]
        check_error(pd.error_code, f"Fetch from {OFFSETS_TOPIC}-{partition} failed")
        if end is None:
            end = pd.high_watermark  # stop at the end as it was when we started
        try:
            next_offset = format_fetched(pd.records or b"", offset, end, out, stats)
        except RecordBatchError as e:
            raise ToolError(f"bad record batch in {OFFSETS_TOPIC}-{partition} near offset {offset}: {e}") from None
        if next_offset == offset:
            if offset >= end:
                break
            if partition_bytes >= _MAX_PARTITION_BYTES:
                raise ToolError(f"no progress reading {OFFSETS_TOPIC}-{partition} at offset {offset}")
            partition_bytes *= 4  # a batch larger than we asked for: ask for more
            continue
        offset = next_offset


def dump_offsets(client: ToolClient, out: Callable[[str], None], partitions: list[int] | None = None) -> DumpStats:
    """Dump the given partitions of `__consumer_offsets` (default: all), in partition order."""
    md = client.metadata([OFFSETS_TOPIC])
    topic = next((t for t in md.topics if t.name == OFFSETS_TOPIC), None)
    if topic is None or topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise ToolError(f"topic {OFFSETS_TOPIC} does not exist yet (no group has used this cluster)")
    check_error(topic.error_code, f"metadata of {OFFSETS_TOPIC}")
    leaders = {p.partition_index: p.leader_id for p in topic.partitions}
    chosen = sorted(leaders) if partitions is None else partitions
    for p in chosen:
        if p not in leaders:
            raise ToolError(f"{OFFSETS_TOPIC} has no partition {p} (it has {len(leaders)})")
    stats = DumpStats()
    topic_id = topic.topic_id if isinstance(topic.topic_id, uuid.UUID) else _ZERO_UUID
    for p in chosen:
        if leaders[p] < 0:
            raise ToolError(f"{OFFSETS_TOPIC}-{p} has no leader")
        dump_partition(client.node(leaders[p]), p, topic_id, out, stats)
    return stats
