"""The table of APIs a broker answers: handlers, version ranges and the access they need.

Each handler is a module-level function declared with `@handles(ApiKey.X, ...)`:
its version range (Kafka's schema range unless narrowed) and the ACL resource
type and operation it needs, so that authorization is one stage of dispatch
rather than code in every handler. `ApiRegistry.default()` builds a broker's
table from every declared handler; ApiVersions advertises exactly this table,
so a client never sees an API that would not be answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated import api_spec
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.api_versions_response import ApiVersionsResponse

Handler = Callable[[Any, Any], Awaitable[Any]]
H = TypeVar("H", bound=Handler)


@dataclass(frozen=True)
class Access:
    """An ACL check a request needs: an operation on a resource type (Kafka's authorizer terms)."""

    resource: ResourceType
    operation: AclOperation


@dataclass(frozen=True)
class Api:
    api_key: ApiKey
    name: str
    request: Any
    response: Any
    min_version: int
    max_version: int
    handler: Handler
    access: tuple[Access, ...] = ()


@dataclass(frozen=True)
class _Declared:
    handler: Handler
    min_version: int | None
    max_version: int | None
    access: tuple[Access, ...]


_DECLARED: dict[ApiKey, _Declared] = {}


def handles(api_key: ApiKey, *, min_version: int | None = None, max_version: int | None = None,
            access: tuple[Access, ...] = ()) -> Callable[[H], H]:
    """Declare the decorated module-level function as the handler of ``api_key``.

    It is called as ``await handler(ctx, request)`` (ctx: broker.node.RequestContext) and returns
    the response, or None for no response at all (acks=0 produce). Stack the decorator to let one
    function answer several APIs.
    """
    def declare(fn: H) -> H:
        if api_key in _DECLARED:
            raise ValueError(f"{api_key.name} already has a handler: {_DECLARED[api_key].handler.__qualname__}")
        _DECLARED[api_key] = _Declared(fn, min_version, max_version, access)
        return fn
    return declare


class ApiRegistry:
    def __init__(self) -> None:
        self._apis: dict[int, Api] = {}

    @classmethod
    def default(cls) -> ApiRegistry:
        """Every declared handler (importing the handler modules declares them)."""
        import shoal.broker.handlers  # noqa: F401 - the import declares the handlers

        registry = cls()
        for api_key, d in _DECLARED.items():
            registry.register(api_key, d.handler, min_version=d.min_version, max_version=d.max_version,
                              access=d.access)
        return registry

    def register(self, api_key: ApiKey, handler: Handler, *, min_version: int | None = None,
                 max_version: int | None = None, access: tuple[Access, ...] = ()) -> None:
        spec = api_spec(api_key)
        lo = spec.min_version if min_version is None else min_version
        hi = spec.max_version if max_version is None else max_version
        self._apis[api_key] = Api(ApiKey(api_key), spec.name, spec.request, spec.response, lo, hi, handler, access)

    def get(self, api_key: int) -> Api | None:
        return self._apis.get(api_key)

    def __iter__(self) -> Iterator[Api]:
        return iter(sorted(self._apis.values(), key=lambda a: a.api_key))

    def api_keys(self) -> list[ApiVersionsResponse.ApiVersion]:
        return [ApiVersionsResponse.ApiVersion(api_key=a.api_key, min_version=a.min_version,
                                               max_version=a.max_version) for a in self]

    def unsupported_api_versions_body(self) -> bytes:
        """Kafka's answer to an ApiVersions version it does not know: v0 format, error 35."""
        return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                                   api_keys=self.api_keys()).encode(0)
