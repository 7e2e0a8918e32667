"""SASL mechanism cores: SCRAM (RFC 5802/7677), PLAIN (RFC 4616) and the factory, with Kafka's messages."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from shoal.broker.security.plain import PlainServer
from shoal.broker.security.sasl_server import (
    IllegalSaslStateError,
    MechanismSettings,
    SaslAuthenticationError,
    UnsupportedSaslMechanismError,
    create_server,
)
from shoal.broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    ScramCredential,
    ScramServer,
    sasl_name,
    username_from_sasl_name,
)
from shoal.protocol.errors import ErrorCode, error_code_of

NOW = 1_700_000_000_000
GENERIC_256 = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
)

# RFC 7677, section 3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_server(user: str = "user", password: str = "pencil") -> ScramServer:
    cred = ScramCredential.from_password("SCRAM-SHA-256", password, RFC_SALT, 4096)
    return ScramServer(
        "SCRAM-SHA-256", lambda u, m: cred if u == user else None, nonce=lambda: RFC_SERVER_NONCE
    )


def test_rfc7677_vector_full_exchange() -> None:
    server = rfc_server()
    assert server.evaluate(RFC_CLIENT_FIRST, NOW) == RFC_SERVER_FIRST
    assert not server.complete
    assert server.evaluate(RFC_CLIENT_FINAL, NOW) == RFC_SERVER_FINAL
    assert server.complete
    assert server.authorization_id == "user"
    assert server.session_expiry_ms() is None


def test_rfc7677_wrong_password_fails_with_generic_message() -> None:
    server = rfc_server(password="pencil2")
    server.evaluate(RFC_CLIENT_FIRST, NOW)
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(RFC_CLIENT_FINAL, NOW)
    assert str(info.value) == GENERIC_256
    assert info.value.reason == "Invalid client credentials"
    assert error_code_of(info.value) == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert info.value.client_message(reauthenticating=True) == GENERIC_256.replace(
        "during authentication", "during re-authentication"
    )
    assert not server.complete
    with pytest.raises(IllegalSaslStateError) as state:
        server.evaluate(RFC_CLIENT_FINAL, NOW)
    assert error_code_of(state.value) == ErrorCode.ILLEGAL_SASL_STATE


class ScramClient:
    """A SCRAM client written from RFC 5802, to drive the server through a whole exchange."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str = "clientnonce123") -> None:
        self.digest = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.password, self.nonce = password, nonce
        self.bare = f"n={sasl_name(user)},r={nonce}"
        self.server_signature = b""

    def first(self, gs2: str = "n,,", extensions: str = "") -> bytes:
        self.gs2 = gs2
        self.bare += extensions  # extensions are part of client-first-message-bare
        return (gs2 + self.bare).encode()

    def final(self, server_first: bytes, nonce_suffix: str = "", proof_flip: bool = False) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac(
            self.digest, self.password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
        )
        channel = base64.b64encode(self.gs2.encode()).decode()
        without_proof = f"c={channel},r={fields['r']}{nonce_suffix}"
        auth = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self.digest)
        signature = hmac.digest(hashlib.new(self.digest, client_key).digest(), auth, self.digest)
        proof = bytearray(a ^ b for a, b in zip(client_key, signature, strict=True))
        if proof_flip:
            proof[0] ^= 1
        self.server_signature = hmac.digest(
            hmac.digest(salted, b"Server Key", self.digest), auth, self.digest
        )
        return f"{without_proof},p={base64.b64encode(bytes(proof)).decode()}".encode()


def scram_settings(
    mechanism: str, users: dict[str, str], iterations: int = MIN_ITERATIONS
) -> MechanismSettings:
    creds = {
        u: ScramCredential.from_password(mechanism, p, b"salt-" + u.encode(), iterations)
        for u, p in users.items()
    }
    return MechanismSettings(
        scram_credential=lambda user, mech: creds.get(user) if mech == mechanism else None
    )


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_round_trip(mechanism: str) -> None:
    server = create_server(mechanism, scram_settings(mechanism, {"alice": "alice-secret"}))
    client = ScramClient(mechanism, "alice", "alice-secret")
    server_first = server.evaluate(client.first(), NOW)
    assert server_first.startswith(b"r=clientnonce123")
    assert len(server_first.split(b",")[0]) > len("r=clientnonce123") + 16  # a server nonce was added
    server_final = server.evaluate(client.final(server_first), NOW)
    assert server_final == b"v=" + base64.b64encode(client.server_signature)
    assert server.complete and server.authorization_id == "alice"


