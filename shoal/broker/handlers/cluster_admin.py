"""ElectLeaders, partition reassignment, DescribeTopicPartitions (KIP-966) and DescribeQuorum.

Every node of a process shares one storage, so a replica is always in sync: a partition's
leader is its first live replica (its preferred leader whenever that one is up), and a
reassignment completes the moment it is accepted (there is no data to copy). The answers say
so in Kafka's terms: a preferred election where the preferred replica leads already is
ELECTION_NOT_NEEDED; a reassignment is applied at once and never listed as ongoing; the
metadata quorum is one voter, the controller, whose log is the cluster metadata log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.metadata import INTERNAL_TOPICS
from shoal.protocol.acl_operations import NOT_REQUESTED
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
)
from shoal.protocol.generated.describe_quorum_response import DescribeQuorumResponse
from shoal.protocol.generated.describe_topic_partitions_response import DescribeTopicPartitionsResponse
from shoal.protocol.generated.elect_leaders_response import ElectLeadersResponse
from shoal.protocol.generated.list_partition_reassignments_response import ListPartitionReassignmentsResponse

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext

METADATA_TOPIC = "__cluster_metadata"
PREFERRED, UNCLEAN = 0, 1
# Kafka's max.request.partition.size.limit: the most partitions one DescribeTopicPartitions answers
MAX_PARTITIONS_PER_RESPONSE = 2000

DTP = DescribeTopicPartitionsResponse
ERR = ElectLeadersResponse
APR = AlterPartitionReassignmentsResponse


def register(broker: Broker) -> None:
    metadata = broker.metadata

    def known(topic: str, p: int) -> bool:
        info = metadata.topics.get(topic)
        return info is not None and 0 <= p < info.num_partitions

    async def elect_leaders(ctx: RequestContext, req) -> ElectLeadersResponse:
        election = req.election_type if ctx.api_version >= 1 else PREFERRED
        if req.topic_partitions is None:  # every partition
            wanted = [(t, list(range(i.num_partitions))) for t, i in sorted(metadata.topics.items())]
        else:
            wanted = [(t.topic, list(t.partitions)) for t in req.topic_partitions]
        results = []
        for topic, parts in wanted:
            out = []
            for p in parts:
                code, message = ErrorCode.NONE, None
                if not known(topic, p):
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif election not in (PREFERRED, UNCLEAN):
                    code, message = ErrorCode.INVALID_REQUEST, f"unknown election type {election}"
                else:
                    st = metadata.partition(topic, p)
                    if election == PREFERRED and st.replicas and st.replicas[0] not in metadata.live:
                        code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                        message = f"Failed to elect leader for partition {topic}-{p} under strategy " \
                                  f"PreferredReplicaPartitionLeaderElectionStrategy"
                    elif st.leader < 0:
                        code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                    else:  # the first live replica leads already
                        code = ErrorCode.ELECTION_NOT_NEEDED
                out.append(ERR.PartitionResult(partition_id=p, error_code=code, error_message=message))
            results.append(ERR.ReplicaElectionResult(topic=topic, partition_result=out))
        return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)

    async def alter_partition_reassignments(ctx: RequestContext, req) -> AlterPartitionReassignmentsResponse:
        responses = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                code, message = ErrorCode.NONE, None
                if not known(t.name, p.partition_index):
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.replicas is None:  # a cancellation: nothing is ever in progress
                    code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
                elif not p.replicas or len(set(p.replicas)) != len(p.replicas):
                    code, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
                        "The proposed replica assignment is empty or contains duplicates."
                elif any(r not in broker.nodes for r in p.replicas):
                    code, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
                        f"The proposed assignment contains non-live brokers: {p.replicas}"
                elif t.name in INTERNAL_TOPICS and len(p.replicas) < 1:
                    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
                else:
                    await broker.reassign(t.name, p.partition_index, list(p.replicas))
                parts.append(APR.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code,
                                                               error_message=message))
            responses.append(APR.ReassignableTopicResponse(name=t.name, partitions=parts))
        return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                   error_message=None, responses=responses)

    async def list_partition_reassignments(ctx: RequestContext, req) -> ListPartitionReassignmentsResponse:
        # Reassignments complete when accepted: none is ever ongoing.
        return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                  error_message=None, topics=[])

    async def describe_topic_partitions(ctx: RequestContext, req) -> DescribeTopicPartitionsResponse:
        names = sorted({t.name for t in req.topics}) if req.topics else sorted(metadata.topics)
        limit = max(1, min(req.response_partition_limit, MAX_PARTITIONS_PER_RESPONSE))
        start_topic = req.cursor.topic_name if req.cursor is not None else None
        start_partition = req.cursor.partition_index if req.cursor is not None else 0
        topics, budget, cursor = [], limit, None
        for name in names:
            if start_topic is not None and name < start_topic:
                continue
            info = metadata.topics.get(name)
            if info is None:
                topics.append(DTP.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, is_internal=False, partitions=[],
                    topic_authorized_operations=NOT_REQUESTED))
                continue
            first = start_partition if name == start_topic else 0
            if budget == 0:
                cursor = DTP.Cursor(topic_name=name, partition_index=first)
                break
            parts = []
            for p in range(first, info.num_partitions):
                if budget == 0:
                    cursor = DTP.Cursor(topic_name=name, partition_index=p)
                    break
                st = metadata.partition(name, p)
                parts.append(DTP.DescribeTopicPartitionsResponsePartition(
                    error_code=ErrorCode.NONE if st.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                    partition_index=p, leader_id=st.leader, leader_epoch=st.leader_epoch,
                    replica_nodes=st.replicas, isr_nodes=st.isr, eligible_leader_replicas=[], last_known_elr=[],
                    offline_replicas=[r for r in st.replicas if r not in st.isr]))
                budget -= 1
            topics.append(DTP.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.NONE, name=name, topic_id=info.topic_id, is_internal=info.is_internal,
                partitions=parts, topic_authorized_operations=NOT_REQUESTED))
            if cursor is not None:
                break
        return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=cursor)

    async def describe_quorum(ctx: RequestContext, req) -> DescribeQuorumResponse:
        leader = metadata.controller_id
        end = metadata.log_records
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if t.topic_name != METADATA_TOPIC or p.partition_index != 0:
                    parts.append(DescribeQuorumResponse.PartitionData(
                        partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        leader_id=-1, leader_epoch=-1, high_watermark=-1, current_voters=[], observers=[]))
                    continue
                voter = DescribeQuorumResponse.ReplicaState(replica_id=leader, log_end_offset=end,
                                                            last_fetch_timestamp=-1, last_caught_up_timestamp=-1)
                observers = [DescribeQuorumResponse.ReplicaState(replica_id=n, log_end_offset=end,
                                                                 last_fetch_timestamp=-1, last_caught_up_timestamp=-1)
                             for n in sorted(metadata.live) if n != leader]
                parts.append(DescribeQuorumResponse.PartitionData(
                    partition_index=0, error_code=ErrorCode.NONE, leader_id=leader, leader_epoch=1,
                    high_watermark=end, current_voters=[voter], observers=observers))
            topics.append(DescribeQuorumResponse.TopicData(topic_name=t.topic_name, partitions=parts))
        nodes = [DescribeQuorumResponse.Node(node_id=n.node_id, listeners=[DescribeQuorumResponse.Listener(
            name="PLAINTEXT", host=n.advertised_host, port=n.port)]) for n in broker.nodes.values()
            if n.node_id == leader] if ctx.api_version >= 2 else []
        return DescribeQuorumResponse(error_code=ErrorCode.NONE, topics=topics, nodes=nodes)

    broker.apis.register(43, elect_leaders)
    broker.apis.register(45, alter_partition_reassignments)
    broker.apis.register(46, list_partition_reassignments)
    broker.apis.register(55, describe_quorum)
    broker.apis.register(75, describe_topic_partitions)
