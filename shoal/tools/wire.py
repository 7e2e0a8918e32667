"""A tiny synchronous Kafka protocol client for the command-line tools.

The tools talk to brokers over the wire, as Kafka's own tools do, so they work
against any Kafka-compatible cluster. This module is deliberately small: one
blocking socket per broker, one request in flight at a time, ApiVersions
negotiation (highest version both sides know), bootstrap, Metadata and
FindCoordinator routing. It uses only the generated codecs and the framing
helpers of `shoal.protocol`, and the client's bootstrap parser. With a
``--command-config`` file naming TLS and/or SASL, connections are secured by
`secure_wire.py` with the client's security settings.
"""

from __future__ import annotations

import socket
import struct
from typing import TYPE_CHECKING, Any

from shoal.client.config import parse_bootstrap
from shoal.protocol.errors import ErrorCode
from shoal.protocol.framing import (
    decode_response_header,
    encode_request,
    response_header_version,
)
from shoal.protocol.generated import api_spec
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.api_versions_request import ApiVersionsRequest
from shoal.protocol.generated.api_versions_response import ApiVersionsResponse
from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from shoal.protocol.generated.metadata_request import MetadataRequest

if TYPE_CHECKING:
    from collections.abc import Mapping

    from shoal.client.security import ClientSecurity

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "BrokerConnection",
    "ToolClient",
    "ToolError",
    "check_error",
    "error_name",
    "parse_bootstrap",
    "pick_version",
]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CLIENT_ID = "shoal-tools"
_I32 = struct.Struct(">i")
_API_VERSIONS_PROBE = 3  # the version every modern broker answers; v0 is the fallback


class ToolError(Exception):
    """A failure to report to the user as one line (no traceback)."""


def error_name(code: int) -> str:
    """Kafka's name of an error code (``UNKNOWN_TOPIC_OR_PARTITION``), or the number."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def check_error(code: int, what: str, message: str | None = None) -> None:
    """ToolError for a non-zero error code: the broker's ``message``, else ``what: ERROR_NAME``."""
    if code:
        raise ToolError(message or f"{what}: {error_name(code)}")


def _bootstrap_servers(spec: str) -> list[tuple[str, int]]:
    """The client's ``parse_bootstrap`` of ``spec``, its complaints (and an empty spec) as ToolError."""
    try:
        servers = parse_bootstrap(spec)
    except ValueError as e:
        raise ToolError(str(e)) from None
    if not servers:
        raise ToolError("no bootstrap server given")
    return servers


def pick_version(broker_range: tuple[int, int] | None, tool_range: tuple[int, int],
                 cap: int | None = None) -> int | None:
    """The highest version in both ranges (and <= ``cap``); None when there is none."""
    if broker_range is None:
        return None
    hi = min(broker_range[1], tool_range[1], tool_range[1] if cap is None else cap)
    lo = max(broker_range[0], tool_range[0])
    return hi if hi >= lo else None


