"""The table of APIs a broker answers: version ranges and handlers.

Each handler module registers its API with the version range it supports.
ApiVersions advertises exactly this table, so a client never sees an API
that would not be answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated import api_spec
from shoal.protocol.generated.api_versions_response import ApiVersionsResponse

Handler = Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Api:
    api_key: int
    name: str
    request: Any
    response: Any
    min_version: int
    max_version: int
    handler: Handler


class ApiRegistry:
    def __init__(self) -> None:
        self._apis: dict[int, Api] = {}

    def register(self, api_key: int, handler: Handler, *, min_version: int | None = None,
                 max_version: int | None = None) -> None:
        spec = api_spec(api_key)
        lo = spec.min_version if min_version is None else min_version
        hi = spec.max_version if max_version is None else max_version
        self._apis[api_key] = Api(api_key, spec.name, spec.request, spec.response, lo, hi, handler)

    def get(self, api_key: int) -> Api | None:
        return self._apis.get(api_key)

    def __iter__(self):
        return iter(sorted(self._apis.values(), key=lambda a: a.api_key))

    def api_keys(self) -> list[ApiVersionsResponse.ApiVersion]:
        return [ApiVersionsResponse.ApiVersion(api_key=a.api_key, min_version=a.min_version,
                                               max_version=a.max_version) for a in self]

    def unsupported_api_versions_body(self) -> bytes:
        """Kafka's answer to an ApiVersions version it does not know: v0 format, error 35."""
        return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                                   api_keys=self.api_keys()).encode(0)
