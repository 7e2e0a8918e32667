"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer.

The exchange is client-first, server-first, client-final, server-final. Message syntax follows the
regular expressions of Kafka's ScramMessages (ASCII-only names, ``n`` gs2 header only, extensions
allowed), and failures follow ScramSaslServer: almost every failure is a SaslException there, so the
client gets only the generic "invalid credentials" message; only an authorization id different
from the user name is reported in words.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from shoal.broker.security.sasl_server import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    IllegalSaslStateError,
    SaslAuthenticationError,
)

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
# The mechanism codes of AlterUserScramCredentials / DescribeUserScramCredentials (ScramMechanism.type).
MECHANISM_TYPES = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
MECHANISMS_BY_TYPE = {code: name for name, code in MECHANISM_TYPES.items()}
_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
TOKEN_AUTH_EXTENSION = "tokenauth"

# Character classes of ScramMessages, spelled for Python's re (Java's "&&[^...]" intersections
# written out): SASLNAME excludes "=" and "," except the =2C / =3D escapes.
_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]"
_SASLNAME = rf"(?:{_SAFE}|=2C|=3D)+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_B64CHAR = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64CHAR}{{4}})*(?:{_B64CHAR}{{3}}=|{_B64CHAR}{{2}}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>(?:m={_VALUE},)?"
    rf"n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})"
)


