"""DescribeCluster: brokers, controller and cluster id (what AdminClient asks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.protocol.acl_operations import CLUSTER_OPERATIONS, NOT_REQUESTED
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.describe_cluster_response import DescribeClusterResponse

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext


def register(broker: Broker) -> None:
    async def describe_cluster(ctx: RequestContext, req) -> DescribeClusterResponse:
        brokers = [DescribeClusterResponse.DescribeClusterBroker(
            broker_id=n.node_id, host=n.advertised_host, port=n.port, rack=None)
            for n in broker.nodes.values() if n.running]
        return DescribeClusterResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                       endpoint_type=1, cluster_id=broker.cluster_id,
                                       controller_id=broker.metadata.controller_id, brokers=brokers,
                                       cluster_authorized_operations=CLUSTER_OPERATIONS
                                       if req.include_cluster_authorized_operations else NOT_REQUESTED)

    broker.apis.register(60, describe_cluster)
