"""OAUTHBEARER token validation: Kafka's two validators, pure functions of the token and the time.

``validate_unsecured`` is Kafka's default, OAuthBearerUnsecuredValidatorCallbackHandler: an unsigned
JWS (``alg`` "none") whose claims are trusted, only times and scope checked. ``validate_jwt`` is
OAuthBearerValidatorCallbackHandler with its JWK set read from a ``file:`` URL: signature, then
``exp``/``iat``/``nbf`` with clock skew, issuer, audience, subject and scope as jose4j checks them.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from shoal.broker.security.jwt import JoseError, Jws, RsaPublicKey, json_object, parse_jwks

JWKS_ENDPOINT_URL = "sasl.oauthbearer.jwks.endpoint.url"
# OAuthBearerScopeUtils: an RFC 6749 scope token.
_SCOPE_ITEM = re.compile(r"[\x23-\x5b\x5d-\x7e\x21]+")


class OAuthConfigError(ValueError):
    """OAUTHBEARER validator options Kafka would refuse."""


@dataclass(frozen=True)
class OAuthSettings:
    """How a listener validates OAUTHBEARER tokens.

    ``jwks`` None selects the unsecured validator and its ``unsecured_*`` options (the
    ``unsecuredValidator*`` JAAS options); otherwise tokens must be signed by one of ``jwks`` and
    the remaining fields are Kafka's ``sasl.oauthbearer.*`` validation settings.
    """

    unsecured_principal_claim_name: str = "sub"
    unsecured_scope_claim_name: str = "scope"
    unsecured_required_scope: tuple[str, ...] = ()
    unsecured_allowable_clock_skew_ms: int = 0
    jwks: tuple[RsaPublicKey, ...] | None = None
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    clock_skew_seconds: int = 30

    @classmethod
    def from_unsecured_options(cls, options: Mapping[str, str]) -> OAuthSettings:
        """Settings from the ``unsecuredValidator*`` JAAS options (blank means the default)."""

        def option(name: str) -> str:
            return (options.get("unsecuredValidator" + name) or "").strip()

        skew_text = option("AllowableClockSkewMs") or "0"
        if not re.fullmatch(r"[+-]?[0-9]+", skew_text):
            raise OAuthConfigError(f'For input string: "{skew_text}"')
        if int(skew_text) < 0:
            raise OAuthConfigError(f"Allowable clock skew millis must not be negative: {skew_text}")
        scope = [item for item in option("RequiredScope").split(" ") if item]
        for item in scope:
            if not _SCOPE_ITEM.fullmatch(item):
                raise OAuthConfigError(f"Invalid scope value: {item}")
        return cls(
            unsecured_principal_claim_name=option("PrincipalClaimName") or "sub",
            unsecured_scope_claim_name=option("ScopeClaimName") or "scope",
            unsecured_required_scope=tuple(scope),
            unsecured_allowable_clock_skew_ms=int(skew_text),
        )

    @classmethod
    def for_jwks_file(
        cls,
        jwks_endpoint_url: str,
        *,
        expected_audience: str = "",
        expected_issuer: str | None = None,
        sub_claim_name: str = "sub",
        scope_claim_name: str = "scope",
        clock_skew_seconds: int = 30,
    ) -> OAuthSettings:
        """Settings of Kafka's OAuthBearerValidatorCallbackHandler from its ``sasl.oauthbearer.*``
        values (``expected_audience`` is the comma-separated list); reads the JWK set file."""
        return cls(
            jwks=read_jwks_file_url(jwks_endpoint_url),
            expected_audience=tuple(a.strip() for a in expected_audience.split(",") if a.strip()),
            expected_issuer=expected_issuer or None,
            sub_claim_name=sub_claim_name,
            scope_claim_name=scope_claim_name,
            clock_skew_seconds=clock_skew_seconds,
        )


def read_jwks_file_url(url: str) -> tuple[RsaPublicKey, ...]:
    """Load the JWK set a ``file:`` URL names (config time, the one place this module does IO)."""
    parsed = urlparse(url)
    if parsed.scheme.lower() != "file":
        raise OAuthConfigError(
            f"The OAuth configuration option {JWKS_ENDPOINT_URL} must be a file: URL here ({url})"
        )
    # Kafka takes the URI's raw path, without percent-decoding.
    path = os.path.abspath(parsed.path)
    if not os.path.exists(path):
        raise OAuthConfigError(
            f"The OAuth configuration option {JWKS_ENDPOINT_URL} contains a file ({path}) that doesn't exist"
        )
    if os.path.isdir(path):
        raise OAuthConfigError(
            f"The OAuth configuration option {JWKS_ENDPOINT_URL} references a directory ({path}), not a file"
        )
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return parse_jwks(text)
    except JoseError as e:
        raise OAuthConfigError(f"The JWK set in {path} could not be read: {e}") from None


@dataclass(frozen=True)
class ValidatedToken:
    """What a validator learned from a good token."""

    principal: str
    expiry_ms: int
    scope: frozenset[str]
    start_ms: int | None = None


class TokenRejected(Exception):
    """A token failed validation; ``status``/``scope`` go into the JSON error, ``reason`` to logs."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.status, self.scope = reason, status, scope