@dataclass(frozen=True)
class ScramCredential:
    """What the broker stores for a SCRAM user: never the password, only the derived keys."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salted_password: bytes, salt: bytes, iterations: int
    ) -> ScramCredential:
        """The credential for a salted password, as AlterUserScramCredentials carries it."""
        digest = _hash_name(mechanism)
        client_key = hmac.digest(salted_password, b"Client Key", digest)
        return cls(
            salt=salt,
            stored_key=hashlib.new(digest, client_key).digest(),
            server_key=hmac.digest(salted_password, b"Server Key", digest),
            iterations=iterations,
        )

    @classmethod
    def from_password(cls, mechanism: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
        """The credential for a clear password (Kafka does no SASLprep: the UTF-8 bytes are hashed)."""
        return cls.from_salted_password(
            mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations
        )


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode("utf-8"), salt, iterations)


def _hash_name(mechanism: str) -> str:
    try:
        return _HASHES[mechanism]
    except KeyError:
        raise ValueError(f"Not a SCRAM mechanism: {mechanism}") from None


def sasl_name(username: str) -> str:
    """A user name as it travels in SCRAM messages: "=" as =3D and "," as =2C."""
    return username.replace("=", "=3D").replace(",", "=2C")


def username_from_sasl_name(name: str) -> str:
    """The inverse of :func:`sasl_name`; ValueError for any other "=" escape (ScramFormatter.username)."""
    unescaped_commas = name.replace("=2C", ",")
    if "=" in unescaped_commas.replace("=3D", ""):
        raise ValueError(f"Invalid username: {name}")
    return unescaped_commas.replace("=3D", "=")


def _b64decode(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def _random_nonce() -> str:
    # Kafka sends a 130-bit random number in base 36; any printable string will do.
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class _ClientFirst:
    gs2_header: str
    bare: str
    authorization_id: str
    username: str
    nonce: str
    extensions: dict[str, str]


class ScramServer:
    """One SCRAM exchange for SCRAM-SHA-256 or SCRAM-SHA-512.

    ``credentials(user, mechanism)`` returns the stored credential or None; ``nonce`` replaces the
    random server nonce (tests drive RFC 7677's example with it).
    """

    def __init__(
        self,
        mechanism: str,
        credentials: Callable[[str, str], ScramCredential | None],
        nonce: Callable[[], str] | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._digest = _hash_name(mechanism)
        self._credentials = credentials
        self._nonce = nonce or _random_nonce
        self._state = "RECEIVE_CLIENT_FIRST_MESSAGE"
        self._client_first: _ClientFirst | None = None
        self._server_first = ""
        self._combined_nonce = ""
        self._credential: ScramCredential | None = None
        self.complete = False
        self.authorization_id = ""
        self.extensions: dict[str, str] = {}

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        """Answer the client-first message with server-first, client-final with server-final."""
        try:
            if self._state == "RECEIVE_CLIENT_FIRST_MESSAGE":
                return self._on_client_first(token)
            if self._state == "RECEIVE_CLIENT_FINAL_MESSAGE":
                return self._on_client_final(token)
            raise IllegalSaslStateError(f"Unexpected challenge in Sasl server state {self._state}")
        except SaslAuthenticationError:
            # Like ScramSaslServer: any failure ends the exchange and forgets the credential.
            self._fail()
            raise

    def _fail(self) -> None:
        if self._state != "COMPLETE":
            self._state = "FAILED"
        self._credential = None
        self._client_first = None

    def _invalid(self, reason: str) -> SaslAuthenticationError:
        return SaslAuthenticationError.invalid_credentials(self.mechanism, reason)

    def _parse_client_first(self, token: bytes) -> _ClientFirst:
        message = token.decode("utf-8", errors="replace")
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            # Also where a "p=" (channel binding) or "y" gs2 header ends up: only "n" is supported.
            raise self._invalid(f"Invalid SCRAM client first message format: {message}")
        try:
            username = username_from_sasl_name(match["saslname"])
            # RFC 5802 escapes the authzid like the user name; compare it unescaped.
            authzid = username_from_sasl_name(match["authzid"] or "")
        except ValueError as e:
            # ScramSaslServer wraps this as "Credentials could not be obtained".
            raise self._invalid(f"Authentication failed: Credentials could not be obtained: {e}") from None
        extensions = dict(item.split("=", 1) for item in match["extensions"].split(",")[1:])
        return _ClientFirst(
            gs2_header=match["gs2"],
            bare=match["bare"],
            authorization_id=authzid,
            username=username,
            nonce=match["nonce"],
            extensions=extensions,
        )

    def _on_client_first(self, token: bytes) -> bytes:
        first = self._parse_client_first(token)
        if first.extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true":
            # Delegation tokens are not supported, so every token id is unknown: Kafka's answer to
            # an unknown token id.
            raise self._invalid(f"Token Authentication failed: Invalid tokenId : {first.username}")
        credential = self._credentials(first.username, self.mechanism)
        if credential is None:
            raise self._invalid("Authentication failed: Invalid user credentials")
        if first.authorization_id and first.authorization_id != first.username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        if credential.iterations < MIN_ITERATIONS:
            raise self._invalid(
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} for {self.mechanism}"
            )
        self._client_first = first
        self._credential = credential
        self._combined_nonce = first.nonce + self._nonce()
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={self._combined_nonce},s={salt},i={credential.iterations}"
        self.authorization_id = first.username
        self.extensions = {k: v for k, v in first.extensions.items() if k == TOKEN_AUTH_EXTENSION}
        self._state = "RECEIVE_CLIENT_FINAL_MESSAGE"
        return self._server_first.encode("ascii")

    def _on_client_final(self, token: bytes) -> bytes:
        first, credential = self._client_first, self._credential
        assert first is not None and credential is not None  # set with the state
        message = token.decode("utf-8", errors="replace")
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise self._invalid(f"Invalid SCRAM client final message format: {message}")
        if not match["nonce"].endswith(self._combined_nonce):
            raise self._invalid("Invalid client nonce in the final client message.")
        # RFC 5802: c= carries the gs2 header again (no channel binding data, as "n" was sent).
        if _b64decode(match["channel"]) != first.gs2_header.encode("ascii"):
            raise self._invalid("Invalid channel binding in the final client message.")
        auth_message = f"{first.bare},{self._server_first},{match['without_proof']}".encode()
        proof = _b64decode(match["proof"])
        client_signature = hmac.digest(credential.stored_key, auth_message, self._digest)
        if len(proof) != len(client_signature):
            raise self._invalid("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(client_signature, proof, strict=True))
        computed_stored_key = hashlib.new(self._digest, client_key).digest()
        if not hmac.compare_digest(computed_stored_key, credential.stored_key):
            raise self._invalid("Invalid client credentials")
        signature = hmac.digest(credential.server_key, auth_message, self._digest)
        self._credential = None
        self._state = "COMPLETE"
        self.complete = True
        return b"v=" + base64.b64encode(signature)

    def session_expiry_ms(self) -> int | None:
        """SCRAM credentials do not expire (no delegation tokens)."""
        return None
