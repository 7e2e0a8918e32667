"""The interface every SASL mechanism server offers, its errors, and the factory the broker calls.

A server is a small state machine fed the client's tokens (the ``auth_bytes`` of SaslAuthenticate
requests, or the raw frames of the pre-KIP-152 handshake) and answering the next challenge. Servers
never read a clock or a socket: the connection passes ``now_ms`` in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from shoal.protocol.errors import CodedError, ErrorCode

if TYPE_CHECKING:
    from shoal.broker.security.oauth_tokens import OAuthSettings
    from shoal.broker.security.scram import ScramCredential

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)


class SaslAuthenticationError(CodedError):
    """Authentication failed; ``str(error)`` is the message Kafka sends the client.

    Kafka distinguishes two kinds of failure (SaslServerAuthenticator.handleSaslToken): a
    SaslAuthenticationException whose own message goes to the client, and a plain SaslException
    whose message is replaced by a generic one so that it cannot leak, for instance, whether a user
    exists. The second kind is built with :meth:`invalid_credentials`; ``reason`` keeps the detail
    for the broker's log, never for the client.
    """

    error_code = ErrorCode.SASL_AUTHENTICATION_FAILED

    def __init__(self, message: str, *, reason: str | None = None, mechanism: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message
        # Set only for the generic kind: the mechanism named in the client-facing message.
        self.mechanism = mechanism

    @classmethod
    def invalid_credentials(cls, mechanism: str, reason: str) -> SaslAuthenticationError:
        """The generic failure Kafka reports for a SaslException, with ``reason`` kept for logs."""
        return cls(_generic_message(mechanism, reauthenticating=False), reason=reason, mechanism=mechanism)

    def client_message(self, reauthenticating: bool = False) -> str:
        """The message for the SaslAuthenticate response; Kafka words the generic one differently
        during KIP-368 re-authentication."""
        if self.mechanism is None:
            return str(self)
        return _generic_message(self.mechanism, reauthenticating)


class IllegalSaslStateError(SaslAuthenticationError):
    """A token arrived when the exchange was already over (Kafka's IllegalSaslStateException)."""

    error_code = ErrorCode.ILLEGAL_SASL_STATE


def _generic_message(mechanism: str, reauthenticating: bool) -> str:
    # SaslServerAuthenticator: "Authentication failed during " + authenticationOrReauthenticationText()
    # + " due to invalid credentials with SASL mechanism " + saslMechanism
    phase = "re-authentication" if reauthenticating else "authentication"
    return f"Authentication failed during {phase} due to invalid credentials with SASL mechanism {mechanism}"


class SaslServer(Protocol):
    """One authentication exchange of one mechanism on one connection."""

    mechanism: str
    complete: bool
    authorization_id: str

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        """Take the client's next token and return the server's answer (possibly empty).

        Raises SaslAuthenticationError when authentication fails; afterwards ``complete`` is True
        once the client is authenticated, and ``authorization_id`` names it.
        """
        ...

    def session_expiry_ms(self) -> int | None:
        """When the credential expires (epoch ms) for KIP-368 re-authentication, or None."""
        ...


def _no_scram_credentials(user: str, mechanism: str) -> ScramCredential | None:
    return None


@dataclass(frozen=True)
class MechanismSettings:
    """What a listener's mechanisms need, filled by the broker from its config.

    ``plain_users`` are the ``user_<name>`` options of the listener's PlainLoginModule JAAS entry;
    ``scram_credential(user, mechanism)`` looks up the credential stored by
    AlterUserScramCredentials; ``oauth`` selects and configures the OAUTHBEARER validator;
    ``scram_nonce`` replaces the random server nonce (tests only).
    """

    plain_users: Mapping[str, str] = field(default_factory=dict)
    scram_credential: Callable[[str, str], ScramCredential | None] = _no_scram_credentials
    oauth: OAuthSettings | None = None
    scram_nonce: Callable[[], str] | None = None


class UnsupportedSaslMechanismError(CodedError):
    """The client asked for a mechanism this factory does not implement."""

    error_code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


def create_server(mechanism: str, settings: MechanismSettings) -> SaslServer:
    """A fresh server for ``mechanism`` (one per authentication or re-authentication).

    Raises UnsupportedSaslMechanismError for a mechanism other than PLAIN, SCRAM-SHA-256,
    SCRAM-SHA-512 and OAUTHBEARER; whether the listener enables it is the broker's check.
    """
    # Imported here: the mechanism modules import this module's errors.
    from shoal.broker.security.oauthbearer import OAuthBearerServer, OAuthSettings
    from shoal.broker.security.plain import PlainServer
    from shoal.broker.security.scram import ScramServer

    if mechanism == PLAIN:
        return PlainServer(settings.plain_users)
    if mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        return ScramServer(mechanism, settings.scram_credential, nonce=settings.scram_nonce)
    if mechanism == OAUTHBEARER:
        return OAuthBearerServer(settings.oauth if settings.oauth is not None else OAuthSettings())
    raise UnsupportedSaslMechanismError(f"Unsupported SASL mechanism {mechanism}")