class BrokerConnection:
    """One blocking connection to one broker, with negotiated API versions."""

    def __init__(self, host: str, port: int, *, timeout: float = 10.0, client_id: str = CLIENT_ID,
                 security: ClientSecurity | None = None) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._correlation = 0
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise ToolError(f"cannot connect to broker {host}:{port}: {e.strerror or e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if security is not None and security.uses_tls:
            from shoal.tools.secure_wire import wrap_tls

            sock = wrap_tls(sock, security, host, port)
        self._sock = sock
        self.api_versions: dict[int, tuple[int, int]] = {}
        try:
            self._negotiate()
            if security is not None and security.uses_sasl:
                from shoal.tools.secure_wire import authenticate

                authenticate(self.send, self.api_versions, security, f"{host}:{port}")
        except ToolError:
            self.close()
            raise

    # -- framing ---------------------------------------------------------

    def _recv_exact(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            try:
                chunk = self._sock.recv(n - len(chunks))
            except TimeoutError:
                raise ToolError(f"broker {self.host}:{self.port} did not answer in time") from None
            except OSError as e:
                raise ToolError(f"connection to {self.host}:{self.port} failed: {e}") from None
            if not chunk:
                raise ToolError(f"broker {self.host}:{self.port} closed the connection")
            chunks += chunk
        return bytes(chunks)

    def _roundtrip(self, api_key: int, version: int, body: bytes) -> memoryview:
        self._correlation += 1
        corr = self._correlation
        frame = encode_request(api_key, version, corr, self.client_id, body)
        try:
            self._sock.sendall(frame)
        except OSError as e:
            raise ToolError(f"cannot send to {self.host}:{self.port}: {e}") from None
        (size,) = _I32.unpack(self._recv_exact(4))
        buf = memoryview(self._recv_exact(size))
        got, pos = decode_response_header(buf, response_header_version(api_key, version))
        if got != corr:
            raise ToolError(f"broker {self.host}:{self.port} answered correlation id {got}, expected {corr}")
        return buf[pos:]

    # -- ApiVersions -----------------------------------------------------

    def _negotiate(self) -> None:
        probe = ApiVersionsRequest(client_software_name="shoal-tools", client_software_version="0")
        body = self._roundtrip(ApiKey.API_VERSIONS, _API_VERSIONS_PROBE, probe.encode(_API_VERSIONS_PROBE))
        try:
            resp = ApiVersionsResponse.decode(body, _API_VERSIONS_PROBE)
        except ValueError:
            resp = None
        if resp is None or resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
            # An older broker answers in v0 and lists what it knows; retry at v0.
            body = self._roundtrip(ApiKey.API_VERSIONS, 0, ApiVersionsRequest().encode(0))
            resp = ApiVersionsResponse.decode(body, 0)
        check_error(resp.error_code, f"ApiVersions failed on {self.host}:{self.port}")
        self.api_versions = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}

    def version(self, api_key: int, max_version: int | None = None) -> int:
        """The highest version of ``api_key`` both sides know (capped at ``max_version``)."""
        spec = api_spec(api_key)
        theirs = self.api_versions.get(api_key)
        if theirs is None:
            raise ToolError(f"broker {self.host}:{self.port} does not support {spec.name}")
        v = pick_version(theirs, (spec.min_version, spec.max_version), max_version)
        if v is None:
            raise ToolError(f"no common {spec.name} version with broker {self.host}:{self.port} "
                            f"(broker {theirs[0]}-{theirs[1]}, tool {spec.min_version}-{spec.max_version})")
        return v

    def send(self, request: Any, version: int | None = None) -> Any:
        """Send ``request`` (a generated request object) and return the decoded response.

        ``version`` defaults to the negotiated one; pass ``self.version(...)``
        first when the request's fields depend on it.
        """
        api_key = request.API_KEY
        v = self.version(api_key) if version is None else version
        body = self._roundtrip(api_key, v, request.encode(v))
        try:
            return api_spec(api_key).response.decode(body, v)
        except ValueError as e:
            raise ToolError(f"cannot decode {api_spec(api_key).name} v{v} response: {e}") from None

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


class ToolClient:
    """Connections to a cluster: bootstrap, Metadata, per-node connections, coordinators."""

    def __init__(self, bootstrap: str = DEFAULT_BOOTSTRAP, *, timeout: float = 10.0,
                 config: Mapping[str, Any] | None = None) -> None:
        """``config``: Kafka client properties (a ``--command-config`` file): security.protocol, ssl.*, sasl.*."""
        self.timeout = timeout
        from shoal.tools.secure_wire import security_of

        self.security = security_of(config)
        self._bootstrap = _bootstrap_servers(bootstrap)
        self._by_node: dict[int, BrokerConnection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.last_coordinator = -1  # node id of the last coordinator found
        self._any = self._connect_bootstrap()

    def _connect_bootstrap(self) -> BrokerConnection:
        errors = []
        for host, port in self._bootstrap:
            try:
                return BrokerConnection(host, port, timeout=self.timeout, security=self.security)
            except ToolError as e:
                errors.append(str(e))
        raise ToolError("; ".join(errors) if len(errors) > 1 else errors[0])

    def __enter__(self) -> ToolClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def metadata(self, topics: list[str] | None = None) -> Any:
        """A Metadata response for ``topics`` (None: all topics); refreshes ``brokers``."""
        conn = self._any
        v = conn.version(ApiKey.METADATA)
        if topics is None:
            req_topics = None if v >= 1 else []
        else:
            req_topics = [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        resp = conn.send(MetadataRequest(topics=req_topics, allow_auto_topic_creation=False), v)
        self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        return resp

    def node(self, node_id: int) -> BrokerConnection:
        """The connection to broker ``node_id`` (opened on first use)."""
        conn = self._by_node.get(node_id)
        if conn is not None:
            return conn
        if node_id not in self.brokers:
            self.metadata([])
        addr = self.brokers.get(node_id)
        if addr is None:
            raise ToolError(f"broker {node_id} is not in the cluster metadata")
        if (self._any.host, self._any.port) == addr:
            conn = self._any
        else:
            conn = BrokerConnection(*addr, timeout=self.timeout, security=self.security)
        self._by_node[node_id] = conn
        return conn

    def all_nodes(self) -> list[int]:
        """Every broker id of the cluster (from Metadata)."""
        self.metadata([])
        return sorted(self.brokers)

    def find_coordinator(self, key: str, key_type: int = 0) -> BrokerConnection:
        """The connection to the coordinator of a group (key type 0) or a transactional id (1)."""
        conn = self._any
        v = conn.version(ApiKey.FIND_COORDINATOR)
        if v >= 4:
            resp = conn.send(FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), v)
            c = resp.coordinators[0]
            code, node_id, host, port, msg = c.error_code, c.node_id, c.host, c.port, c.error_message
        else:
            resp = conn.send(FindCoordinatorRequest(key=key, key_type=key_type), v)
            code, node_id, host, port = resp.error_code, resp.node_id, resp.host, resp.port
            msg = resp.error_message if v >= 1 else None
        if code != ErrorCode.NONE:
            detail = f" ({msg})" if msg else ""
            what = "group" if key_type == 0 else "transactional id"
            raise ToolError(f"cannot find the coordinator of {what} {key!r}: {error_name(code)}{detail}")
        self.brokers.setdefault(node_id, (host, port))
        self.last_coordinator = node_id
        return self.node(node_id)

    def close(self) -> None:
        seen = set()
        for conn in [self._any, *self._by_node.values()]:
            if id(conn) not in seen:
                seen.add(id(conn))
                conn.close()
