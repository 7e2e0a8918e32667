"""SASL mechanisms on the client side: small state machines without IO, fed the broker's challenges
(the ``auth_bytes`` of SaslAuthenticate responses) by the connection.

* PLAIN: ``authzid NUL user NUL password`` (RFC 4616).
* SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677): the client proves it knows the password and
  checks that the broker does too (the server signature); a wrong signature fails authentication.
* OAUTHBEARER (RFC 7628): the initial response carries a bearer token, either an unsecured JWS made
  from ``unsecuredLogin*`` options as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes it, or a
  token read from the ``file:`` URL of ``sasl.oauthbearer.token.endpoint.url``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from shoal.broker.security.jwt import b64url_encode

from .errors import SaslAuthenticationFailed

PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER, GSSAPI = (
    "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
SASL_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)
UNSECURED = "unsecuredLogin"  # the prefix of the unsecured token's JAAS options


class SecurityConfigError(ValueError):
    """A security setting the client cannot use (Kafka's ConfigException at client construction)."""


class SaslMechanismClient(Protocol):
    """One authentication exchange of one mechanism, on the client side."""

    mechanism: str
    complete: bool

    def evaluate(self, challenge: bytes | None) -> bytes | None:
        """The next token for the broker: ``challenge`` None asks for the initial response. None
        means there is nothing more to send (the exchange is over on this side). Raises
        SaslAuthenticationFailed when the broker's answer proves it is not who it should be."""


class PlainClient:
    """SASL/PLAIN (RFC 4616): one message, the broker answers with nothing."""

    mechanism = PLAIN

    def __init__(self, username: str, password: str, authorization_id: str = "") -> None:
        self._message = f"{authorization_id}\0{username}\0{password}".encode()
        self.complete = False
        self._sent = False

    def evaluate(self, challenge: bytes | None) -> bytes | None:
        if not self._sent:
            self._sent = True
            return self._message
        self.complete = True
        return None


def _scram_escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def scram_salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC over the password's UTF-8 bytes (Kafka
    applies no SASLprep)."""
    return hashlib.pbkdf2_hmac(_SCRAM_HASHES[mechanism], password.encode("utf-8"), salt, iterations)


_SCRAM_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
_SERVER_FIRST = re.compile(r"(?:m=[^,]*,)?r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+),s=(?P<salt>[A-Za-z0-9+/=]+),"
                           r"i=(?P<iterations>[0-9]+)(?:,[A-Za-z]+=[^,]*)*")
_SERVER_FINAL = re.compile(r"(?:e=(?P<error>[^,]*)|v=(?P<signature>[A-Za-z0-9+/=]+))(?:,[A-Za-z]+=[^,]*)*")
_MIN_ITERATIONS = 4096  # Kafka's ScramSaslClient refuses fewer


class ScramClient:
    """SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802): client-first, client-final, then the server's
    signature is checked. ``nonce`` replaces the random client nonce (tests only)."""

    def __init__(self, mechanism: str, username: str, password: str, *,
                 extensions: Mapping[str, str] | None = None, nonce: str | None = None) -> None:
        if mechanism not in _SCRAM_HASHES:
            raise ValueError(f"Not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._digest = _SCRAM_HASHES[mechanism]
        self._username = username
        self._password = password
        self._extensions = dict(extensions or {})
        # A printable nonce without ","; Kafka's is a random number in base 36.
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._state = "first"
        self._client_first_bare = ""
        self._auth_message = b""
        self._server_key = b""
        self.complete = False

    def _fail(self, message: str) -> SaslAuthenticationFailed:
        self._state = "failed"
        return SaslAuthenticationFailed(message)

    def evaluate(self, challenge: bytes | None) -> bytes | None:
        if self._state == "first":
            extensions = "".join(f",{k}={v}" for k, v in self._extensions.items())
            self._client_first_bare = f"n={_scram_escape(self._username)},r={self._nonce}{extensions}"
            self._state = "final"
            return ("n,," + self._client_first_bare).encode("utf-8")
        if challenge is None:
            raise self._fail(f"{self.mechanism}: the broker sent no challenge")
        if self._state == "final":
            return self._client_final(challenge)
        if self._state == "verify":
            self._verify(challenge)
            return None
        raise self._fail(f"{self.mechanism}: unexpected challenge in state {self._state}")

    def _client_final(self, challenge: bytes) -> bytes:
        text = challenge.decode("utf-8", errors="replace")
        match = _SERVER_FIRST.fullmatch(text)
        if match is None:
            raise self._fail(f"Invalid SCRAM server first message format: {text}")
        nonce = match["nonce"]
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise self._fail("Invalid server nonce: does not start with client nonce")
        iterations = int(match["iterations"])
        if iterations < _MIN_ITERATIONS:
            raise self._fail(f"Requested iterations {iterations} is less than the minimum "
                             f"{_MIN_ITERATIONS} for {self.mechanism}")
        try:
            salt = base64.b64decode(match["salt"], validate=True)
        except ValueError:
            raise self._fail(f"Invalid SCRAM server first message format: {text}") from None
        salted = scram_salted_password(self.mechanism, self._password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"  # biws: base64 of the gs2 header "n,,"
        self._auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._digest)
        stored_key = hashlib.new(self._digest, client_key).digest()
        signature = hmac.digest(stored_key, self._auth_message, self._digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_key = hmac.digest(salted, b"Server Key", self._digest)
        self._state = "verify"
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode("ascii")

    def _verify(self, challenge: bytes) -> None:
        text = challenge.decode("utf-8", errors="replace")
        match = _SERVER_FINAL.fullmatch(text)
        if match is None:
            raise self._fail(f"Invalid SCRAM server final message format: {text}")
        if match["error"] is not None:
            raise self._fail(f"Sasl authentication using {self.mechanism} failed with error: {match['error']}")
        expected = hmac.digest(self._server_key, self._auth_message, self._digest)
        try:
            signature = base64.b64decode(match["signature"], validate=True)
        except ValueError:
            signature = b""
        if not hmac.compare_digest(signature, expected):
            raise self._fail("Invalid server signature in server final message")
        self._state = "complete"
        self.complete = True


_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7e \t\r\n]+")


def validate_extensions(extensions: Mapping[str, str]) -> None:
    """RFC 7628 extension names and values, as Kafka's OAuthBearerClientInitialResponse checks them."""
    if "auth" in extensions:
        raise SecurityConfigError("Extension name auth is invalid")
    for name, value in extensions.items():
        if not _EXTENSION_KEY.fullmatch(name):
            raise SecurityConfigError(f"Extension name {name} is invalid")
        if not _EXTENSION_VALUE.fullmatch(value):
            raise SecurityConfigError(f"Extension value ({value}) for extension {name} is invalid")


