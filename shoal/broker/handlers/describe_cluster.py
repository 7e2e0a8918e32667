"""DescribeCluster: brokers, controller and cluster id (what AdminClient asks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, authorized_operations
from shoal.protocol.acl_operations import NOT_REQUESTED, AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_cluster_response import DescribeClusterResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.describe_cluster_request import DescribeClusterRequest


@handles(ApiKey.DESCRIBE_CLUSTER, access=(Access(ResourceType.CLUSTER, AclOperation.DESCRIBE),))
async def describe_cluster(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    brokers = [DescribeClusterResponse.DescribeClusterBroker(
        broker_id=n.node_id, host=host, port=port, rack=None)
        for n in broker.nodes.values() if n.running for host, port in [ctx.address_of(n)]]
    return DescribeClusterResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                   endpoint_type=1, cluster_id=broker.cluster_id,
                                   controller_id=broker.metadata.controller_id, brokers=brokers,
                                   cluster_authorized_operations=_cluster_ops(ctx)
                                   if req.include_cluster_authorized_operations else NOT_REQUESTED)


def _cluster_ops(ctx: RequestContext) -> int:
    """KIP-430: what the principal may do on the cluster; 0 without the cluster's DESCRIBE."""
    return authorized_operations(ctx, ResourceType.CLUSTER) if allowed(ctx, AclOperation.DESCRIBE) else 0
