"""ApiVersions: the version ranges this broker answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.apis import handles
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.api_versions_response import ApiVersionsResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.api_versions_request import ApiVersionsRequest


@handles(ApiKey.API_VERSIONS)
async def api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=ctx.broker.apis.api_keys(), throttle_time_ms=0)