class OAuthBearerClient:
    """SASL/OAUTHBEARER (RFC 7628): the token in the initial response. A broker that rejects it
    answers with a JSON error, which the client acknowledges with 0x01; the broker then fails the
    exchange with that error as the message."""

    mechanism = OAUTHBEARER

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None,
                 authorization_id: str = "") -> None:
        self._token = token
        self._extensions = dict(extensions or {})
        self._authzid = authorization_id
        self._state = "initial"
        self.complete = False
        self.server_error: str | None = None

    def evaluate(self, challenge: bytes | None) -> bytes | None:
        if self._state == "initial":
            self._state = "sent"
            return initial_response(self._token, self._extensions, self._authzid)
        if self._state == "sent" and challenge:
            # The broker's error; the next SaslAuthenticate fails with it as the message.
            self.server_error = challenge.decode("utf-8", errors="replace")
            self._state = "acknowledged"
            return b"\x01"
        if self._state == "sent":
            self._state = "complete"
            self.complete = True
            return None
        raise SaslAuthenticationFailed(self.server_error or "OAUTHBEARER: unexpected challenge")


def initial_response(token: str, extensions: Mapping[str, str] | None = None, authorization_id: str = "") -> bytes:
    """RFC 7628's client initial response: gs2 header, ``auth=Bearer <token>``, extensions."""
    authzid = f"a={_scram_escape(authorization_id)}" if authorization_id else ""
    ext = "".join(f"\x01{k}={v}" for k, v in (extensions or {}).items())
    return f"n,{authzid},\x01auth=Bearer {token}{ext}\x01\x01".encode()


