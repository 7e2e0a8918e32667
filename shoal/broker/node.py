"""One broker node: its listeners, its node id, and request dispatch.

Several nodes can live in one process (`shoal serve --nodes N`); they share
the `Broker` (metadata, storage, coordinators) but each answers as itself:
leadership checks, NOT_LEADER_OR_FOLLOWER and NOT_COORDINATOR depend on
which node a request reached.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Awaitable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shoal.broker.authorize import authorize
from shoal.broker.connection import CloseConnection, KafkaConnection
from shoal.broker.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEnforcer,
    quota_user,
    request_percentage,
)
from shoal.broker.security.authentication import AuthenticationFailed, IllegalRequest
from shoal.clock import monotonic_ms, now_ms
from shoal.protocol.errors import DecodeError
from shoal.protocol.framing import (
    decode_request_header,
    encode_response,
    finish_frame,
    response_header_version,
    start_response,
)
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.fetch_response import FetchResponse
from shoal.protocol.generated.share_fetch_response import ShareFetchResponse

if TYPE_CHECKING:
    from shoal.broker.apis import Api
    from shoal.broker.broker import Broker
    from shoal.broker.security.listeners import ListenerSecurity
    from shoal.broker.services import BrokerServices

log = logging.getLogger(__name__)

_KEY_VERSION = struct.Struct(">hh")
_CORRELATION = struct.Struct(">i")
_SIZE = struct.Struct(">i")


@dataclass
class RequestContext:
    """What a handler knows about the request besides its body."""

    node: BrokerNode
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    connection: KafkaConnection | None = None
    principal: str = "User:ANONYMOUS"

    @property
    def broker(self) -> BrokerServices:
        """The broker state the handler may use (shared by every node of the process)."""
        return self.node.broker

    def address_of(self, node: BrokerNode) -> tuple[str, int]:
        """Where clients reach ``node``: its advertised address on the listener this request came
        in on (Kafka answers each listener with that listener's addresses)."""
        listener = node.listener(self.connection.listener.name if self.connection is not None else None)
        return listener.advertised_host, listener.advertised_port


class NodeListener:
    """One listener of one node: where it binds, what it advertises, how it is secured."""

    def __init__(self, security: ListenerSecurity, host: str, port: int, advertised_host: str,
                 advertised_port: int | None) -> None:
        self.security = security
        self.name = security.spec.name
        self.host = host
        self.port = port
        self.advertised_host = advertised_host
        self._advertised_port = advertised_port
        self.server: asyncio.base_events.Server | None = None

    @property
    def advertised_port(self) -> int:
        return self.port if self._advertised_port is None else self._advertised_port


class BrokerNode:
    def __init__(self, broker: Broker, node_id: int, listeners: list[NodeListener]) -> None:
        self.broker = broker
        self.node_id = node_id
        self.listeners = listeners
        self.connections: set[KafkaConnection] = set()
        config = broker.config
        self.max_request_bytes = config.get_int("socket.request.max.bytes")
        self.max_connections = config.get_int("max.connections")
        self.max_connections_per_ip = config.get_int("max.connections.per.ip")
        self.idle_ms = config.get_int("connections.max.idle.ms")
        self.read_timeout_ms = config.get_int("request.read.timeout.ms")
        self._reaper: asyncio.Task[None] | None = None
        self.running = False
        # client quotas, measured per node as each Kafka broker does
        self.quotas = QuotaEnforcer(broker.metadata.quotas, config.get_int("quota.window.num"),
                                    config.get_int("quota.window.size.seconds"))

    # The first listener is the node's address where one address is asked for (tools, tests).
    @property
    def host(self) -> str:
        return self.listeners[0].host

    @property
    def port(self) -> int:
        return self.listeners[0].port

    @port.setter
    def port(self, port: int) -> None:
        self.listeners[0].port = port

    @property
    def advertised_host(self) -> str:
        return self.listeners[0].advertised_host

    def listener(self, name: str | None) -> NodeListener:
        """This node's listener of that name (a request is answered with addresses on the listener
        it came in on, as Kafka does); the first one if the node has no such listener."""
        for listener in self.listeners:
            if listener.name == name:
                return listener
        return self.listeners[0]

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for listener in self.listeners:
            await self._listen(loop, listener)
        self.running = True
        self._reaper = loop.create_task(self._reap_connections())

    async def _listen(self, loop: asyncio.AbstractEventLoop, listener: NodeListener) -> None:
        listener.server = await loop.create_server(
            lambda: KafkaConnection(self, listener), listener.host, listener.port, reuse_address=True,
            ssl=listener.security.ssl_context,
            # asyncio accepts up to `backlog` connections per loop turn: a burst of connections
            # must not stall every client's requests (Kafka's default is 50, too)
            backlog=self.broker.config.get_int("socket.listen.backlog.size"))
        if listener.port == 0:  # ephemeral: learn the port the OS gave us
            listener.port = listener.server.sockets[0].getsockname()[1]
        log.info("node %d listening on %s:%d (%s, %s)", self.node_id, listener.host, listener.port,
                 listener.name, listener.security.spec.protocol.value)

    def admit(self, conn: KafkaConnection) -> str | None:
        """Why a new connection is refused (max.connections, max.connections.per.ip), or None."""
        if len(self.connections) >= self.max_connections:
            return f"max.connections ({self.max_connections}) reached"
        host = conn.peer.rsplit(":", 1)[0]
        if self.max_connections_per_ip < self.max_connections:
            same = sum(1 for c in self.connections if c.peer.rsplit(":", 1)[0] == host)
            if same >= self.max_connections_per_ip:
                return f"max.connections.per.ip ({self.max_connections_per_ip}) reached for {host}"
        return None

    async def _reap_connections(self) -> None:
        """Close connections idle past connections.max.idle.ms, and those whose request bytes
        stopped arriving (request.read.timeout.ms)."""
        interval = max(0.05, min(1.0, self.read_timeout_ms / 4000, self.idle_ms / 4000))
        while True:
            await asyncio.sleep(interval)
            now = monotonic_ms()
            for conn in list(self.connections):
                since = conn.reading_frame_since
                if since is not None:
                    if now - since > self.read_timeout_ms:
                        log.warning("closing connection from %s: a request's bytes stopped arriving for "
                                    "%d ms (request.read.timeout.ms)", conn.peer, self.read_timeout_ms)
                        conn.close()
                elif not conn.in_flight and now - conn.last_active > self.idle_ms:
                    log.debug("closing connection from %s: idle for %d ms (connections.max.idle.ms)",
                              conn.peer, self.idle_ms)
                    conn.close()

    async def stop(self) -> None:
        self.running = False
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        servers = [listener.server for listener in self.listeners if listener.server is not None]
        for server in servers:
            server.close()
        for conn in list(self.connections):
            conn.close()
        for server in servers:
            await server.wait_closed()
        for listener in self.listeners:
            listener.server = None

    async def dispatch(self, frame: bytearray, conn: KafkaConnection) -> bytes | bytearray | None:
        """Decode one request frame, run its handler, return the framed response."""
        if conn.auth.raw_tokens:  # after a v0 SaslHandshake: a bare SASL token, answered bare
            return await self._raw_token(frame, conn)
        if len(frame) < 8:
            raise CloseConnection(f"request of {len(frame)} bytes is too short for a header")
        api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
        (correlation_id,) = _CORRELATION.unpack_from(frame, 4)
        auth = conn.auth
        try:
            auth.check(api_key, now_ms())
        except IllegalRequest as e:
            raise CloseConnection(str(e)) from None
        registry = self.broker.apis
        api = registry.get(api_key)
        if api is None:
            raise CloseConnection(f"unknown or unsupported API key {api_key}")
        if not api.min_version <= api_version <= api.max_version:
            if api_key == ApiKey.API_VERSIONS:  # answer so the client can downgrade
                return encode_response(correlation_id, 0, registry.unsupported_api_versions_body())
            raise CloseConnection(
                f"unsupported version {api_version} of API {api.name} "
                f"(supported {api.min_version}-{api.max_version})")
        try:
            header, offset = decode_request_header(frame)
            request = api.request.decode(memoryview(frame)[offset:], api_version)
        except DecodeError as e:
            if api_key == ApiKey.API_VERSIONS and api_version >= 3:
                # KIP-511: a newer client's ApiVersions may not parse; answer v0-style
                return encode_response(correlation_id, 0, registry.unsupported_api_versions_body())
            raise CloseConnection(f"cannot decode {api.name} v{api_version}: {e}") from None
        # Kafka's client host is Java's InetAddress.toString(), "/127.0.0.1": DescribeGroups and the
        # group records carry it so, and the tools print it as it comes.
        ctx = RequestContext(self, api_key, api_version, correlation_id,
                             header.client_id, "/" + conn.peer.rsplit(":", 1)[0], conn, auth.principal)
        authorize(ctx, api)
        enforced = self.broker.metadata.quotas.enforced
        if enforced:  # some client quota is configured: measure, and throttle what goes over
            return await self._with_quotas(ctx, api, request, len(frame), conn, enforced)
        started = time.perf_counter()
        response: Any = await api.handler(ctx, request)
        if response is None:  # acks=0 produce: no response at all
            self.broker.metrics.request(api.name, api_version, (time.perf_counter() - started) * 1000)
            return None
        # The body is encoded straight after the header: one copy of any records.
        out = start_response(correlation_id, response_header_version(api_key, api_version))
        response.encode_into(out, api_version)
        self.broker.metrics.request(api.name, api_version, (time.perf_counter() - started) * 1000)
        return finish_frame(out)

    async def _with_quotas(self, ctx: RequestContext, api: Api, request: Any, size: int, conn: KafkaConnection,
                           enforced: frozenset[str]) -> bytes | bytearray | None:
        """Handle a request as dispatch does, with Kafka's client quotas: produce counts the request's
        bytes, a consumer's fetch its response's bytes, every request its handling time (the time its
        handler ran on the loop, as Kafka counts request-handler thread time). A quota gone over sets
        the response's throttle_time_ms and mutes the connection that long after answering; a throttled
        fetch returns no data (its bytes are not counted) and a fetch never asks for more than one quota
        window can take, as Kafka."""
        quotas, version = self.quotas, ctx.api_version
        user, client_id = quota_user(ctx.principal), ctx.client_id or ""
        share_fetch = ctx.api_key == ApiKey.SHARE_FETCH  # Kafka counts ShareFetch in the fetch quota too
        consumer_fetch = share_fetch or ctx.api_key == ApiKey.FETCH and _replica_id(request, version) < 0
        if consumer_fetch and CONSUMER_BYTE_RATE in enforced and (version >= 3 or share_fetch):
            most = quotas.max_value_in_window(CONSUMER_BYTE_RATE, user, client_id)
            if most is not None:
                request.max_bytes = max(0, min(request.max_bytes, int(most)))
                request.min_bytes = min(request.min_bytes, request.max_bytes)
        started = time.perf_counter()
        timed = _Timed(api.handler(ctx, request))
        response: Any = await timed
        now = monotonic_ms()
        throttle = 0
        if REQUEST_PERCENTAGE in enforced and response is not None:  # acks=0 produce: not enforced (Kafka)
            throttle = quotas.record(REQUEST_PERCENTAGE, user, client_id, request_percentage(timed.busy), now)
        if ctx.api_key == ApiKey.PRODUCE and PRODUCER_BYTE_RATE in enforced:
            throttle = max(throttle, quotas.record(PRODUCER_BYTE_RATE, user, client_id, size, now))
        if response is None:
            self.broker.metrics.request(api.name, version, (time.perf_counter() - started) * 1000)
            if throttle > 0:
                conn.throttle(throttle)
            return None
        header_version = response_header_version(ctx.api_key, version)
        out = start_response(ctx.correlation_id, header_version)
        if consumer_fetch and response.error_code == 0:
            before = len(out)
            response.encode_into(out, version)
            fetched = len(out) - before
            if CONSUMER_BYTE_RATE in enforced:
                throttle = max(throttle, quotas.record(CONSUMER_BYTE_RATE, user, client_id, fetched, now))
            if throttle > 0:  # as Kafka: no data, and the bytes not counted
                if CONSUMER_BYTE_RATE in enforced:
                    quotas.unrecord(CONSUMER_BYTE_RATE, user, client_id, fetched, now)
                out = start_response(ctx.correlation_id, header_version)
                if share_fetch:  # as Kafka's throttled ShareFetch: no data; acquired records wait for their lock
                    ShareFetchResponse(throttle_time_ms=throttle, error_code=0,
                                       acquisition_lock_timeout_ms=response.acquisition_lock_timeout_ms,
                                       responses=[], node_endpoints=[]).encode_into(out, version)
                else:
                    FetchResponse(throttle_time_ms=throttle, error_code=0, session_id=0,
                                  responses=[]).encode_into(out, version)
        else:
            if throttle > 0 and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = max(response.throttle_time_ms, throttle)
            response.encode_into(out, version)
        self.broker.metrics.request(api.name, version, (time.perf_counter() - started) * 1000)
        if throttle > 0:
            conn.throttle(throttle)
        return finish_frame(out)

    async def _raw_token(self, frame: bytearray, conn: KafkaConnection) -> bytes:
        """One token of a v0 SASL exchange; a failure closes the connection after Kafka's delay."""
        try:
            answer, _ = conn.auth.authenticate(bytes(frame), now_ms())
        except AuthenticationFailed as e:
            delay = self.broker.config.get_int("connection.failed.authentication.delay.ms")
            await asyncio.sleep(delay / 1000)
            raise CloseConnection(f"SASL authentication failed: {e}") from None
        return _SIZE.pack(len(answer)) + answer


def _replica_id(request: Any, version: int) -> int:
    """A Fetch's replica id: a follower's node id, -1 for a consumer."""
    if version >= 15:
        state = request.replica_state
        return state.replica_id if state is not None else -1
    return int(request.replica_id)


class _Timed:
    """Awaits a handler, adding up the time it runs on the loop (not the time it waits): the
    analogue of the request-handler thread time Kafka's request quota counts."""

    def __init__(self, coro: Awaitable[Any]) -> None:
        self._coro = coro
        self.busy = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._coro.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                yielded = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as done:
                self.busy += time.perf_counter() - started
                return done.value
            self.busy += time.perf_counter() - started
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as e:  # cancellation: into the handler
                value, error = None, e
