"""ElectLeaders, partition reassignment, DescribeTopicPartitions (KIP-966) and DescribeQuorum.

Every node of a process shares one storage, so a replica is always in sync: a partition's
leader is its first live replica (its preferred leader whenever that one is up), and a
reassignment completes the moment it is accepted (there is no data to copy). The answers say
so in Kafka's terms: a preferred election where the preferred replica leads already is
ELECTION_NOT_NEEDED; a reassignment is applied at once and never listed as ongoing; the
metadata quorum is one voter, the controller, whose log is the cluster metadata log.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, authorized_operations, filter_allowed
from shoal.broker.metadata import INTERNAL_TOPICS
from shoal.protocol.acl_operations import NOT_REQUESTED, AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
)
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_quorum_response import DescribeQuorumResponse
from shoal.protocol.generated.describe_topic_partitions_response import DescribeTopicPartitionsResponse
from shoal.protocol.generated.elect_leaders_response import ElectLeadersResponse
from shoal.protocol.generated.list_partition_reassignments_response import ListPartitionReassignmentsResponse

if TYPE_CHECKING:
    from shoal.broker.metadata import ClusterMetadata, TopicInfo
    from shoal.broker.node import RequestContext
    from shoal.broker.services import BrokerServices
    from shoal.protocol.generated.alter_partition_reassignments_request import (
        AlterPartitionReassignmentsRequest,
    )
    from shoal.protocol.generated.describe_quorum_request import DescribeQuorumRequest
    from shoal.protocol.generated.describe_topic_partitions_request import DescribeTopicPartitionsRequest
    from shoal.protocol.generated.elect_leaders_request import ElectLeadersRequest
    from shoal.protocol.generated.list_partition_reassignments_request import (
        ListPartitionReassignmentsRequest,
    )

METADATA_TOPIC = "__cluster_metadata"


class ElectionType(IntEnum):
    """Kafka's ElectionType: which replicas an ElectLeaders request may elect."""

    PREFERRED = 0
    UNCLEAN = 1


PREFERRED, UNCLEAN = ElectionType
# Kafka's max.request.partition.size.limit: the most partitions one DescribeTopicPartitions answers
MAX_PARTITIONS_PER_RESPONSE = 2000

DTP = DescribeTopicPartitionsResponse
ERR = ElectLeadersResponse
APR = AlterPartitionReassignmentsResponse
DQR = DescribeQuorumResponse
_CLUSTER_ALTER = (Access(ResourceType.CLUSTER, AclOperation.ALTER),)
_CLUSTER_DESCRIBE = (Access(ResourceType.CLUSTER, AclOperation.DESCRIBE),)


def _known(metadata: ClusterMetadata, topic: str, p: int) -> bool:
    info = metadata.topics.get(topic)
    return info is not None and 0 <= p < info.num_partitions


# -- ElectLeaders -------------------------------------------------------------

def _election_result(metadata: ClusterMetadata, topic: str, p: int, election: int) -> ERR.PartitionResult:
    """What an election of ``topic``-``p`` comes to: the first live replica leads already."""
    code, message = ErrorCode.NONE, None
    if topic not in metadata.topics:  # Kafka's controller's messages
        code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    elif not _known(metadata, topic, p):
        code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{p}"
    elif election not in (PREFERRED, UNCLEAN):
        code, message = ErrorCode.INVALID_REQUEST, f"unknown election type {election}"
    else:
        st = metadata.partition(topic, p)
        if election == PREFERRED and st.replicas and st.replicas[0] not in metadata.live:
            code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # no message: clients show the code's own
        elif st.leader < 0:
            code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        else:  # the first live replica leads already
            code = ErrorCode.ELECTION_NOT_NEEDED
    return ERR.PartitionResult(partition_id=p, error_code=code, error_message=message)


