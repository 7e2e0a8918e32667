"""The authentication state of one connection: who it is, and what it may send yet.

On a SASL listener a connection may send only ApiVersions and SaslHandshake, then (handshake v1+)
SaslAuthenticate requests, or (handshake v0) raw SASL tokens framed by their size, until the
mechanism's exchange completes; anything else closes it, as Kafka's SaslServerAuthenticator does.
After authentication a SaslHandshake starts KIP-368 re-authentication: the same mechanism and the
same principal, before the session's lifetime (`connections.max.reauth.ms`, or an OAUTHBEARER
token's expiry) runs out; a request after it closes the connection.

The state machine is pure: the connection passes the time in and does the IO.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from shoal.broker.security.principal import ANONYMOUS
from shoal.broker.security.sasl_server import (
    MechanismSettings,
    SaslAuthenticationError,
    SaslServer,
    create_server,
)
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey


class State(Enum):
    HANDSHAKE = "handshake"  # ApiVersions or SaslHandshake expected
    AUTHENTICATE = "authenticate"  # SaslAuthenticate requests until the exchange completes
    RAW = "raw"  # handshake v0: raw tokens until the exchange completes
    DONE = "done"  # authenticated (or a listener without SASL)
    FAILED = "failed"


class AuthenticationFailed(Exception):
    """The exchange failed: answer with ``message`` (SaslAuthenticate) and close the connection."""


class IllegalRequest(Exception):
    """A request the connection may not send in its state: close it (Kafka's IllegalSaslState)."""


@dataclass(frozen=True)
class SaslListener:
    """A SASL listener's mechanisms and what they need."""

    mechanisms: Sequence[str]
    settings: MechanismSettings
    max_reauth_ms: int  # connections.max.reauth.ms; 0: no re-authentication required
    max_receive_size: int  # sasl.server.max.receive.size: the largest frame before authentication


_BEFORE_HANDSHAKE = (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE)


class Authenticator:
    """One connection's authentication. ``principal`` is valid once ``authenticated``."""

    def __init__(self, sasl: SaslListener | None, principal: str = ANONYMOUS) -> None:
        self.sasl = sasl
        self.principal = principal
        self.state = State.DONE if sasl is None else State.HANDSHAKE
        self.mechanism: str | None = None
        self._server: SaslServer | None = None
        self._reauthenticating = False
        self.session_expires_ms: int | None = None  # epoch ms; None: never

    @property
    def authenticated(self) -> bool:
        return self.state is State.DONE and not self._reauthenticating

    @property
    def raw_tokens(self) -> bool:
        """The next frames are raw SASL tokens, not requests (after a v0 handshake)."""
        return self.state is State.RAW

    def max_frame(self, max_request_bytes: int) -> int:
        """The largest frame this connection may send now: small until it is authenticated."""
        if self.sasl is None or self.state is State.DONE:
            return max_request_bytes
        return self.sasl.max_receive_size

    def check(self, api_key: int, now_ms: int) -> None:
        """Raise IllegalRequest if this request may not be sent now."""
        state = self.state
        if state is State.DONE:
            expired = self.session_expires_ms is not None and now_ms >= self.session_expires_ms
            if expired and api_key not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
                raise IllegalRequest("its authenticated session expired before it re-authenticated "
                                     "(connections.max.reauth.ms)")
            return
        if state is State.HANDSHAKE and api_key not in _BEFORE_HANDSHAKE:
            raise IllegalRequest(f"unexpected Kafka request of type {_name(api_key)} during SASL handshake")
        if state is State.AUTHENTICATE and api_key != ApiKey.SASL_AUTHENTICATE:
            raise IllegalRequest(f"unexpected Kafka request of type {_name(api_key)} during SASL authentication")
        if state is State.FAILED:
            raise IllegalRequest("its SASL authentication failed")

    def handshake(self, mechanism: str, version: int) -> tuple[ErrorCode, list[str]]:
        """Answer a SaslHandshake: (error, the enabled mechanisms). Not NONE: close after answering."""
        if self.sasl is None:
            return ErrorCode.ILLEGAL_SASL_STATE, []
        enabled = list(self.sasl.mechanisms)
        if self.state is State.DONE:  # KIP-368: a handshake after authentication re-authenticates
            if version == 0:
                return ErrorCode.ILLEGAL_SASL_STATE, enabled
            self._reauthenticating = True
            if mechanism != self.mechanism:
                self.state = State.FAILED
                return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        elif self.state is not State.HANDSHAKE:
            self.state = State.FAILED
            return ErrorCode.ILLEGAL_SASL_STATE, enabled
        if mechanism not in enabled:
            self.state = State.FAILED
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        self.mechanism = mechanism
        self._server = create_server(mechanism, self.sasl.settings)
        self.state = State.RAW if version == 0 else State.AUTHENTICATE
        return ErrorCode.NONE, enabled

    def authenticate(self, token: bytes, now_ms: int) -> tuple[bytes, int]:
        """One token of the exchange: (the server's answer, the session lifetime in ms once it
        completes, else 0). Raises AuthenticationFailed with the message for the client."""
        server = self._server
        if server is None or self.state not in (State.AUTHENTICATE, State.RAW):
            self.state = State.FAILED
            raise AuthenticationFailed("SaslAuthenticate request received after successful authentication"
                                       if self.sasl is None else "no SASL handshake was made")
        try:
            answer = server.evaluate(token, now_ms)
            if not server.complete:
                return answer, 0
            principal = "User:" + server.authorization_id
            if self._reauthenticating and principal != self.principal:
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from {_dotted(self.principal)}: "
                    f"{_dotted(principal)}")
        except SaslAuthenticationError as e:
            self.state = State.FAILED
            raise AuthenticationFailed(e.client_message(self._reauthenticating)) from e
        except ValueError as e:  # a mechanism's parse error: Kafka's generic message, never the detail
            self.state = State.FAILED
            phase = "re-authentication" if self._reauthenticating else "authentication"
            raise AuthenticationFailed(f"Authentication failed during {phase} due to invalid credentials "
                                       f"with SASL mechanism {self.mechanism}") from e
        self.principal = principal
        self.state = State.DONE
        self._reauthenticating = False
        self._server = None
        lifetime = self._session_lifetime(server.session_expiry_ms(), now_ms)
        self.session_expires_ms = None if lifetime is None else now_ms + lifetime
        return answer, lifetime or 0

    def _session_lifetime(self, credential_expiry_ms: int | None, now_ms: int) -> int | None:
        """As Kafka: the credential's remaining life and connections.max.reauth.ms, whichever is
        shorter; None when neither applies (the session never expires)."""
        assert self.sasl is not None
        max_reauth = self.sasl.max_reauth_ms if self.sasl.max_reauth_ms > 0 else None
        if credential_expiry_ms is None:
            return max_reauth
        remaining = max(0, credential_expiry_ms - now_ms)
        return remaining if max_reauth is None else min(remaining, max_reauth)


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


def _dotted(principal: str) -> str:
    kind, _, name = principal.partition(":")
    return f"{kind}.{name}"
