"""DeleteRecords (move a partition's log start offset), DescribeLogDirs (what each log dir holds)
and AlterReplicaLogDirs (move a partition's files to another log dir).

DeleteRecords: `offset` -1 means the high watermark; beyond it OFFSET_OUT_OF_RANGE, as Kafka.
Whole segments below the new start are removed; consumers see the new log start offset at
once (ListOffsets earliest, OFFSET_OUT_OF_RANGE below it). The answer's low watermark is the
new log start offset.

DescribeLogDirs: every log dir with the partitions it holds and their sizes on disk, and the
dir's total and usable bytes (v4+). A partition never written to has no files yet (partitions
are made on first use), so it is reported in no dir, as a Kafka partition not hosted here.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from shoal.broker.metadata import INTERNAL_TOPICS
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.alter_replica_log_dirs_response import AlterReplicaLogDirsResponse
from shoal.protocol.generated.delete_records_response import DeleteRecordsResponse
from shoal.protocol.generated.describe_log_dirs_response import DescribeLogDirsResponse
from shoal.storage import OffsetOutOfRangeError

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext


def register(broker: Broker) -> None:
    metadata = broker.metadata

    async def delete_records(ctx: RequestContext, req) -> DeleteRecordsResponse:
        topics = []
        for t in req.topics:
            parts = []
            info = metadata.topics.get(t.name)
            for p in t.partitions:
                low, code = -1, ErrorCode.NONE
                if info is None or not 0 <= p.partition_index < info.num_partitions:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif metadata.leader(t.name, p.partition_index) != ctx.node.node_id:
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                elif t.name in INTERNAL_TOPICS:
                    code = ErrorCode.POLICY_VIOLATION  # Kafka: "Cannot delete records of internal topics"
                else:
                    plog = broker.partition_log(t.name, p.partition_index)
                    try:
                        low = plog.delete_records(p.offset)
                    except OffsetOutOfRangeError:
                        code = ErrorCode.OFFSET_OUT_OF_RANGE
                parts.append(DeleteRecordsResponse.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=low, error_code=code))
            topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=t.name, partitions=parts))
        return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)

    async def describe_log_dirs(ctx: RequestContext, req) -> DescribeLogDirsResponse:
        wanted: dict[str, set[int]] | None = None
        if req.topics is not None:
            wanted = {t.topic: set(t.partitions) for t in req.topics}
        by_dir: dict[str, dict[str, list[DescribeLogDirsResponse.DescribeLogDirsPartition]]] = {
            str(d): {} for d in broker.logs.log_dirs}
        for (topic, p), plog in sorted(broker.logs.logs().items()):
            if wanted is not None and p not in wanted.get(topic, ()):
                continue
            if metadata.leader(topic, p) != ctx.node.node_id and topic in metadata.topics:
                # every node shares the storage: report each partition on its leader, as its host
                continue
            by_dir.setdefault(str(plog.dir.parent), {}).setdefault(topic, []).append(
                DescribeLogDirsResponse.DescribeLogDirsPartition(
                    partition_index=p, partition_size=plog.size_bytes, offset_lag=0, is_future_key=False))
        results = []
        for d, topics in by_dir.items():
            try:
                usage = shutil.disk_usage(d)
                total, usable = usage.total, usage.free
            except OSError:
                total = usable = -1
            results.append(DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=ErrorCode.NONE, log_dir=d, total_bytes=total, usable_bytes=usable,
                topics=[DescribeLogDirsResponse.DescribeLogDirsTopic(name=t, partitions=ps)
                        for t, ps in sorted(topics.items())]))
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)

    async def alter_replica_log_dirs(ctx: RequestContext, req) -> AlterReplicaLogDirsResponse:
        dirs = {str(d): d for d in broker.logs.log_dirs}
        results: dict[str, list[AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult]] = {}
        for d in req.dirs:
            target = dirs.get(d.path.rstrip("/") or "/")
            for t in d.topics:
                info = metadata.topics.get(t.name)
                for p in t.partitions:
                    current = broker.logs.get(t.name, p)
                    if target is None:
                        code = ErrorCode.LOG_DIR_NOT_FOUND
                    elif info is None or not 0 <= p < info.num_partitions:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    elif t.name in INTERNAL_TOPICS and current is not None and current.dir.parent != target:
                        code = ErrorCode.INVALID_REQUEST  # a coordinator reads it: not moved while loaded
                    else:
                        broker.logs.move(t.name, p, target)
                        code = ErrorCode.NONE
                    results.setdefault(t.name, []).append(
                        AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult(partition_index=p,
                                                                                     error_code=code))
        return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
            AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=name, partitions=parts)
            for name, parts in results.items()])

    broker.apis.register(21, delete_records)
    broker.apis.register(34, alter_replica_log_dirs)
    broker.apis.register(35, describe_log_dirs)
