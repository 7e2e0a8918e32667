"""One asyncio connection to one broker: framing, correlation ids, pipelining, ApiVersions."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from typing import Any

from shoal.protocol.errors import DecodeError
from shoal.protocol.framing import encode_request, response_header_version
from shoal.protocol.generated.api_keys import ApiKey

from .errors import KafkaConnectionError, KafkaTimeoutError
from .protocol import CLIENT_MAX_VERSIONS, SPECS, VERSION_RANGES, api_key_of

log = logging.getLogger(__name__)


def _skip_tagged_fields(buf: memoryview, pos: int) -> int:
    def uvarint(p: int) -> tuple[int, int]:
        shift = value = 0
        while True:
            b = buf[p]
            p += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value, p
            shift += 7

    count, pos = uvarint(pos)
    for _ in range(count):
        _tag, pos = uvarint(pos)
        size, pos = uvarint(pos)
        pos += size
    return pos


class BrokerConnection:
    """A pipelined request/response channel to one broker.

    Many requests may be in flight; responses come back in order and are matched by
    correlation id.  ``versions`` holds, after ``connect``, the version of each API to
    use: the highest one both the broker and this client support.
    """

    def __init__(self, host: str, port: int, node_id: int, config: dict[str, Any]) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self._config = config
        self._client_id: str = config.get("client.id") or ""
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._correlation = 0
        self._read_task: asyncio.Task | None = None
        self.versions: dict[int, int] = {}
        # Per-client caps ({api_key: max_version}) for brokers that advertise more than they parse.
        self._caps: dict[int, int] = dict(config.get("api.version.caps") or {})
        self.broker_ranges: dict[int, tuple[int, int]] = {}
        self.closed = False
        self.connected = False

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}>"

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def connect(self) -> None:
        """Open the socket and negotiate API versions."""
        timeout = self._config["socket.connection.setup.timeout.ms"] / 1000
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), timeout
            )
        except (TimeoutError, OSError) as e:
            self.closed = True
            raise KafkaConnectionError(f"connect to {self.host}:{self.port} failed: {e!r}") from e
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
        await self._negotiate()
        self.connected = True

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
            if mine is None:
                continue
            lo, hi = mine
            top = min(k.max_version, hi, CLIENT_MAX_VERSIONS.get(k.api_key, hi), self._caps.get(k.api_key, hi))
            if top >= max(k.min_version, lo):
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
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            # A lost response means the stream is out of step: drop the connection.
            self.close(KafkaTimeoutError(f"request {type(request).__name__} to node {self.node_id} timed out"))
            raise KafkaTimeoutError(
                f"request {type(request).__name__} to node {self.node_id} timed out after {timeout}s"
            ) from None

    def send_nowait(
        self, request: Any, *, version: int | None = None, expect_response: bool = True
    ) -> asyncio.Future | None:
        """Write ``request`` now; return the future of its response."""
        if self.closed or self._writer is None:
            raise KafkaConnectionError(f"connection to node {self.node_id} is closed")
        api_key = api_key_of(request)
        if version is None:
            version = self.version_for(api_key)
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        cid = self._correlation
        frame = encode_request(api_key, version, cid, self._client_id, request.encode(version))
        fut: asyncio.Future | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
            self._pending[cid] = (fut, api_key, version)
        self._writer.write(frame)
        return fut

    async def drain(self) -> None:
        if self._writer is not None:
            await self._writer.drain()

    async def _read_loop(self) -> None:
        assert self._reader is not None
        err: BaseException = KafkaConnectionError(f"connection to node {self.node_id} closed by peer")
        try:
            while True:
                head = await self._reader.readexactly(4)
                (size,) = struct.unpack(">i", head)
                body = await self._reader.readexactly(size)
                (cid,) = struct.unpack_from(">i", body, 0)
                entry = self._pending.pop(cid, None)
                if entry is None:
                    log.warning("node %s: response with unknown correlation id %s", self.node_id, cid)
                    continue
                fut, api_key, version = entry
                if fut.done():
                    continue
                try:
                    mv = memoryview(body)
                    pos = 4
                    if response_header_version(api_key, version) >= 1:
                        pos = _skip_tagged_fields(mv, pos)
                    fut.set_result(SPECS[api_key].response.decode(mv[pos:], version))
                except DecodeError as e:
                    # A response we cannot parse leaves the stream's state unknown: treat it
                    # as a broken connection, which every caller already retries.
                    err = KafkaConnectionError(f"node {self.node_id}: undecodable response: {e}")
                    fut.set_exception(err)
                    break
        except (asyncio.IncompleteReadError, OSError) as e:
            err = KafkaConnectionError(f"connection to node {self.node_id} lost: {e!r}")
        except asyncio.CancelledError:
            err = KafkaConnectionError(f"connection to node {self.node_id} closed")
        self.close(err)

    def close(self, error: BaseException | None = None) -> None:
        """Close the socket and fail every request still waiting for a response."""
        if self.closed and not self._pending:
            return
        self.closed = True
        self.connected = False
        exc = error or KafkaConnectionError(f"connection to node {self.node_id} closed")
        pending, self._pending = self._pending, {}
        for fut, _k, _v in pending.values():
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # mark retrieved: nobody may be waiting any more
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        task = self._read_task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