# -- OAUTHBEARER tokens --------------------------------------------------------------------


def _json_string(text: str) -> str:
    # Kafka escapes only '"' and '\' in these claims; json.dumps escapes those and control characters.
    return json.dumps(text, ensure_ascii=False)


def _list_claim(value: str) -> list[str]:
    """An ``unsecuredLoginListClaim_`` value: the first character is the separator of the rest
    (an empty element at either end or between two separators is kept once, as an empty string)."""
    if len(value) <= 1:
        return []
    sep, rest = value[0], value[1:]
    items = [item for item in rest.split(sep) if item]
    if rest.startswith(sep) or rest.endswith(sep) or sep + sep in rest:
        items.append("")
    return items


def unsecured_token(options: Mapping[str, str], now_ms: int | None = None) -> str:
    """An unsigned JWS (``alg`` none) built from the ``unsecuredLogin*`` options of an
    OAuthBearerLoginModule entry, as Kafka's OAuthBearerUnsecuredLoginCallbackHandler builds it:
    ``exp`` (now plus ``unsecuredLoginLifetimeSeconds``, default 3600) and ``iat`` (now) in
    seconds, then each ``unsecuredLoginStringClaim_<name>``, ``unsecuredLoginNumberClaim_<name>``
    and ``unsecuredLoginListClaim_<name>``. SecurityConfigError for options Kafka refuses."""
    # Whole milliseconds, as Java's clock gives them: a finer iat could be "after" the broker's now.
    now = (int(time.time() * 1000) if now_ms is None else int(now_ms)) / 1000.0
    if options and all(k.startswith(UNSECURED + "Extension_") for k in options):
        raise SecurityConfigError("Extensions provided in login context without a token")
    lifetime_text = options.get(UNSECURED + "LifetimeSeconds", "3600")
    try:
        lifetime = int(lifetime_text)
    except ValueError:
        raise SecurityConfigError(f'For input string: "{lifetime_text}"') from None
    principal_claim = (options.get(UNSECURED + "PrincipalClaimName") or "").strip() or "sub"
    parts = [f'"exp":{json.dumps(now + lifetime)}', f'"iat":{json.dumps(now)}']
    claims: dict[str, Any] = {}
    for key, value in options.items():
        for prefix in ("StringClaim_", "NumberClaim_", "ListClaim_"):
            full = UNSECURED + prefix
            if not key.startswith(full) or len(key) == len(full):
                continue
            name = key[len(full):]
            if name in ("iat", "exp"):
                raise SecurityConfigError(f"Cannot explicitly set the '{name}' claim")
            if prefix == "StringClaim_":
                claims[name] = value
                parts.append(f"{_json_string(name)}:{_json_string(value)}")
            elif prefix == "NumberClaim_":
                try:
                    number = float(value)
                except ValueError:
                    raise SecurityConfigError(f'For input string: "{value}"') from None
                claims[name] = number
                parts.append(f"{_json_string(name)}:{json.dumps(number)}")
            else:
                items = _list_claim(value)
                claims[name] = items
                parts.append(f"{_json_string(name)}:[{','.join(_json_string(i) for i in items)}]")
    principal = claims.get(principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise SecurityConfigError(f"No principal name in JWT claim: {principal_claim}")
    header = b64url_encode(b'{"alg":"none"}')
    body = b64url_encode(("{" + ",".join(parts) + "}").encode("utf-8"))
    return f"{header}.{body}."


def token_from_file_url(url: str) -> str:
    """The token a ``file:`` URL points at (Kafka's token endpoint may be a file), whitespace trimmed."""
    parsed = urlparse(url)
    if parsed.scheme.lower() != "file":
        raise SecurityConfigError(
            f"sasl.oauthbearer.token.endpoint.url {url}: shoal's client reads a token from a file: URL "
            "only; it does not request tokens from an OAuth/OIDC provider")
    path = unquote(parsed.path)
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as e:
        raise SecurityConfigError(f"sasl.oauthbearer.token.endpoint.url: cannot read the token file "
                                  f"{path}: {e}") from None
    if not token:
        raise SecurityConfigError(f"sasl.oauthbearer.token.endpoint.url: the token file {path} is empty")
    return token