def _java_text(value: Any) -> str:
    # Jackson's JsonNode.asText() of a non-number scalar as Kafka's unsecured JWS stores it.
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return "" if isinstance(value, dict | list) else str(value)


def _unsecured_claims(token: str) -> dict[str, Any]:
    """Header and claims checks of OAuthBearerUnsecuredJws; returns the claims."""
    if ".." in token:
        raise TokenRejected("Malformed compact serialization contains '..'")
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenRejected(
            "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"
        )
    try:
        header, claims = json_object(parts[0]), json_object(parts[1])
    except JoseError as e:
        raise TokenRejected(str(e)) from None
    if "alg" not in header:
        raise TokenRejected("JWS header must have an Algorithm value")
    if _java_text(header["alg"]) != "none":
        raise TokenRejected("Unsecured JWS must have 'none' for an algorithm")
    if parts[2]:
        raise TokenRejected("Unsecured JWS must not contain a digital signature")
    return claims


def _number_claim(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None or isinstance(value, int | float) and not isinstance(value, bool):
        return value
    raise TokenRejected(f"The '{name}' claim was not of type Number: {type(value).__name__}")


def _unsecured_scope(claims: dict[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, list):
        return frozenset(_java_text(s).strip() for s in value if _java_text(s).strip())
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise TokenRejected(f"The '{name}' claim was not of type List: {type(value).__name__}")
    # A string scope is one scope item, even with spaces (OAuthBearerUnsecuredJws.calculateScope).
    text = _java_text(value).strip()
    return frozenset([text]) if text else frozenset()


def _java_round(seconds: float) -> int:
    return math.floor(seconds * 1000 + 0.5)


def validate_unsecured(token: str, settings: OAuthSettings, now_ms: int) -> ValidatedToken:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: claims are trusted, times checked."""
    claims = _unsecured_claims(token)
    scope = _unsecured_scope(claims, settings.unsecured_scope_claim_name)
    exp = _number_claim(claims, "exp")
    if exp is None:
        raise TokenRejected("No expiration time in JWT")
    principal_claim = settings.unsecured_principal_claim_name
    principal = claims.get(principal_claim)
    if principal is not None and not isinstance(principal, str):
        raise TokenRejected(
            f"The '{principal_claim}' claim was not of type String: {type(principal).__name__}"
        )
    if not principal or not principal.strip():
        raise TokenRejected(f"No principal name in JWT claim: {principal_claim}")
    iat = _number_claim(claims, "iat")
    skew = settings.unsecured_allowable_clock_skew_ms
    if iat is not None and 1000 * iat > now_ms + skew:
        raise TokenRejected(
            f"The Issued At value ({iat:f} seconds) was after the indicated time ({now_ms} ms) plus allowable "
            f"clock skew ({skew} ms)"
        )
    if now_ms - skew >= 1000 * exp:
        raise TokenRejected(
            f"The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on or after the "
            f"Expiration Time value ({exp:f} seconds)"
        )
    if iat is not None and exp <= iat:
        raise TokenRejected(
            f"The Expiration Time time ({exp:f} seconds) was not after the Issued At time ({iat:f} seconds)"
        )
    required = settings.unsecured_required_scope
    for item in required:
        if item not in scope:
            # Java's List.toString, which Kafka puts in the JSON error's "scope".
            listed = "[" + ", ".join(required) + "]"
            raise TokenRejected(
                f"The provided scope ({sorted(scope)}) was missing a required scope ({item}).  "
                f"All required scope elements: {listed}",
                status="insufficient_scope",
                scope=listed,
            )
    return ValidatedToken(principal, _java_round(exp), scope, None if iat is None else _java_round(iat))


def _seconds_claim(claims: dict[str, Any], name: str) -> int | None:
    # jose4j reads NumericDate claims as whole seconds.
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenRejected(f"Could not extract the '{name}' claim from the access token")
    return int(value)


def _check_audience(claims: dict[str, Any], expected: tuple[str, ...]) -> None:
    aud = claims.get("aud")
    if aud is None:
        if expected:
            raise TokenRejected("No Audience (aud) claim present.")
        return
    audiences = aud if isinstance(aud, list) else [aud]
    if not all(isinstance(a, str) for a in audiences):
        raise TokenRejected("The value of the 'aud' claim is not a string or array of strings")
    # With no expected audience the intersection is empty: jose4j, as Kafka configures it, refuses a
    # token that names an audience when none is expected.
    if not set(audiences) & set(expected):
        raise TokenRejected(f"Audience (aud) claim {audiences} doesn't contain an acceptable identifier.")


def _check_times(claims: dict[str, Any], now_s: int, skew: int) -> tuple[int, int]:
    exp, iat, nbf = (_seconds_claim(claims, n) for n in ("exp", "iat", "nbf"))
    if exp is None:
        raise TokenRejected("No Expiration Time (exp) claim present.")
    if iat is None:
        raise TokenRejected("No Issued At (iat) claim present.")
    if now_s - skew >= exp:
        raise TokenRejected(
            f"The JWT is no longer valid - the evaluation time {now_s} is on or after the "
            f"Expiration Time (exp={exp}) claim value (even when providing {skew} seconds of "
            f"leeway to account for clock skew)."
        )
    if exp < iat or nbf is not None and exp < nbf:
        raise TokenRejected(
            f"The Expiration Time (exp={exp}) claim value cannot be before the Issued At (iat={iat}) "
            f"or Not Before (nbf={nbf}) claim value."
        )
    if nbf is not None and now_s + skew < nbf:
        raise TokenRejected(
            f"The JWT is not yet valid as the evaluation time {now_s} is before the NotBefore "
            f"(nbf={nbf}) claim time (even when providing {skew} seconds of leeway)."
        )
    if exp < 0:
        raise TokenRejected(f'exp value must be non-negative; value given was "{exp * 1000}"')
    if iat < 0:
        raise TokenRejected(f'iat value must be null or non-negative; value given was "{iat * 1000}"')
    return exp, iat


def _secured_scope(claims: dict[str, Any], name: str) -> frozenset[str]:
    raw = claims.get(name)
    items = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise TokenRejected(f"{name} value must be a non-empty string")
        if item.strip() in seen:
            raise TokenRejected(f"{name} value must not contain duplicates - {item.strip()} already present")
        seen.add(item.strip())
    return frozenset(seen)


def validate_jwt(token: str, settings: OAuthSettings, now_ms: int) -> ValidatedToken:
    """Kafka's OAuthBearerValidatorCallbackHandler (ValidatorAccessTokenValidator) against a JWK set."""
    assert settings.jwks is not None
    try:
        jws = Jws.parse(token)
        jws.verify(settings.jwks)
    except JoseError as e:
        raise TokenRejected(f"Could not validate the access token: {e}") from None
    claims = jws.claims
    exp, iat = _check_times(claims, now_ms // 1000, settings.clock_skew_seconds)
    if settings.expected_issuer is not None and claims.get("iss") != settings.expected_issuer:
        raise TokenRejected(
            f"Issuer (iss) claim value ({claims.get('iss')}) doesn't match expected value of "
            f"{settings.expected_issuer}"
        )
    _check_audience(claims, settings.expected_audience)
    scope = _secured_scope(claims, settings.scope_claim_name)
    sub_name = settings.sub_claim_name
    sub = claims.get(sub_name)
    if sub is not None and not isinstance(sub, str):
        raise TokenRejected(f"Could not extract the '{sub_name}' claim from the access token")
    if not sub or not sub.strip():
        raise TokenRejected(f"{sub_name} value must be non-null, non-empty and not only whitespace")
    return ValidatedToken(sub.strip(), exp * 1000, scope, iat * 1000)


def validate_token(token: str, settings: OAuthSettings, now_ms: int) -> ValidatedToken:
    """Validate with the validator ``settings`` selects; TokenRejected says why not."""
    if settings.jwks is None:
        return validate_unsecured(token, settings, now_ms)
    return validate_jwt(token, settings, now_ms)