@handles(ApiKey.ELECT_LEADERS, access=_CLUSTER_ALTER)
async def elect_leaders(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    metadata = ctx.broker.metadata
    election = req.election_type if ctx.api_version >= 1 else PREFERRED
    if req.topic_partitions is None:  # every partition
        wanted = [(t, list(range(i.num_partitions))) for t, i in sorted(metadata.topics.items())]
    else:
        wanted = [(t.topic, list(t.partitions)) for t in req.topic_partitions]
    if not allowed(ctx, AclOperation.ALTER):  # the request and every partition fail
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return ElectLeadersResponse(throttle_time_ms=0, error_code=denied, replica_election_results=[
            ERR.ReplicaElectionResult(topic=topic, partition_result=[
                ERR.PartitionResult(partition_id=p, error_code=denied, error_message=None) for p in parts])
            for topic, parts in wanted])
    results = [ERR.ReplicaElectionResult(topic=topic, partition_result=[
        _election_result(metadata, topic, p, election) for p in parts]) for topic, parts in wanted]
    if req.topic_partitions is None:
        # as Kafka's controller: an election of every partition leaves out the partitions that needed none
        # (each topic stays, with what is left)
        for r in results:
            r.partition_result = [x for x in r.partition_result if x.error_code != ErrorCode.ELECTION_NOT_NEEDED]
    return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)


# -- partition reassignment ---------------------------------------------------

async def _reassign(broker: BrokerServices, topic: str, p: AlterPartitionReassignmentsRequest.ReassignablePartition,
                    ) -> APR.ReassignablePartitionResponse:
    """Apply one partition's reassignment at once (or refuse it as Kafka would)."""
    code, message = ErrorCode.NONE, None
    if not _known(broker.metadata, topic, p.partition_index):
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    elif p.replicas is None:  # a cancellation: nothing is ever in progress
        code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    elif not p.replicas or len(set(p.replicas)) != len(p.replicas):
        code, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
            "The proposed replica assignment is empty or contains duplicates."
    elif any(r not in broker.nodes for r in p.replicas):
        code, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
            f"The proposed assignment contains non-live brokers: {p.replicas}"
    elif topic in INTERNAL_TOPICS and len(p.replicas) < 1:
        code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    else:
        await broker.reassign(topic, p.partition_index, list(p.replicas))
    return APR.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code,
                                             error_message=message)


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS, access=_CLUSTER_ALTER)
async def alter_partition_reassignments(ctx: RequestContext, req: AlterPartitionReassignmentsRequest,
                                        ) -> AlterPartitionReassignmentsResponse:
    if not allowed(ctx, AclOperation.ALTER):
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=denied, error_message=None,
                                                   responses=[APR.ReassignableTopicResponse(name=t.name, partitions=[
                                                       APR.ReassignablePartitionResponse(
                                                           partition_index=p.partition_index, error_code=denied,
                                                           error_message=None) for p in t.partitions])
                                                       for t in req.topics])
    responses = [APR.ReassignableTopicResponse(name=t.name, partitions=[
        await _reassign(ctx.broker, t.name, p) for p in t.partitions]) for t in req.topics]
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                               error_message=None, responses=responses)


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS, access=_CLUSTER_DESCRIBE)
async def list_partition_reassignments(ctx: RequestContext, req: ListPartitionReassignmentsRequest,
                                       ) -> ListPartitionReassignmentsResponse:
    # Reassignments complete when accepted: none is ever ongoing.
    code = ErrorCode.NONE if allowed(ctx, AclOperation.DESCRIBE) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=code,
                                              error_message=None, topics=[])


# -- DescribeTopicPartitions --------------------------------------------------

def _described_partition(metadata: ClusterMetadata, name: str,
                         p: int) -> DTP.DescribeTopicPartitionsResponsePartition:
    st = metadata.partition(name, p)
    return DTP.DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.NONE if st.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
        partition_index=p, leader_id=st.leader, leader_epoch=st.leader_epoch,
        replica_nodes=st.replicas, isr_nodes=st.isr, eligible_leader_replicas=[], last_known_elr=[],
        offline_replicas=[r for r in st.replicas if r not in st.isr])


