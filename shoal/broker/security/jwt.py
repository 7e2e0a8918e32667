"""The JOSE pieces OAUTHBEARER validation needs: compact JWS parsing, JWK sets, RSA signatures.

Only RS256, RS384 and RS512 (RSASSA-PKCS1-v1_5) are implemented, in pure Python: verifying is one
modular exponentiation and a comparison with the expected encoding (RFC 8017, section 8.2.2), so no
cryptography package is needed. Key selection follows jose4j's, which Kafka uses: by ``kid`` when
the token names one, by key type, and never a key whose ``use`` is not "sig"; the first match wins.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

# jose4j refuses RSA keys shorter than this for every JOSE RSA algorithm.
MIN_RSA_BITS = 2048
RSA_ALGORITHMS = {"RS256": "sha256", "RS384": "sha384", "RS512": "sha512"}
# The DER encoding of DigestInfo up to the digest itself (RFC 8017, section 9.2, note 1).
_DIGEST_INFO_PREFIX = {
    "sha256": bytes.fromhex("3031300d060960864801650304020105000420"),
    "sha384": bytes.fromhex("3041300d060960864801650304020205000430"),
    "sha512": bytes.fromhex("3051300d060960864801650304020305000440"),
}


class JoseError(ValueError):
    """A token, key set or signature that cannot be used; the message says why (for logs)."""


def b64url_decode(text: str) -> bytes:
    """Base64url (RFC 7515, section 2), leniently: padding and the standard alphabet's "+" and "/"
    are accepted too, since Kafka's unsecured JWS parser decodes with the standard alphabet."""
    normal = text.rstrip("=").replace("-", "+").replace("_", "/")
    if len(normal) % 4 == 1:
        raise JoseError("malformed Base64 URL encoded value")
    try:
        return base64.b64decode(normal + "=" * (-len(normal) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise JoseError("malformed Base64 URL encoded value") from None


def b64url_encode(data: bytes) -> str:
    """Base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def json_object(segment: str) -> dict[str, Any]:
    """A base64url segment holding a JSON object."""
    raw = b64url_decode(segment)
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise JoseError("malformed JSON") from None
    if not isinstance(value, dict):
        raise JoseError("malformed JSON: not an object")
    return value


@dataclass(frozen=True)
class RsaPublicKey:
    """One RSA verification key of a JWK set."""

    n: int
    e: int
    kid: str | None = None
    use: str | None = None

    def verify(self, algorithm: str, signing_input: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's RSASSA-PKCS1-v1_5 signature of ``signing_input``."""
        digest_name = RSA_ALGORITHMS.get(algorithm)
        if digest_name is None:
            return False
        if self.n.bit_length() < MIN_RSA_BITS:
            raise JoseError(
                f"An RSA key of size {MIN_RSA_BITS} bits or larger MUST be used (given key was only "
                f"{self.n.bit_length()} bits)"
            )
        k = (self.n.bit_length() + 7) // 8
        if len(signature) != k:
            return False
        s = int.from_bytes(signature, "big")
        if s >= self.n:
            return False
        encoded = pow(s, self.e, self.n).to_bytes(k, "big")
        return hmac.compare_digest(encoded, pkcs1_v15_encoding(digest_name, signing_input, k))


def pkcs1_v15_encoding(digest_name: str, message: bytes, k: int) -> bytes:
    """EMSA-PKCS1-v1_5: 00 01 FF.. 00 DigestInfo, ``k`` bytes long."""
    t = _DIGEST_INFO_PREFIX[digest_name] + hashlib.new(digest_name, message).digest()
    if k < len(t) + 11:
        raise JoseError("RSA modulus too short for the digest")
    return b"\x00\x01" + b"\xff" * (k - len(t) - 3) + b"\x00" + t


def _b64url_int(jwk: dict[str, Any], name: str) -> int:
    value = jwk.get(name)
    if not isinstance(value, str) or not value:
        raise JoseError(f"RSA JWK without '{name}'")
    return int.from_bytes(b64url_decode(value), "big")


def parse_jwks(text: str) -> tuple[RsaPublicKey, ...]:
    """The RSA keys of a JWK set document; keys of other types are skipped (not supported)."""
    try:
        document = json.loads(text)
    except ValueError as e:
        raise JoseError(f"The JWK set is not valid JSON: {e}") from None
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise JoseError("The JWK set has no 'keys' array")
    out = []
    for jwk in keys:
        if not isinstance(jwk, dict) or jwk.get("kty") != "RSA":
            continue
        kid, use = jwk.get("kid"), jwk.get("use")
        out.append(
            RsaPublicKey(
                n=_b64url_int(jwk, "n"),
                e=_b64url_int(jwk, "e"),
                kid=kid if isinstance(kid, str) else None,
                use=use if isinstance(use, str) else None,
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class Jws:
    """A compact JWS split into its parts, header and claims decoded, signature not yet checked."""

    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes

    @classmethod
    def parse(cls, token: str) -> Jws:
        """Split and decode a compact serialization; JoseError if it is not one."""
        parts = token.split(".")
        if len(parts) != 3 or not all(parts):
            raise JoseError(
                f"Malformed JWT provided; expected three sections (header, payload, and signature), "
                f"but {len(parts)} sections provided"
            )
        header, claims = json_object(parts[0]), json_object(parts[1])
        signing_input = f"{parts[0]}.{parts[1]}".encode("ascii")
        return cls(header, claims, signing_input, b64url_decode(parts[2]))

    def verify(self, keys: tuple[RsaPublicKey, ...]) -> None:
        """Check the signature with the key the header selects; JoseError if it does not verify."""
        algorithm = self.header.get("alg")
        if algorithm not in RSA_ALGORITHMS:
            # "none" among them: Kafka's validator disallows it (AlgorithmConstraints.DISALLOW_NONE).
            raise JoseError(f"Unsupported or disallowed signature algorithm: {algorithm!r}")
        key = select_key(keys, self.header.get("kid"))
        if key is None:
            raise JoseError(f"Unable to find a suitable verification key for JWS w/ header {self.header}")
        if not key.verify(str(algorithm), self.signing_input, self.signature):
            raise JoseError("JWS signature is invalid")


def select_key(keys: tuple[RsaPublicKey, ...], kid: object) -> RsaPublicKey | None:
    """The first RSA signing key with the token's ``kid`` (any key when the token names none)."""
    for key in keys:
        if key.use not in (None, "sig"):
            continue
        if kid is not None and key.kid != kid:
            continue
        return key
    return None
