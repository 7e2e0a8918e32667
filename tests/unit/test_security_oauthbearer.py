"""OAUTHBEARER: the RFC 7628 exchange, Kafka's unsecured validator, and JWT validation against a JWK set."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from shoal.broker.security.jwt import (
    JoseError,
    Jws,
    RsaPublicKey,
    b64url_encode,
    parse_jwks,
    pkcs1_v15_encoding,
)
from shoal.broker.security.oauthbearer import (
    OAuthBearerServer,
    OAuthConfigError,
    OAuthSettings,
    parse_initial_response,
    read_jwks_file_url,
)
from shoal.broker.security.sasl_server import (
    IllegalSaslStateError,
    MechanismSettings,
    SaslAuthenticationError,
    create_server,
)

NOW_MS = 1_700_000_000_000
NOW_S = NOW_MS // 1000
GENERIC = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"
)


def initial_response(token: str, authzid: str = "", extensions: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01{extensions}\x01".encode()


def unsecured_token(claims: dict[str, object], header: dict[str, object] | None = None) -> str:
    head = header if header is not None else {"alg": "none"}
    return f"{b64url_encode(json.dumps(head).encode())}.{b64url_encode(json.dumps(claims).encode())}."


def good_claims(**extra: object) -> dict[str, object]:
    return {"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 3600, **extra}


# The unsecured validator (Kafka's default)


def test_unsecured_token_ok() -> None:
    server = create_server("OAUTHBEARER", MechanismSettings())
    answer = server.evaluate(
        initial_response(unsecured_token(good_claims()), extensions="traceId=abc\x01"), NOW_MS
    )
    assert answer == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.session_expiry_ms() == (NOW_S + 3600) * 1000
    assert isinstance(server, OAuthBearerServer) and server.extensions == {"traceId": "abc"}
    with pytest.raises(IllegalSaslStateError):
        server.evaluate(b"\x01", NOW_MS)


def test_unsecured_expired_token_gets_json_error_then_failure() -> None:
    server = OAuthBearerServer(OAuthSettings())
    token = unsecured_token(good_claims(exp=NOW_S - 1, iat=NOW_S - 100))
    assert server.evaluate(initial_response(token), NOW_MS) == b'{"status":"invalid_token"}'
    assert not server.complete
    assert (
        server.rejection_reason is not None and "on or after the Expiration Time" in server.rejection_reason
    )
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(b"\x01", NOW_MS)
    assert str(info.value) == '{"status":"invalid_token"}'
    assert info.value.client_message() == '{"status":"invalid_token"}'


def test_unsecured_clock_skew_and_exact_expiry() -> None:
    token = initial_response(unsecured_token(good_claims(exp=NOW_S, iat=NOW_S - 100)))
    # Expired exactly at exp...
    assert OAuthBearerServer(OAuthSettings()).evaluate(token, NOW_MS) != b""
    # ...but not one millisecond earlier, nor within the allowed skew.
    assert OAuthBearerServer(OAuthSettings()).evaluate(token, NOW_MS - 1) == b""
    skewed = OAuthSettings(unsecured_allowable_clock_skew_ms=5)
    assert OAuthBearerServer(skewed).evaluate(token, NOW_MS + 4) == b""
    assert OAuthBearerServer(skewed).evaluate(token, NOW_MS + 5) != b""


def test_unsecured_issued_in_future_rejected() -> None:
    server = OAuthBearerServer(OAuthSettings())
    assert server.evaluate(initial_response(unsecured_token(good_claims(iat=NOW_S + 60))), NOW_MS) != b""
    assert server.rejection_reason is not None and server.rejection_reason.startswith("The Issued At value")


def test_unsecured_required_scope() -> None:
    settings = OAuthSettings.from_unsecured_options({"unsecuredValidatorRequiredScope": "read  write"})
    assert settings.unsecured_required_scope == ("read", "write")
    server = OAuthBearerServer(settings)
    answer = server.evaluate(initial_response(unsecured_token(good_claims(scope=["read"]))), NOW_MS)
    assert answer == b'{"status":"insufficient_scope", "scope":"[read, write]"}'
    with pytest.raises(SaslAuthenticationError, match="insufficient_scope"):
        server.evaluate(b"\x01", NOW_MS)
    server = OAuthBearerServer(settings)
    assert (
        server.evaluate(initial_response(unsecured_token(good_claims(scope=["write", "read"]))), NOW_MS)
        == b""
    )
    # A string scope is a single item, spaces and all.
    server = OAuthBearerServer(settings)
    assert server.evaluate(initial_response(unsecured_token(good_claims(scope="read write"))), NOW_MS) != b""


def test_unsecured_custom_claim_names() -> None:
    settings = OAuthSettings.from_unsecured_options(
        {"unsecuredValidatorPrincipalClaimName": " user ", "unsecuredValidatorScopeClaimName": "scp"}
    )
    server = OAuthBearerServer(settings)
    assert server.evaluate(initial_response(unsecured_token(good_claims(user="bob"))), NOW_MS) == b""
    assert server.authorization_id == "bob"


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("a..b", "Malformed compact serialization contains '..'"),
        (
            "abc.def",
            "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values",
        ),
        ("a.e30.", "malformed Base64 URL encoded value"),
        ("e30.W10.", "malformed JSON"),  # claims are a JSON array
        (unsecured_token(good_claims(), {"alg": "RS256"}), "Unsecured JWS must have 'none' for an algorithm"),
        (unsecured_token(good_claims(), {"typ": "JWT"}), "JWS header must have an Algorithm value"),
        (unsecured_token(good_claims()) + "c2ln", "Unsecured JWS must not contain a digital signature"),
        (unsecured_token({"sub": "alice"}), "No expiration time in JWT"),
        (unsecured_token(good_claims(exp="soon")), "The 'exp' claim was not of type Number: str"),
        (unsecured_token(good_claims(sub=" ")), "No principal name in JWT claim: sub"),
        (unsecured_token(good_claims(iat=NOW_S + 7200)), "The Issued At value"),
    ],
)
def test_unsecured_bad_tokens(token: str, reason: str) -> None:
    server = OAuthBearerServer(OAuthSettings())
    assert server.evaluate(initial_response(token), NOW_MS) == b'{"status":"invalid_token"}'
    assert server.rejection_reason is not None and server.rejection_reason.startswith(reason)
    assert not server.complete


def test_unsecured_options_errors() -> None:
    with pytest.raises(OAuthConfigError, match="must not be negative"):
        OAuthSettings.from_unsecured_options({"unsecuredValidatorAllowableClockSkewMs": "-1"})
    with pytest.raises(OAuthConfigError):
        OAuthSettings.from_unsecured_options({"unsecuredValidatorAllowableClockSkewMs": "ten"})
    with pytest.raises(OAuthConfigError, match="Invalid scope value"):
        OAuthSettings.from_unsecured_options({"unsecuredValidatorRequiredScope": 'a"b'})


def test_retry_after_error_with_a_new_token_is_allowed() -> None:
    server = OAuthBearerServer(OAuthSettings())
    assert (
        server.evaluate(initial_response(unsecured_token(good_claims(exp=NOW_S - 1, iat=1))), NOW_MS) != b""
    )
    assert server.evaluate(initial_response(unsecured_token(good_claims())), NOW_MS) == b""
    assert server.complete


# The client initial response


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\x01",  # an acknowledgement with no error sent
        b"n,,auth=Bearer abc\x01\x01",  # no separator after the gs2 header
        b"n,,\x01auth=Bearer abc\x01",  # no terminating separator
        b"p=x,,\x01auth=Bearer abc\x01\x01",
        b"n,,\x01foo=bar\x01\x01",  # no auth
        b"n,,\x01auth=Bearer\x01\x01",  # no token
        b"n,,\x01auth=Basic abc\x01\x01",  # another scheme
        b"n,,\x01auth=Bearer a b\x01\x01",
        b"n,,\x011x=y\x01auth=Bearer abc\x01\x01",  # extension keys are letters
    ],
)
def test_malformed_initial_response_fails_generically(message: bytes) -> None:
    server = OAuthBearerServer(OAuthSettings())
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(message, NOW_MS)
    assert str(info.value) == GENERIC


def test_initial_response_parts() -> None:
    parsed = parse_initial_response(b"n,a=alice,\x01host=h\x01auth=bearer tok.en==\x01port=9092\x01\x01")
    assert (parsed.token, parsed.authorization_id, parsed.extensions) == (
        "tok.en==",
        "alice",
        {"host": "h", "port": "9092"},
    )
    with pytest.raises(ValueError, match="'auth' not specified"):
        parse_initial_response(b"n,,\x01host=h\x01\x01")


def test_authzid_must_match_principal() -> None:
    server = OAuthBearerServer(OAuthSettings())
    token = unsecured_token(good_claims())
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(initial_response(token, authzid="bob"), NOW_MS)
    assert str(info.value) == (
        "Authentication failed: Client requested an authorization id (bob) that is different from the "
        "token's principal name (alice)"
    )
    server = OAuthBearerServer(OAuthSettings())
    assert server.evaluate(initial_response(token, authzid="alice"), NOW_MS) == b""


# JWT validation against a JWK set


def _probable_prime(rng: random.Random, bits: int) -> int:
    small = [p for p in range(3, 2000, 2) if all(p % q for q in range(3, int(p**0.5) + 1, 2))]
    while True:
        candidate = rng.getrandbits(bits) | (1 << (bits - 1)) | (1 << (bits - 2)) | 1
        if any(candidate % p == 0 for p in small):
            continue
        d, r = candidate - 1, 0
        while d % 2 == 0:
            d, r = d // 2, r + 1
        for _ in range(20):  # Miller-Rabin
            x = pow(rng.randrange(2, candidate - 1), d, candidate)
            if x in (1, candidate - 1):
                continue
            for _ in range(r - 1):
                x = pow(x, 2, candidate)
                if x == candidate - 1:
                    break
            else:
                break
        else:
            return candidate


class RsaTestKey:
    """An RSA key pair made in the test (seeded, so every run uses the same keys) that signs JWTs."""

    def __init__(self, seed: int, kid: str, bits: int = 2048) -> None:
        rng = random.Random(seed)
        e = 65537
        while True:
            p, q = _probable_prime(rng, bits // 2), _probable_prime(rng, bits // 2)
            phi = (p - 1) * (q - 1)
            if p != q and phi % e:
                break
        self.n, self.e, self.d, self.kid = p * q, e, pow(e, -1, phi), kid

    def jwk(self) -> dict[str, str]:
        size = (self.n.bit_length() + 7) // 8
        return {
            "kty": "RSA",
            "kid": self.kid,
            "use": "sig",
            "alg": "RS256",
            "n": b64url_encode(self.n.to_bytes(size, "big")),
            "e": b64url_encode(self.e.to_bytes(3, "big")),
        }

    def sign(self, claims: dict[str, object], alg: str = "RS256", kid: str | None = "use-own") -> str:
        header: dict[str, object] = {"alg": alg, "typ": "JWT"}
        if kid is not None:
            header["kid"] = self.kid if kid == "use-own" else kid
        signing_input = (
            f"{b64url_encode(json.dumps(header).encode())}.{b64url_encode(json.dumps(claims).encode())}"
        )
        k = (self.n.bit_length() + 7) // 8
        digest = {"RS256": "sha256", "RS384": "sha384", "RS512": "sha512"}[alg]
        em = int.from_bytes(pkcs1_v15_encoding(digest, signing_input.encode(), k), "big")
        return f"{signing_input}.{b64url_encode(pow(em, self.d, self.n).to_bytes(k, 'big'))}"


@pytest.fixture(scope="module")
def keys() -> tuple[RsaTestKey, RsaTestKey]:
    return RsaTestKey(1, "key-1"), RsaTestKey(2, "key-2")


@pytest.fixture(scope="module")
def jwks(keys: tuple[RsaTestKey, RsaTestKey]) -> tuple[RsaPublicKey, ...]:
    document = {"keys": [{"kty": "EC", "kid": "ec", "crv": "P-256"}, keys[0].jwk(), keys[1].jwk()]}
    return parse_jwks(json.dumps(document))


def jwt_claims(**extra: object) -> dict[str, object]:
    return {
        "sub": "svc",
        "iss": "https://issuer",
        "aud": "kafka",
        "iat": NOW_S - 5,
        "exp": NOW_S + 600,
        **extra,
    }


def jwt_server(jwks: tuple[RsaPublicKey, ...], **options: object) -> OAuthBearerServer:
    base: dict[str, object] = {
        "jwks": jwks,
        "expected_audience": ("kafka",),
        "expected_issuer": "https://issuer",
    }
    return OAuthBearerServer(OAuthSettings(**{**base, **options}))  # type: ignore[arg-type]


def test_parse_jwks_skips_other_key_types(jwks: tuple[RsaPublicKey, ...]) -> None:
    assert [k.kid for k in jwks] == ["key-1", "key-2"]
    with pytest.raises(JoseError):
        parse_jwks('{"no": "keys"}')
    with pytest.raises(JoseError):
        parse_jwks("not json")


@pytest.mark.parametrize("alg", ["RS256", "RS384", "RS512"])
def test_jwt_ok(keys: tuple[RsaTestKey, RsaTestKey], jwks: tuple[RsaPublicKey, ...], alg: str) -> None:
    server = jwt_server(jwks)
    assert server.evaluate(initial_response(keys[1].sign(jwt_claims(scope="a b"), alg=alg)), NOW_MS) == b""
    assert server.complete and server.authorization_id == "svc"
    assert server.session_expiry_ms() == (NOW_S + 600) * 1000


def test_jwt_bad_signature(keys: tuple[RsaTestKey, RsaTestKey], jwks: tuple[RsaPublicKey, ...]) -> None:
    token = keys[0].sign(jwt_claims())
    head, payload, sig = token.split(".")
    tampered = f"{head}.{b64url_encode(json.dumps(jwt_claims(sub='admin')).encode())}.{sig}"
    server = jwt_server(jwks)
    assert server.evaluate(initial_response(tampered), NOW_MS) == b'{"status":"invalid_token"}'
    assert server.rejection_reason is not None and "signature is invalid" in server.rejection_reason
    with pytest.raises(SaslAuthenticationError, match="invalid_token"):
        server.evaluate(b"\x01", NOW_MS)
    # Signed by key-2 but claiming to be key-1.
    server = jwt_server(jwks)
    assert server.evaluate(initial_response(keys[1].sign(jwt_claims(), kid="key-1")), NOW_MS) != b""


def test_jwt_wrong_or_missing_kid(
    keys: tuple[RsaTestKey, RsaTestKey], jwks: tuple[RsaPublicKey, ...]
) -> None:
    server = jwt_server(jwks)
    assert server.evaluate(initial_response(keys[0].sign(jwt_claims(), kid="key-9")), NOW_MS) != b""
    assert (
        server.rejection_reason is not None
        and "Unable to find a suitable verification key" in server.rejection_reason
    )
    # Without a kid the first signing key is used: key-1 verifies, key-2 does not.
    assert jwt_server(jwks).evaluate(initial_response(keys[0].sign(jwt_claims(), kid=None)), NOW_MS) == b""
    assert jwt_server(jwks).evaluate(initial_response(keys[1].sign(jwt_claims(), kid=None)), NOW_MS) != b""


def test_jwt_expiry_with_clock_skew(
    keys: tuple[RsaTestKey, RsaTestKey], jwks: tuple[RsaPublicKey, ...]
) -> None:
    token = initial_response(keys[0].sign(jwt_claims(exp=NOW_S - 10, iat=NOW_S - 100)))
    assert jwt_server(jwks).evaluate(token, NOW_MS) == b""  # within the default 30 s skew
    server = jwt_server(jwks, clock_skew_seconds=0)
    assert server.evaluate(token, NOW_MS) == b'{"status":"invalid_token"}'
    assert server.rejection_reason is not None and "no longer valid" in server.rejection_reason
    assert jwt_server(jwks).evaluate(token, NOW_MS + 20_000) != b""  # 30 s past exp


@pytest.mark.parametrize(
    ("claims", "options"),
    [
        (jwt_claims(aud="other"), {}),
        (jwt_claims(aud=["other", "more"]), {}),
        ({k: v for k, v in jwt_claims().items() if k != "aud"}, {}),
        (jwt_claims(), {"expected_audience": ()}),  # an audience nobody expects (jose4j's default)
        (jwt_claims(iss="https://evil"), {}),
        ({k: v for k, v in jwt_claims().items() if k != "iat"}, {}),
        ({k: v for k, v in jwt_claims().items() if k != "exp"}, {}),
        (jwt_claims(nbf=NOW_S + 120), {}),
        (jwt_claims(iat=NOW_S + 700), {}),  # exp before iat
        (jwt_claims(nbf=NOW_S + 700), {}),  # exp before nbf
        (jwt_claims(sub=""), {}),
        (jwt_claims(sub=7), {}),
        (jwt_claims(), {"sub_claim_name": "client_id"}),
        (jwt_claims(scope=["a", "a"]), {}),
    ],
)
def test_jwt_claim_checks(
    keys: tuple[RsaTestKey, RsaTestKey],
    jwks: tuple[RsaPublicKey, ...],
    claims: dict[str, object],
    options: dict[str, object],
) -> None:
    server = jwt_server(jwks, **options)
    assert server.evaluate(initial_response(keys[0].sign(claims)), NOW_MS) == b'{"status":"invalid_token"}'
    assert not server.complete


def test_jwt_audience_list_and_custom_sub(
    keys: tuple[RsaTestKey, RsaTestKey], jwks: tuple[RsaPublicKey, ...]
) -> None:
    server = jwt_server(jwks, sub_claim_name="client_id", expected_audience=("x", "kafka"))
    token = keys[0].sign(jwt_claims(aud=["kafka", "y"], client_id="app"))
    assert server.evaluate(initial_response(token), NOW_MS) == b""
    assert server.authorization_id == "app"


def test_jwt_unsigned_or_unsupported_alg_refused(jwks: tuple[RsaPublicKey, ...]) -> None:
    server = jwt_server(jwks)
    assert server.evaluate(initial_response(unsecured_token(jwt_claims())), NOW_MS) != b""
    hs = unsecured_token(jwt_claims(), {"alg": "HS256", "kid": "key-1"}) + "c2ln"
    assert jwt_server(jwks).evaluate(initial_response(hs), NOW_MS) != b""


def test_rsa_rejects_short_keys_and_wrong_lengths(keys: tuple[RsaTestKey, RsaTestKey]) -> None:
    small = RsaTestKey(3, "small", bits=1024)
    token = Jws.parse(small.sign(jwt_claims()))
    with pytest.raises(JoseError, match="2048 bits"):
        RsaPublicKey(small.n, small.e).verify("RS256", token.signing_input, token.signature)
    good = Jws.parse(keys[0].sign(jwt_claims()))
    key = RsaPublicKey(keys[0].n, keys[0].e)
    assert key.verify("RS256", good.signing_input, good.signature)
    assert not key.verify("RS256", good.signing_input, good.signature[1:])
    assert not key.verify("RS512", good.signing_input, good.signature)
    assert not key.verify("PS256", good.signing_input, good.signature)
    assert hashlib.sha256(good.signing_input).digest() in pow(
        int.from_bytes(good.signature, "big"), key.e, key.n
    ).to_bytes(256, "big")


def test_read_jwks_file_url(tmp_path: Path, keys: tuple[RsaTestKey, RsaTestKey]) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [keys[0].jwk()]}))
    loaded = read_jwks_file_url(path.as_uri())
    assert loaded == (RsaPublicKey(keys[0].n, keys[0].e, "key-1", "sig"),)
    with pytest.raises(OAuthConfigError, match="doesn't exist"):
        read_jwks_file_url((tmp_path / "missing.json").as_uri())
    with pytest.raises(OAuthConfigError, match="directory"):
        read_jwks_file_url(tmp_path.as_uri())
    with pytest.raises(OAuthConfigError):
        read_jwks_file_url("https://example.com/jwks")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(OAuthConfigError):
        read_jwks_file_url((tmp_path / "bad.json").as_uri())


def test_settings_for_jwks_file(tmp_path: Path, keys: tuple[RsaTestKey, RsaTestKey]) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [keys[0].jwk()]}))
    settings = OAuthSettings.for_jwks_file(
        path.as_uri(),
        expected_audience=" kafka , other,",
        expected_issuer="https://issuer",
        clock_skew_seconds=0,
    )
    assert settings.expected_audience == ("kafka", "other")
    assert settings.jwks is not None and settings.jwks[0].kid == "key-1"
    server = create_server("OAUTHBEARER", MechanismSettings(oauth=settings))
    assert server.evaluate(initial_response(keys[0].sign(jwt_claims())), NOW_MS) == b""
    assert server.authorization_id == "svc"
    # An unsecured token is no good once a JWK set is configured.
    server = create_server("OAUTHBEARER", MechanismSettings(oauth=settings))
    assert (
        server.evaluate(initial_response(unsecured_token(jwt_claims())), NOW_MS)
        == b'{"status":"invalid_token"}'
    )
