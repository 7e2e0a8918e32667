"""ApiVersions: the version ranges this broker answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_versions_response import ApiVersionsResponse

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext


def register(broker: Broker) -> None:
    async def api_versions(ctx: RequestContext, request) -> ApiVersionsResponse:
        return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=broker.apis.api_keys(),
                                   throttle_time_ms=0)

    broker.apis.register(18, api_versions)