def _partitions_page(metadata: ClusterMetadata, info: TopicInfo, first: int, budget: int,
                     ) -> tuple[list[DTP.DescribeTopicPartitionsResponsePartition], DTP.Cursor | None]:
    """A topic's partitions from ``first``, at most ``budget`` of them, and the cursor past them if
    some are left."""
    last = min(info.num_partitions, first + budget)
    parts = [_described_partition(metadata, info.name, p) for p in range(first, last)]
    cursor = DTP.Cursor(topic_name=info.name, partition_index=last) if last < info.num_partitions else None
    return parts, cursor


@handles(ApiKey.DESCRIBE_TOPIC_PARTITIONS, access=(Access(ResourceType.TOPIC, AclOperation.DESCRIBE),))
async def describe_topic_partitions(ctx: RequestContext,
                                    req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    metadata = ctx.broker.metadata
    names = sorted({t.name for t in req.topics}) if req.topics else sorted(metadata.topics)
    # each topic's DESCRIBE: a named topic is refused (after the described ones, outside the paging,
    # existence unchecked), a listing leaves it out
    describable = filter_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    refused = [DTP.DescribeTopicPartitionsResponseTopic(
        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=n, is_internal=False, partitions=[],
        topic_authorized_operations=NOT_REQUESTED) for n in names if n not in describable] if req.topics else []
    names = [n for n in names if n in describable]
    budget = max(1, min(req.response_partition_limit, MAX_PARTITIONS_PER_RESPONSE))
    start_topic = req.cursor.topic_name if req.cursor is not None else None
    start_partition = req.cursor.partition_index if req.cursor is not None else 0
    topics, cursor = [], None
    for name in names:
        if start_topic is not None and name < start_topic:
            continue
        info = metadata.topics.get(name)
        if info is None:
            topics.append(DTP.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, is_internal=False, partitions=[],
                topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, name)))
            continue
        first = start_partition if name == start_topic else 0
        if budget == 0:
            cursor = DTP.Cursor(topic_name=name, partition_index=first)
            break
        parts, cursor = _partitions_page(metadata, info, first, budget)
        budget -= len(parts)
        topics.append(DTP.DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.NONE, name=name, topic_id=info.topic_id, is_internal=info.is_internal,
            partitions=parts, topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, name)))
        if cursor is not None:
            break
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics + refused, next_cursor=cursor)


# -- DescribeQuorum -----------------------------------------------------------

def _quorum_partition(metadata: ClusterMetadata, topic: str, partition: int) -> DQR.PartitionData:
    """The metadata log's partition: one voter, the controller; every other live node observes."""
    if topic != METADATA_TOPIC or partition != 0:
        return DQR.PartitionData(
            partition_index=partition, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            leader_id=-1, leader_epoch=-1, high_watermark=-1, current_voters=[], observers=[])
    leader, end = metadata.controller_id, metadata.log_records
    voter, *observers = [DQR.ReplicaState(replica_id=n, log_end_offset=end, last_fetch_timestamp=-1,
                                          last_caught_up_timestamp=-1)
                         for n in [leader, *(n for n in sorted(metadata.live) if n != leader)]]
    return DQR.PartitionData(partition_index=0, error_code=ErrorCode.NONE, leader_id=leader, leader_epoch=1,
                             high_watermark=end, current_voters=[voter], observers=observers)


@handles(ApiKey.DESCRIBE_QUORUM, access=_CLUSTER_DESCRIBE)
async def describe_quorum(ctx: RequestContext, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    broker = ctx.broker
    if not allowed(ctx, AclOperation.DESCRIBE):
        return DescribeQuorumResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, topics=[], nodes=[])
    leader = broker.metadata.controller_id
    topics = [DQR.TopicData(topic_name=t.topic_name, partitions=[
        _quorum_partition(broker.metadata, t.topic_name, p.partition_index) for p in t.partitions])
        for t in req.topics]
    nodes = [DQR.Node(node_id=n.node_id, listeners=[DQR.Listener(
        name=listener.name, host=listener.advertised_host, port=listener.advertised_port)
        for listener in n.listeners]) for n in broker.nodes.values()
        if n.node_id == leader] if ctx.api_version >= 2 else []
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, topics=topics, nodes=nodes)
