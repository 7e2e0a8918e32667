"""SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer, with Kafka's two token validators.

Without a JWK set the token is checked as Kafka's default, OAuthBearerUnsecuredValidatorCallbackHandler
does: an unsigned JWS (``alg`` "none") whose claims are trusted. With a JWK set (Kafka's
``sasl.oauthbearer.jwks.endpoint.url`` pointing at a ``file:`` URL) it is checked as
OAuthBearerValidatorCallbackHandler does: signature, ``exp``/``iat``/``nbf`` with clock skew,
audience and issuer. The validators live in ``oauth_tokens``.

A rejected token is not an immediate failure: as RFC 7628 prescribes, the server first answers with a
JSON error (``{"status":"invalid_token"}``), the client acknowledges with a single 0x01 byte, and only
then does the exchange fail, with that JSON as the message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from shoal.broker.security.oauth_tokens import (
    OAuthConfigError,
    OAuthSettings,
    TokenRejected,
    ValidatedToken,
    read_jwks_file_url,
    validate_token,
)
from shoal.broker.security.sasl_server import OAUTHBEARER, IllegalSaslStateError, SaslAuthenticationError

# Re-exported: the broker builds the settings from here.
__all__ = [
    "InitialResponse",
    "OAuthBearerServer",
    "OAuthConfigError",
    "OAuthSettings",
    "parse_initial_response",
    "read_jwks_file_url",
]

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*"
_INITIAL_RESPONSE = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01")
_AUTH = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


@dataclass(frozen=True)
class InitialResponse:
    """The parsed client initial response of RFC 7628 (gs2 header, auth, extensions)."""

    token: str
    authorization_id: str
    extensions: dict[str, str] = field(default_factory=dict)


def parse_initial_response(message: bytes) -> InitialResponse:
    """Kafka's OAuthBearerClientInitialResponse; ValueError (with Kafka's text) if malformed."""
    text = message.decode("utf-8", errors="replace")
    match = _INITIAL_RESPONSE.fullmatch(text)
    if match is None:
        raise ValueError("Invalid OAUTHBEARER client first message")
    pairs = dict(item.split("=", 1) for item in match["kvpairs"].split("\x01") if item)
    auth = pairs.pop("auth", None)
    if auth is None:
        raise ValueError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise ValueError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match["scheme"].lower() != "bearer":
        raise ValueError(f"Invalid scheme in OAUTHBEARER client first message: {auth_match['scheme']}")
    return InitialResponse(auth_match["token"], match["authzid"] or "", pairs)


def _json_error(rejected: TokenRejected) -> str:
    # Byte for byte OAuthBearerSaslServer.jsonErrorResponse, spacing included.
    text = f'{{"status":"{rejected.status}"'
    if rejected.scope is not None:
        text += f', "scope":"{rejected.scope}"'
    return text + "}"


class OAuthBearerServer:
    """One OAUTHBEARER exchange."""

    mechanism = OAUTHBEARER

    def __init__(self, settings: OAuthSettings) -> None:
        self._settings = settings
        self._error: str | None = None
        self._token: ValidatedToken | None = None
        self.complete = False
        self.authorization_id = ""
        self.extensions: dict[str, str] = {}
        self.rejection_reason: str | None = None  # why the last token was refused, for the broker's log

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        """Validate the client's token: empty answer on success, a JSON error challenge on a bad
        token, and failure when the client acknowledges that error with 0x01."""
        if self.complete:
            raise IllegalSaslStateError("Unexpected challenge in Sasl server state COMPLETE")
        if token == b"\x01" and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None
        try:
            response = parse_initial_response(token)
        except ValueError as e:
            raise SaslAuthenticationError.invalid_credentials(OAUTHBEARER, str(e)) from None
        try:
            validated = validate_token(response.token, self._settings, now_ms)
        except TokenRejected as rejected:
            self.rejection_reason = rejected.reason
            self._error = _json_error(rejected)
            return self._error.encode("utf-8")
        if response.authorization_id and response.authorization_id != validated.principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({response.authorization_id}) "
                f"that is different from the token's principal name ({validated.principal})"
            )
        # Both of Kafka's validators accept every extension.
        self.extensions = response.extensions
        self._token = validated
        self.authorization_id = validated.principal
        self.complete = True
        return b""

    def session_expiry_ms(self) -> int | None:
        """The token's expiry (epoch ms), which bounds the session (KIP-368)."""
        return self._token.expiry_ms if self._token is not None else None