def test_scram_sha512_wrong_password() -> None:
    server = create_server("SCRAM-SHA-512", scram_settings("SCRAM-SHA-512", {"alice": "alice-secret"}))
    client = ScramClient("SCRAM-SHA-512", "alice", "not-the-secret")
    server_first = server.evaluate(client.first(), NOW)
    with pytest.raises(SaslAuthenticationError, match="SASL mechanism SCRAM-SHA-512$"):
        server.evaluate(client.final(server_first), NOW)
    assert not server.complete


def test_scram_flipped_proof_bit_fails() -> None:
    server = create_server("SCRAM-SHA-256", scram_settings("SCRAM-SHA-256", {"alice": "pw"}))
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    server_first = server.evaluate(client.first(), NOW)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(client.final(server_first, proof_flip=True), NOW)


def test_scram_unknown_user_fails_at_client_first() -> None:
    server = create_server("SCRAM-SHA-256", scram_settings("SCRAM-SHA-256", {"alice": "pw"}))
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(ScramClient("SCRAM-SHA-256", "bob", "pw").first(), NOW)
    assert str(info.value) == GENERIC_256  # never says whether the user exists
    assert info.value.reason == "Authentication failed: Invalid user credentials"


def test_scram_credential_of_other_mechanism_is_not_used() -> None:
    server = create_server("SCRAM-SHA-512", scram_settings("SCRAM-SHA-256", {"alice": "pw"}))
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(ScramClient("SCRAM-SHA-512", "alice", "pw").first(), NOW)


def test_scram_bad_nonce_in_client_final() -> None:
    server = create_server("SCRAM-SHA-256", scram_settings("SCRAM-SHA-256", {"alice": "pw"}))
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    server_first = server.evaluate(client.first(), NOW)
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(client.final(server_first, nonce_suffix="x"), NOW)
    assert info.value.reason == "Invalid client nonce in the final client message."


def test_scram_too_few_iterations_refused() -> None:
    server = create_server("SCRAM-SHA-256", scram_settings("SCRAM-SHA-256", {"alice": "pw"}, iterations=4095))
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(ScramClient("SCRAM-SHA-256", "alice", "pw").first(), NOW)
    assert info.value.reason == "Iterations 4095 is less than the minimum 4096 for SCRAM-SHA-256"


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"p=tls-unique,,n=user,r=abc",  # channel binding requested
        b"y,,n=user,r=abc",  # only "n" is supported
        b"n,,n=user",  # no nonce
        b"n,,r=abc,n=user",  # wrong order
        b"n,,n=us,er,r=abc",  # unescaped comma
        b"n,,n=\xc3\xa9,r=abc",  # Kafka's SASLNAME is ASCII only
        b"n,,n=user,r=a b",  # nonce is printable without space
        b"n,,n=user,r=abc,1x=y",  # extension names are letters
    ],
)
def test_scram_malformed_client_first(message: bytes) -> None:
    server = rfc_server()
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(message, NOW)
    assert str(info.value) == GENERIC_256
    assert info.value.reason.startswith("Invalid SCRAM client first message format")


@pytest.mark.parametrize(
    "message",
    [
        b"garbage",
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",  # no proof
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=abc",  # proof not base64
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,c=biws,p=AAAA",  # wrong order
    ],
)
def test_scram_malformed_client_final(message: bytes) -> None:
    server = rfc_server()
    server.evaluate(RFC_CLIENT_FIRST, NOW)
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(message, NOW)
    assert info.value.reason.startswith("Invalid SCRAM client final message format")


def test_scram_wrong_channel_binding_and_short_proof() -> None:
    server = rfc_server()
    server.evaluate(RFC_CLIENT_FIRST, NOW)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), NOW)  # "y,," binding
    server = rfc_server()
    server.evaluate(RFC_CLIENT_FIRST, NOW)
    short = RFC_CLIENT_FINAL.split(b",p=")[0] + b",p=AAAA"
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(short, NOW)
    assert info.value.reason == "Invalid client credentials"


def test_scram_username_escaping() -> None:
    assert sasl_name("a=b,c") == "a=3Db=2Cc"
    assert username_from_sasl_name("a=3Db=2Cc") == "a=b,c"
    with pytest.raises(ValueError, match="Invalid username"):
        username_from_sasl_name("a=3Eb")
    user = "odd=user,name"
    server = create_server("SCRAM-SHA-256", scram_settings("SCRAM-SHA-256", {user: "pw"}))
    client = ScramClient("SCRAM-SHA-256", user, "pw")
    assert b"n=odd=3Duser=2Cname," in client.first()
    server_first = server.evaluate(client.first(), NOW)
    server.evaluate(client.final(server_first), NOW)
    assert server.complete and server.authorization_id == user


