"""One asyncio connection to one broker: framing, correlation ids, pipelining, ApiVersions, and the
connection's security (TLS, SASL authentication and KIP-368 re-authentication; see security.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
import time
from typing import Any

from shoal.protocol.errors import DecodeError, ErrorCode
from shoal.protocol.framing import (
    decode_response_header,
    finish_frame,
    response_header_version,
    start_request,
)
from shoal.protocol.generated.api_keys import ApiKey
from shoal.waits import within

from .errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaTimeoutError,
    SaslAuthenticationFailed,
    SslAuthenticationFailed,
)
from .framing import FrameProtocol
from .protocol import CLIENT_MAX_VERSIONS, SPECS, VERSION_RANGES, api_key_of
from .security import client_security, reauthentication_delay_ms

log = logging.getLogger(__name__)



def _tls_refused(e: ssl.SSLError) -> bool:
    """A TLS failure that is about trust (a certificate refused by either side), not a lost socket."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return True
    reason = (getattr(e, "reason", None) or str(e)).upper()
    return "CERTIFICATE" in reason or "ALERT" in reason


def _java_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


class BrokerConnection:
    """A pipelined request/response channel to one broker.

    Many requests may be in flight; responses come back in order and are matched by
    correlation id.  ``versions`` holds, after ``connect``, the version of each API to
    use: the highest one both the broker and this client support.

    With ``security.protocol`` SSL or SASL_SSL the socket is TLS; with SASL_PLAINTEXT or SASL_SSL
    the connection authenticates (SaslHandshake v1, then SaslAuthenticate) after ApiVersions, and
    again before the session the broker granted expires (KIP-368): requests sent meanwhile are held
    and written once the connection is authenticated again.
    """

    def __init__(self, host: str, port: int, node_id: int, config: dict[str, Any]) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self._config = config
        self._client_id: str = config.get("client.id") or ""
        self._protocol: FrameProtocol | None = None  # the socket (see framing.py); None until connected
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._correlation = 0
        self.versions: dict[int, int] = {}
        # Per-client caps ({api_key: max_version}) for brokers that advertise more than they parse.
        self._caps: dict[int, int] = dict(config.get("api.version.caps") or {})
        self.broker_ranges: dict[int, tuple[int, int]] = {}
        self.closed = False
        self._security = client_security(config)
        # While re-authenticating: requests to write afterwards (request, api key, version, future).
        self._held: list[tuple[Any, int, int, asyncio.Future | None]] | None = None
        self._drained: asyncio.Future | None = None  # resolved when no response is awaited
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task | None = None
        self.session_lifetime_ms = 0  # the broker's last answer (KIP-368); 0: never expires
        self.reauthentications = 0

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}>"

    @property
    def in_flight(self) -> int:
        return len(self._pending) + len(self._held or ())

    async def connect(self) -> None:
        """Open the socket (TLS if configured), negotiate API versions, authenticate (SASL)."""
        timeout = self._config["socket.connection.setup.timeout.ms"] / 1000
        security = self._security
        tls: dict[str, Any] = {}
        if security.ssl_context is not None:
            tls = {"ssl": security.ssl_context, "server_hostname": security.server_hostname(self.host),
                   "ssl_handshake_timeout": timeout}
        try:
            loop = asyncio.get_running_loop()
            protocol = FrameProtocol(self._on_frame, self._on_lost)
            transport, _ = await within(loop.create_connection(lambda: protocol, self.host, self.port, **tls), timeout)
        except (TimeoutError, OSError) as e:  # ssl.SSLError is an OSError
            self.closed = True
            if isinstance(e, ssl.SSLError) and _tls_refused(e):
                raise SslAuthenticationFailed(
                    f"SSL handshake with {self.host}:{self.port} failed: {e.reason or e}") from e
            raise KafkaConnectionError(f"connect to {self.host}:{self.port} failed: {e!r}") from e
        self._protocol, self._transport = protocol, transport
        try:
            await self._negotiate()
        except KafkaConnectionError as e:
            if security.ssl_context is None:
                raise
            # Like Java's client, a connection closed this early is retried; say what it may mean.
            raise KafkaConnectionError(
                f"{e}: the TLS connection to {self.host}:{self.port} was closed before it answered ApiVersions; "
                "the broker may have refused this client's certificate (or its lack of one)") from e
        if security.uses_sasl:
            await self._authenticate()

    async def _authenticate(self) -> None:
        """SaslHandshake v1 and the mechanism's SaslAuthenticate exchange; SaslAuthenticationFailed
        (the broker's message) if the broker refuses, or if the client refuses the broker's answer."""
        security = self._security
        mechanism = security.mechanism
        assert mechanism is not None
        handshake_version = self.version_up_to(ApiKey.SASL_HANDSHAKE, 1)
        auth_version = self.version_up_to(ApiKey.SASL_AUTHENTICATE, 2)
        if handshake_version < 1 or auth_version < 0:
            raise SaslAuthenticationFailed(
                f"broker {self.node_id} does not support SaslHandshake v1 and SaslAuthenticate "
                "(Kafka 1.0+), which shoal's client authenticates with", ErrorCode.ILLEGAL_SASL_STATE)
        hs = await self._exchange(SPECS[ApiKey.SASL_HANDSHAKE].request(mechanism=mechanism), handshake_version)
        if hs.error_code:
            enabled = _java_list(list(hs.mechanisms))
            if hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
                message = f"Client SASL mechanism '{mechanism}' not enabled in the server, enabled mechanisms are {enabled}"
            elif hs.error_code == ErrorCode.ILLEGAL_SASL_STATE:
                message = f"Unexpected handshake request with client mechanism {mechanism}, enabled mechanisms are {enabled}"
            else:
                message = (f"Unknown error code {hs.error_code}, client mechanism is {mechanism}, "
                           f"enabled mechanisms are {enabled}")
            raise SaslAuthenticationFailed(message, hs.error_code)
        client = security.sasl_client()
        request_class = SPECS[ApiKey.SASL_AUTHENTICATE].request
        token = client.evaluate(None)
        lifetime_ms, started = 0, time.monotonic()
        while token is not None:
            started = time.monotonic()
            resp = await self._exchange(request_class(auth_bytes=token), auth_version)
            if resp.error_code:
                raise SaslAuthenticationFailed(
                    resp.error_message or f"SASL authentication with {mechanism} failed "
                    f"(error {resp.error_code})", resp.error_code)
            if auth_version >= 1:
                lifetime_ms = resp.session_lifetime_ms
            token = client.evaluate(bytes(resp.auth_bytes))
        if not client.complete:
            raise SaslAuthenticationFailed(f"SASL authentication with {mechanism} did not complete")
        self.session_lifetime_ms = lifetime_ms
        if lifetime_ms > 0:
            delay = reauthentication_delay_ms(lifetime_ms) / 1000 - (time.monotonic() - started)
            self._reauth_timer = asyncio.get_running_loop().call_later(max(0.0, delay), self._begin_reauthentication)

    async def _exchange(self, request: Any, version: int) -> Any:
        """Send ``request`` now, past any held requests (the authentication exchange's own)."""
        if self.closed or self._transport is None:
            raise KafkaConnectionError(f"connection to node {self.node_id} is closed")
        fut = asyncio.get_running_loop().create_future()
        self._write(request, api_key_of(request), version, fut)
        return await self.wait_response(fut, request)

    def _begin_reauthentication(self) -> None:
        self._reauth_timer = None
        if self.closed or self._held is not None:  # closed, or already re-authenticating
            return
        self._held = []
        self._reauth_task = asyncio.get_running_loop().create_task(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        """KIP-368: wait until no response is awaited (the broker must not see the handshake in the
        middle of other requests), authenticate again, then write what was held meanwhile."""
        try:
            while self._pending:
                self._drained = asyncio.get_running_loop().create_future()
                await self._drained
            if self.closed:
                return
            await self._authenticate()
        except asyncio.CancelledError:
            return
        except Exception as e:  # noqa: BLE001 - whatever it was, the connection cannot go on
            log.warning("node %s: re-authentication failed: %s", self.node_id, e)
            err = e if isinstance(e, AuthenticationError | KafkaConnectionError) else KafkaConnectionError(
                f"re-authentication with node {self.node_id} failed: {e!r}")
            self.close(err)
            return
        self.reauthentications += 1
        held, self._held = self._held or [], None
        for request, api_key, version, fut in held:
            if self.closed:
                break
            if fut is not None and fut.done():
                continue  # its caller gave up (and closed the connection, or was cancelled)
            self._write(request, api_key, version, fut)

    async def _negotiate(self) -> None:
        spec = SPECS[ApiKey.API_VERSIONS]
        version = min(spec.max_version, CLIENT_MAX_VERSIONS.get(ApiKey.API_VERSIONS, spec.max_version))
        req = spec.request(client_software_name="shoal-python", client_software_version="0.1.0")
        resp = await self.send(req, version=version)
        if resp.error_code == 35 and version > 0:  # UNSUPPORTED_VERSION: answer is v0 with the ranges
            ranges = {k.api_key: k.max_version for k in resp.api_keys}
            version = min(version, ranges.get(ApiKey.API_VERSIONS, 0))
            resp = await self.send(spec.request(), version=version)
        if resp.error_code:
            raise KafkaConnectionError(f"ApiVersions failed with error {resp.error_code}")
        for k in resp.api_keys:
            self.broker_ranges[k.api_key] = (k.min_version, k.max_version)
            mine = VERSION_RANGES.get(k.api_key)  # not SPECS: that would import every API's codec
            if mine is not None:
                top = self.version_up_to(k.api_key, CLIENT_MAX_VERSIONS.get(k.api_key, mine[1]))
                if top >= 0:
                    self.versions[k.api_key] = top

    def version_up_to(self, api_key: int, highest: int) -> int:
        """The highest version of ``api_key`` both sides support, up to ``highest`` (above the
        client-wide cap in CLIENT_MAX_VERSIONS: for callers that build the newer shapes themselves);
        -1 if there is none."""
        broker = self.broker_ranges.get(api_key)
        mine = VERSION_RANGES.get(api_key)
        if broker is None or mine is None:
            return -1
        top = min(broker[1], mine[1], highest, self._caps.get(api_key, highest))
        return top if top >= max(broker[0], mine[0]) else -1

    def version_for(self, api_key: int) -> int:
        try:
            return self.versions[api_key]
        except KeyError:
            raise KafkaConnectionError(f"broker {self.node_id} supports no common version of API {api_key}") from None

    async def send(
        self,
        request: Any,
        *,
        version: int | None = None,
        expect_response: bool = True,
        timeout_ms: int | None = None,
    ) -> Any:
        """Send ``request`` and wait for its decoded response (None when no response expected)."""
        fut = self.send_nowait(request, version=version, expect_response=expect_response)
        if fut is None:
            return None
        return await self.wait_response(fut, request, timeout_ms=timeout_ms)

    async def wait_response(self, fut: asyncio.Future, request: Any, *, timeout_ms: int | None = None) -> Any:
        """Wait for the response future `send_nowait` returned, up to request.timeout.ms."""
        timeout = (timeout_ms if timeout_ms is not None else self._config["request.timeout.ms"]) / 1000
        try:
            return await within(fut, timeout)
        except TimeoutError:
            # A lost response means the stream is out of step: drop the connection.
            self.close(KafkaTimeoutError(f"request {type(request).__name__} to node {self.node_id} timed out"))
            raise KafkaTimeoutError(
                f"request {type(request).__name__} to node {self.node_id} timed out after {timeout}s"
            ) from None

    def send_nowait(
        self, request: Any, *, version: int | None = None, expect_response: bool = True
    ) -> asyncio.Future | None:
        """Write ``request`` now (after re-authentication, if that is under way); return the
        future of its response."""
        if self.closed or self._transport is None:
            raise KafkaConnectionError(f"connection to node {self.node_id} is closed")
        api_key = api_key_of(request)
        if version is None:
            version = self.version_for(api_key)
        fut: asyncio.Future | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
        if self._held is not None:
            request.encode(version)  # fail now, not after re-authentication, if it cannot be encoded
            self._held.append((request, api_key, version, fut))
        else:
            self._write(request, api_key, version, fut)
        return fut

    def _write(self, request: Any, api_key: int, version: int, fut: asyncio.Future | None) -> None:
        assert self._transport is not None
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        cid = self._correlation
        # The body is encoded straight into the frame, and the frame handed over as a view: the
        # transport copies only what the socket does not take at once (Produce frames are large).
        frame = start_request(api_key, version, cid, self._client_id)
        request.encode_into(frame, version)
        finish_frame(frame)
        if fut is not None:
            self._pending[cid] = (fut, api_key, version)
        self._transport.write(memoryview(frame))

    async def drain(self) -> None:
        if self._protocol is not None:
            await self._protocol.drain()

    def _on_frame(self, body: memoryview) -> None:
        """One response frame (after its size prefix): resolve the future of its request."""
        (cid,) = struct.unpack_from(">i", body, 0)
        entry = self._pending.pop(cid, None)
        if not self._pending and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if entry is None:
            log.warning("node %s: response with unknown correlation id %s", self.node_id, cid)
            return
        fut, api_key, version = entry
        if fut.done():
            return
        try:
            _cid, pos = decode_response_header(body, response_header_version(api_key, version))
            fut.set_result(SPECS[api_key].response.decode(body[pos:], version))
        except DecodeError as e:
            # A response we cannot parse leaves the stream's state unknown: treat it
            # as a broken connection, which every caller already retries.
            err = KafkaConnectionError(f"node {self.node_id}: undecodable response: {e}")
            fut.set_exception(err)
            self.close(err)

    def _on_lost(self, exc: BaseException | None) -> None:
        """The socket closed (``exc``: why, None for a clean end): fail what still waits."""
        err: BaseException = KafkaConnectionError(f"connection to node {self.node_id} closed by peer")
        if isinstance(exc, ssl.SSLError):
            # With TLS 1.3 a refused client certificate shows up at the first read.
            err = (SslAuthenticationFailed(f"SSL handshake with node {self.node_id} failed: {exc.reason or exc}")
                   if _tls_refused(exc) else KafkaConnectionError(f"connection to node {self.node_id} lost: {exc!r}"))
        elif exc is not None:
            err = KafkaConnectionError(f"connection to node {self.node_id} lost: {exc!r}")
        self.close(err)

    def close(self, error: BaseException | None = None) -> None:
        """Close the socket and fail every request still waiting for a response."""
        if self.closed and not self._pending:
            return
        self.closed = True
        exc = error or KafkaConnectionError(f"connection to node {self.node_id} closed")
        pending, self._pending = self._pending, {}
        held, self._held = self._held or [], None
        futures: list[asyncio.Future | None] = [fut for fut, _k, _v in pending.values()]
        futures += [fut for _r, _k, _v, fut in held]
        for fut in futures:
            if fut is not None and not fut.done():
                fut.set_exception(exc)
                fut.exception()  # mark retrieved: nobody may be waiting any more
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        reauth = self._reauth_task
        if reauth is not None and reauth is not asyncio.current_task() and not reauth.done():
            reauth.cancel()
        if self._transport is not None:
            with contextlib.suppress(Exception):
                self._transport.close()
