"""DeleteRecords (move a partition's log start offset), DescribeLogDirs (what each log dir holds)
and AlterReplicaLogDirs (move a partition's files to another log dir).

DeleteRecords: `offset` -1 means the high watermark; beyond it OFFSET_OUT_OF_RANGE, as Kafka.
Whole segments below the new start are removed; consumers see the new log start offset at
once (ListOffsets earliest, OFFSET_OUT_OF_RANGE below it). The answer's low watermark is the
new log start offset.

DescribeLogDirs: every log dir with the partitions it holds and their sizes on disk, and the
dir's total and usable bytes (v4+). A partition never written to has no files yet (partitions
are made on first use); Kafka makes a replica's log when the partition is created, so it is
reported with size 0 in the dir its files would go to (the one holding the fewest logs).
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, filter_allowed
from shoal.broker.metadata import INTERNAL_TOPICS
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.alter_replica_log_dirs_response import AlterReplicaLogDirsResponse
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.delete_records_response import DeleteRecordsResponse
from shoal.protocol.generated.describe_log_dirs_response import DescribeLogDirsResponse
from shoal.storage import OffsetOutOfRangeError

if TYPE_CHECKING:
    from pathlib import Path

    from shoal.broker.metadata import TopicInfo
    from shoal.broker.node import RequestContext
    from shoal.broker.services import BrokerServices
    from shoal.protocol.generated.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
    from shoal.protocol.generated.delete_records_request import DeleteRecordsRequest
    from shoal.protocol.generated.describe_log_dirs_request import DescribeLogDirsRequest

DLD = DescribeLogDirsResponse
ARLD = AlterReplicaLogDirsResponse


def _delete_partition_records(ctx: RequestContext, topic: str, info: TopicInfo | None,
                              p: DeleteRecordsRequest.DeleteRecordsPartition,
                              ) -> DeleteRecordsResponse.DeleteRecordsPartitionResult:
    """Move one partition's log start offset up to ``p.offset``: the new low watermark, or Kafka's error."""
    broker = ctx.broker
    low, code = -1, ErrorCode.NONE
    if info is None or not 0 <= p.partition_index < info.num_partitions:
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    elif broker.metadata.leader(topic, p.partition_index) != ctx.node.node_id:
        code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    elif topic in INTERNAL_TOPICS:
        code = ErrorCode.POLICY_VIOLATION  # Kafka: "Cannot delete records of internal topics"
    else:
        try:
            low = broker.partition_log(topic, p.partition_index).delete_records(p.offset)
        except OffsetOutOfRangeError:
            code = ErrorCode.OFFSET_OUT_OF_RANGE
    return DeleteRecordsResponse.DeleteRecordsPartitionResult(partition_index=p.partition_index,
                                                              low_watermark=low, error_code=code)


@handles(ApiKey.DELETE_RECORDS, access=(Access(ResourceType.TOPIC, AclOperation.DELETE),))
async def delete_records(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = []
    may_delete = filter_allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in req.topics))
    for t in req.topics:
        info = ctx.broker.metadata.topics.get(t.name)
        if t.name not in may_delete:  # checked before existence, as Kafka does
            parts = [DeleteRecordsResponse.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1,
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions]
        else:
            parts = [_delete_partition_records(ctx, t.name, info, p) for p in t.partitions]
        topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def _partitions_by_dir(ctx: RequestContext, wanted: dict[str, set[int]] | None,
                       ) -> dict[str, dict[str, list[DLD.DescribeLogDirsPartition]]]:
    """Each log dir's partitions (those ``wanted``, or all), by topic, as this node hosts them."""
    broker, metadata = ctx.broker, ctx.broker.metadata
    by_dir: dict[str, dict[str, list[DLD.DescribeLogDirsPartition]]] = {
        str(d): {} for d in broker.logs.log_dirs}
    logs = broker.logs.logs()
    held = {str(d): 0 for d in broker.logs.log_dirs}
    for plog in logs.values():
        held[str(plog.dir.parent)] = held.get(str(plog.dir.parent), 0) + 1
    unwritten = min(held, key=held.__getitem__)  # where a first write would put the files
    hosted = {(t, p) for t, info in metadata.topics.items() for p in range(info.num_partitions)}
    for topic, p in sorted(hosted | set(logs)):
        if wanted is not None and p not in wanted.get(topic, ()):
            continue
        info = metadata.topics.get(topic)
        if info is not None and (p >= info.num_partitions or ctx.node.node_id not in info.replicas[p]):
            # every node shares the storage: report each partition on the nodes that are its replicas,
            # as Kafka reports a follower's copy too (kafka-log-dirs.sh, describeReplicaLogDirs)
            continue
        plog = logs.get((topic, p))
        where, size = (str(plog.dir.parent), plog.size_bytes) if plog is not None else (unwritten, 0)
        by_dir.setdefault(where, {}).setdefault(topic, []).append(
            DLD.DescribeLogDirsPartition(partition_index=p, partition_size=size, offset_lag=0, is_future_key=False))
    return by_dir


def _log_dir_result(d: str, topics: dict[str, list[DLD.DescribeLogDirsPartition]]) -> DLD.DescribeLogDirsResult:
    try:
        usage = shutil.disk_usage(d)
        total, usable = usage.total, usage.free
    except OSError:
        total = usable = -1
    return DLD.DescribeLogDirsResult(
        error_code=ErrorCode.NONE, log_dir=d, total_bytes=total, usable_bytes=usable,
        topics=[DLD.DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in sorted(topics.items())])


@handles(ApiKey.DESCRIBE_LOG_DIRS, access=(Access(ResourceType.CLUSTER, AclOperation.DESCRIBE),))
async def describe_log_dirs(ctx: RequestContext, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not allowed(ctx, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                       results=[])
    wanted: dict[str, set[int]] | None = None
    if req.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in req.topics}
    results = [_log_dir_result(d, topics) for d, topics in _partitions_by_dir(ctx, wanted).items()]
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)


def _move_replica(broker: BrokerServices, target: Path | None, topic: str, info: TopicInfo | None,
                  p: int) -> ErrorCode:
    """Move one partition's files to ``target``, or Kafka's reason not to."""
    current = broker.logs.get(topic, p)
    if target is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    if info is None or not 0 <= p < info.num_partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if topic in INTERNAL_TOPICS and current is not None and current.dir.parent != target:
        return ErrorCode.INVALID_REQUEST  # a coordinator reads it: not moved while loaded
    broker.logs.move(topic, p, target)
    return ErrorCode.NONE


@handles(ApiKey.ALTER_REPLICA_LOG_DIRS, access=(Access(ResourceType.CLUSTER, AclOperation.ALTER),))
async def alter_replica_log_dirs(ctx: RequestContext,
                                 req: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    broker = ctx.broker
    dirs = {str(d): d for d in broker.logs.log_dirs}
    may_alter = allowed(ctx, AclOperation.ALTER)  # denied: every partition fails
    results: dict[str, list[ARLD.AlterReplicaLogDirPartitionResult]] = {}
    for d in req.dirs:
        target = dirs.get(d.path.rstrip("/") or "/")
        for t in d.topics:
            info = broker.metadata.topics.get(t.name)
            for p in t.partitions:
                code = (_move_replica(broker, target, t.name, info, p) if may_alter
                        else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                results.setdefault(t.name, []).append(
                    ARLD.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=code))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        ARLD.AlterReplicaLogDirTopicResult(topic_name=name, partitions=parts)
        for name, parts in results.items()])