def test_scram_authzid_must_match_user() -> None:
    settings = scram_settings("SCRAM-SHA-256", {"alice": "pw"})
    server = create_server("SCRAM-SHA-256", settings)
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(ScramClient("SCRAM-SHA-256", "alice", "pw").first(gs2="n,a=bob,"), NOW)
    assert str(info.value) == (
        "Authentication failed: Client requested an authorization id that is different from username"
    )
    assert info.value.client_message(reauthenticating=True) == str(info.value)
    # The same name as authzid is fine, and the gs2 header then travels in c=.
    server = create_server("SCRAM-SHA-256", settings)
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    server_first = server.evaluate(client.first(gs2="n,a=alice,"), NOW)
    server.evaluate(client.final(server_first), NOW)
    assert server.complete


def test_scram_token_auth_extension_fails_without_delegation_tokens() -> None:
    server = create_server("SCRAM-SHA-256", scram_settings("SCRAM-SHA-256", {"alice": "pw"}))
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(ScramClient("SCRAM-SHA-256", "alice", "pw").first(extensions=",tokenauth=true"), NOW)
    assert str(info.value) == GENERIC_256
    assert info.value.reason == "Token Authentication failed: Invalid tokenId : alice"
    # Any other extension is ignored, as Kafka does.
    server = create_server("SCRAM-SHA-256", scram_settings("SCRAM-SHA-256", {"alice": "pw"}))
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    server.evaluate(client.final(server.evaluate(client.first(extensions=",foo=bar"), NOW)), NOW)
    assert server.complete


def test_scram_credential_from_salted_password_matches_from_password() -> None:
    salted = hashlib.pbkdf2_hmac("sha512", b"secret", b"NaCl", 4096)
    a = ScramCredential.from_salted_password("SCRAM-SHA-512", salted, b"NaCl", 4096)
    b = ScramCredential.from_password("SCRAM-SHA-512", "secret", b"NaCl", 4096)
    assert a == b and len(a.stored_key) == 64 and len(a.server_key) == 64
    assert a.stored_key == hashlib.sha512(hmac.digest(salted, b"Client Key", "sha512")).digest()
    assert (MIN_ITERATIONS, MAX_ITERATIONS) == (4096, 16384)
    assert MECHANISM_TYPES == {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
    with pytest.raises(ValueError):
        ScramCredential.from_password("SCRAM-SHA-1", "x", b"s", 4096)


# PLAIN


def plain(users: dict[str, str] | None = None) -> PlainServer:
    return PlainServer(users if users is not None else {"admin": "admin-secret", "alice": "alice-secret"})


def test_plain_ok_with_and_without_authzid() -> None:
    server = plain()
    assert server.evaluate(b"\0alice\0alice-secret", NOW) == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.session_expiry_ms() is None
    server = plain()
    server.evaluate(b"admin\0admin\0admin-secret", NOW)
    assert server.authorization_id == "admin"
    with pytest.raises(IllegalSaslStateError):
        server.evaluate(b"admin\0admin\0admin-secret", NOW)


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
        (b"\0alice\0alice-secre", "Authentication failed: Invalid username or password"),
        (b"\0nobody\0alice-secret", "Authentication failed: Invalid username or password"),
        (b"\0\0alice-secret", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (
            b"admin\0alice\0alice-secret",
            "Authentication failed: Client requested an authorization id that is different from username",
        ),
        (b"alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
        (b"\0alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (b"\0alice\0alice-secret\0", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
        (b"a\0b\0c\0d\0e", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    ],
)
def test_plain_failures(token: bytes, message: str) -> None:
    server = plain()
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(token, NOW)
    assert str(info.value) == message
    assert info.value.client_message() == message
    assert error_code_of(info.value) == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert not server.complete


def test_plain_wrong_password_checked_before_authzid() -> None:
    # Kafka checks the password first: a wrong password never reveals the authzid rule.
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        plain().evaluate(b"admin\0alice\0wrong", NOW)


def test_factory() -> None:
    settings = MechanismSettings(plain_users={"u": "p"})
    server = create_server("PLAIN", settings)
    server.evaluate(b"\0u\0p", NOW)
    assert server.complete and server.mechanism == "PLAIN"
    assert create_server("SCRAM-SHA-512", settings).mechanism == "SCRAM-SHA-512"
    assert create_server("OAUTHBEARER", settings).mechanism == "OAUTHBEARER"
    with pytest.raises(UnsupportedSaslMechanismError) as info:
        create_server("GSSAPI", settings)
    assert str(info.value) == "Unsupported SASL mechanism GSSAPI"
    assert error_code_of(info.value) == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    # Default settings know no SCRAM users.
    with pytest.raises(SaslAuthenticationError):
        create_server("SCRAM-SHA-256", settings).evaluate(b"n,,n=u,r=abc", NOW)
