"""TLS and SASL for the tools' blocking connections (`wire.py`), from a ``--command-config`` file.

The file holds Kafka's client properties, as Kafka's tools read them (``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.truststore.location``...); the client's
`client_security` turns them into a TLS context and a SASL mechanism factory. A connection then
wraps its socket in TLS, sends ApiVersions, and authenticates with SaslHandshake v1 and
SaslAuthenticate, the mechanism's state machine answering the broker's challenges. The tools'
connections live for one command, so they never re-authenticate.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Mapping
from typing import Any

from shoal.client.errors import SaslAuthenticationFailed
from shoal.client.security import ClientSecurity, SecurityConfigError, client_security
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
from shoal.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from shoal.tools.wire import ToolError

__all__ = ["authenticate", "command_config", "security_of", "wrap_tls"]


def command_config(path: str | None) -> dict[str, str]:
    """The properties of a ``--command-config`` file ({} without one)."""
    if not path:
        return {}
    from shoal.broker.config import parse_properties

    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror or e}") from None


def security_of(config: Mapping[str, Any] | None) -> ClientSecurity | None:
    """The security of connections made with ``config`` (None: plain TCP, no SASL)."""
    if not config:
        return None
    try:
        security = client_security(config)
    except SecurityConfigError as e:
        raise ToolError(str(e)) from None
    if not security.uses_tls and not security.uses_sasl:
        return None
    return security


def wrap_tls(sock: socket.socket, security: ClientSecurity, host: str, port: int) -> socket.socket:
    """``sock`` inside a TLS session with the broker (its certificate checked as configured)."""
    assert security.ssl_context is not None
    try:
        return security.ssl_context.wrap_socket(sock, server_hostname=security.server_hostname(host))
    except ssl.SSLCertVerificationError as e:
        sock.close()
        raise ToolError(f"SSL handshake with {host}:{port} failed: {e.verify_message or e}") from None
    except (ssl.SSLError, OSError) as e:
        sock.close()
        raise ToolError(f"SSL handshake with {host}:{port} failed: {e}") from None


def _java_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def authenticate(send: Callable[[Any, int], Any], versions: Mapping[int, tuple[int, int]],
                 security: ClientSecurity, where: str) -> None:
    """SaslHandshake v1 then SaslAuthenticate until the mechanism is done; ToolError on refusal.

    ``send(request, version)`` is the connection's round trip, ``versions`` its ApiVersions."""
    mechanism = security.mechanism or ""
    hs_range, auth_range = versions.get(ApiKey.SASL_HANDSHAKE), versions.get(ApiKey.SASL_AUTHENTICATE)
    if hs_range is None or auth_range is None or hs_range[1] < 1:
        raise ToolError(f"broker {where} does not support SaslHandshake v1 and SaslAuthenticate (Kafka 1.0+)")
    auth_version = min(auth_range[1], 2)
    hs = send(SaslHandshakeRequest(mechanism=mechanism), 1)
    if hs.error_code:
        enabled = _java_list(list(hs.mechanisms))
        if hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            raise ToolError(f"Client SASL mechanism '{mechanism}' not enabled in the server, enabled mechanisms "
                            f"are {enabled}")
        raise ToolError(f"SaslHandshake with {where} failed: error {hs.error_code}, client mechanism is "
                        f"{mechanism}, enabled mechanisms are {enabled}")
    client = security.sasl_client()
    try:
        token = client.evaluate(None)
        while token is not None:
            resp = send(SaslAuthenticateRequest(auth_bytes=token), auth_version)
            if resp.error_code:
                raise ToolError(resp.error_message or f"SASL authentication with {mechanism} failed "
                                f"(error {resp.error_code})")
            token = client.evaluate(bytes(resp.auth_bytes))
    except SaslAuthenticationFailed as e:
        raise ToolError(str(e)) from None
    if not client.complete:
        raise ToolError(f"SASL authentication with {mechanism} did not complete")
