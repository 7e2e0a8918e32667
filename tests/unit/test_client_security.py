"""The client side of security (shoal/client/security.py, sasl_mechanisms.py): SCRAM against the broker's ScramServer,
RFC 7677's example, a forged server signature, PLAIN and OAUTHBEARER messages, the unsecured token
Kafka's login handler makes, JAAS entries of clients, and configuration errors at construction."""

from __future__ import annotations

import base64
import hmac
import json
import ssl
import time

import pytest

from shoal.broker.security.oauth_tokens import OAuthSettings, TokenRejected, validate_unsecured
from shoal.broker.security.oauthbearer import OAuthBearerServer, parse_initial_response
from shoal.broker.security.plain import PlainServer
from shoal.broker.security.sasl_server import SaslAuthenticationError
from shoal.broker.security.scram import ScramCredential, ScramServer
from shoal.client import AdminClient, Consumer, Producer
from shoal.client.config import ADMIN_DEFAULTS, CONSUMER_DEFAULTS, PRODUCER_DEFAULTS, make_config
from shoal.client.errors import AuthenticationError, SaslAuthenticationFailed
from shoal.client.sasl_mechanisms import (
    OAuthBearerClient,
    PlainClient,
    ScramClient,
    SecurityConfigError,
    initial_response,
    unsecured_token,
)
from shoal.client.security import build_security, client_security, reauthentication_delay_ms

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-pw";'
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="sam" password="sam-pw";'
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'unsecuredLoginStringClaim_sub="bob";')


def _run(client, server, now_ms: int = 0) -> None:
    """Feed the client's tokens to the server and its answers back, as SaslAuthenticate does."""
    token = client.evaluate(None)
    while token is not None:
        answer = server.evaluate(token, now_ms)
        token = client.evaluate(answer)


def _scram_server(mechanism: str, user: str, password: str, **kw) -> ScramServer:
    cred = ScramCredential.from_password(mechanism, password, b"salt-of-" + user.encode(), 4096)
    return ScramServer(mechanism, lambda u, m: cred if (u, m) == (user, mechanism) else None, **kw)


# -- SCRAM ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_broker_server(mechanism: str) -> None:
    server = _scram_server(mechanism, "sam", "sam-pw")
    client = ScramClient(mechanism, "sam", "sam-pw")
    _run(client, server)
    assert client.complete and server.complete
    assert server.authorization_id == "sam"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_wrong_password_refused_by_server(mechanism: str) -> None:
    server = _scram_server(mechanism, "sam", "sam-pw")
    client = ScramClient(mechanism, "sam", "not-it")
    with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
        _run(client, server)
    assert not client.complete


def test_scram_client_user_name_escaped() -> None:
    server = _scram_server("SCRAM-SHA-256", "a=b,c", "pw")
    client = ScramClient("SCRAM-SHA-256", "a=b,c", "pw")
    assert client.evaluate(None).startswith(b"n,,n=a=3Db=2Cc,r=")
    client = ScramClient("SCRAM-SHA-256", "a=b,c", "pw")
    _run(client, server)
    assert server.authorization_id == "a=b,c"


def test_scram_client_rfc7677_vector() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.evaluate(None) == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.evaluate(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert client.evaluate(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert client.complete


def test_scram_client_rfc7677_vector_against_broker_server() -> None:
    # Both cores, both nonces fixed: the exchange is RFC 7677's, message for message.
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pencil", salt, 4096)
    server = ScramServer("SCRAM-SHA-256", lambda u, m: cred, nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    first = server.evaluate(client.evaluate(None), 0)
    last = server.evaluate(client.evaluate(first), 0)
    assert last == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert client.evaluate(last) is None and client.complete


def test_scram_client_detects_bad_server_signature() -> None:
    server = _scram_server("SCRAM-SHA-256", "sam", "sam-pw")
    client = ScramClient("SCRAM-SHA-256", "sam", "sam-pw")
    final = client.evaluate(server.evaluate(client.evaluate(None), 0))
    good = server.evaluate(final, 0)
    signature = bytearray(base64.b64decode(good[2:]))
    signature[0] ^= 1
    with pytest.raises(SaslAuthenticationFailed, match="Invalid server signature"):
        client.evaluate(b"v=" + base64.b64encode(bytes(signature)))
    assert not client.complete


def test_scram_client_detects_server_that_does_not_know_the_password() -> None:
    # A server holding a credential for another password answers with a signature of its own key.
    client = ScramClient("SCRAM-SHA-256", "sam", "sam-pw")
    real = _scram_server("SCRAM-SHA-256", "sam", "sam-pw")
    first = real.evaluate(client.evaluate(None), 0)
    client.evaluate(first)
    impostor = ScramCredential.from_password("SCRAM-SHA-256", "other", b"salt-of-sam", 4096)
    forged = hmac.digest(impostor.server_key, b"anything", "sha256")
    with pytest.raises(SaslAuthenticationFailed):
        client.evaluate(b"v=" + base64.b64encode(forged))


@pytest.mark.parametrize("server_first, message", [
    (b"r=someone-elses-nonce,s=c2FsdA==,i=4096", "Invalid server nonce"),
    (b"garbage", "Invalid SCRAM server first message format"),
])
def test_scram_client_refuses_bad_server_first(server_first: bytes, message: str) -> None:
    client = ScramClient("SCRAM-SHA-256", "sam", "pw", nonce="abc")
    client.evaluate(None)
    with pytest.raises(SaslAuthenticationFailed, match=message):
        client.evaluate(server_first)


def test_scram_client_refuses_too_few_iterations_and_server_error() -> None:
    client = ScramClient("SCRAM-SHA-512", "sam", "pw", nonce="abc")
    client.evaluate(None)
    with pytest.raises(SaslAuthenticationFailed, match="less than the minimum 4096"):
        client.evaluate(b"r=abcdef,s=c2FsdA==,i=1000")
    client = ScramClient("SCRAM-SHA-256", "sam", "pw", nonce="abc")
    client.evaluate(None)
    client.evaluate(b"r=abcdef,s=c2FsdA==,i=4096")
    with pytest.raises(SaslAuthenticationFailed, match="failed with error: invalid-proof"):
        client.evaluate(b"e=invalid-proof")


def test_scram_client_tokenauth_extension() -> None:
    client = ScramClient("SCRAM-SHA-256", "tok", "hmac", extensions={"tokenauth": "true"}, nonce="n1")
    assert client.evaluate(None) == b"n,,n=tok,r=n1,tokenauth=true"


# -- PLAIN and OAUTHBEARER messages ---------------------------------------------------------


def test_plain_client_against_broker_server() -> None:
    server = PlainServer({"alice": "alice-pw"})
    client = PlainClient("alice", "alice-pw")
    assert client.evaluate(None) == b"\0alice\0alice-pw"
    client = PlainClient("alice", "alice-pw")
    _run(client, server)
    assert client.complete and server.complete and server.authorization_id == "alice"


def test_oauthbearer_initial_response_shape() -> None:
    message = initial_response("a.b.", {"traceId": "123"})
    assert message == b"n,,\x01auth=Bearer a.b.\x01traceId=123\x01\x01"
    parsed = parse_initial_response(message)
    assert parsed.token == "a.b." and parsed.extensions == {"traceId": "123"}
    assert initial_response("t", authorization_id="bob") == b"n,a=bob,\x01auth=Bearer t\x01\x01"


def _claims(token: str) -> tuple[dict, dict, str]:
    header, body, signature = token.split(".")

    def decode(part: str) -> dict:
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))

    return decode(header), decode(body), signature


def test_unsecured_token_shape_as_kafka_makes_it() -> None:
    now_ms = 1_700_000_000_123
    token = unsecured_token({"unsecuredLoginStringClaim_sub": "bob",
                             "unsecuredLoginListClaim_scope": "|read|write",
                             "unsecuredLoginNumberClaim_level": "3",
                             "unsecuredLoginLifetimeSeconds": "60"}, now_ms)
    header, claims, signature = _claims(token)
    assert header == {"alg": "none"} and signature == ""
    assert claims["iat"] == pytest.approx(1_700_000_000.123) and claims["exp"] == pytest.approx(1_700_000_060.123)
    assert claims["sub"] == "bob" and claims["scope"] == ["read", "write"] and claims["level"] == 3.0
    # The broker's unsecured validator accepts it, and sees the scope and the expiry.
    validated = validate_unsecured(token, OAuthSettings(unsecured_required_scope=("read",)), now_ms)
    assert validated.principal == "bob" and validated.expiry_ms == 1_700_000_060_123
    with pytest.raises(TokenRejected):
        validate_unsecured(token, OAuthSettings(), now_ms + 61_000)


def test_unsecured_token_defaults_and_errors() -> None:
    now_ms = 1_700_000_000_000
    _h, claims, _s = _claims(unsecured_token({"unsecuredLoginStringClaim_sub": "bob"}, now_ms))
    assert claims["exp"] - claims["iat"] == 3600 and "scope" not in claims
    _h, claims, _s = _claims(unsecured_token({"unsecuredLoginStringClaim_user": "eve",
                                              "unsecuredLoginPrincipalClaimName": "user"}, now_ms))
    assert claims["user"] == "eve"
    with pytest.raises(SecurityConfigError, match="No principal name in JWT claim: sub"):
        unsecured_token({"unsecuredLoginStringClaim_name": "x"}, now_ms)
    with pytest.raises(SecurityConfigError, match="Cannot explicitly set the 'exp' claim"):
        unsecured_token({"unsecuredLoginStringClaim_sub": "x", "unsecuredLoginNumberClaim_exp": "1"}, now_ms)
    with pytest.raises(SecurityConfigError, match="Extensions provided in login context without a token"):
        unsecured_token({"unsecuredLoginExtension_a": "b"}, now_ms)
    with pytest.raises(SecurityConfigError, match='For input string: "soon"'):
        unsecured_token({"unsecuredLoginStringClaim_sub": "x", "unsecuredLoginLifetimeSeconds": "soon"}, now_ms)


def test_oauthbearer_client_against_broker_server() -> None:
    token = unsecured_token({"unsecuredLoginStringClaim_sub": "bob"})
    now_ms = int(time.time() * 1000)
    server = OAuthBearerServer(OAuthSettings())
    client = OAuthBearerClient(token, {"traceId": "x"})
    _run(client, server, now_ms)
    assert client.complete and server.authorization_id == "bob" and server.extensions == {"traceId": "x"}
    # A token the broker rejects: its JSON error, the client's 0x01, then the broker fails.
    server = OAuthBearerServer(OAuthSettings(unsecured_required_scope=("admin",)))
    client = OAuthBearerClient(token)
    error = server.evaluate(client.evaluate(None), now_ms)
    assert json.loads(error)["status"] == "insufficient_scope"
    ack = client.evaluate(error)
    assert ack == b"\x01" and not client.complete
    with pytest.raises(SaslAuthenticationError, match="insufficient_scope"):
        server.evaluate(ack, now_ms)


# -- configuration -------------------------------------------------------------------------


def _sasl(mechanism: str, jaas: str | None, protocol: str = "SASL_PLAINTEXT") -> dict:
    return {"security.protocol": protocol, "sasl.mechanism": mechanism, "sasl.jaas.config": jaas}


def test_jaas_client_entries() -> None:
    sec = build_security(_sasl("PLAIN", PLAIN_JAAS))
    assert sec.mechanism == "PLAIN" and sec.uses_sasl and not sec.uses_tls
    assert sec.sasl_client().evaluate(None) == b"\0alice\0alice-pw"
    sec = build_security(_sasl("scram-sha-512", SCRAM_JAAS))
    client = sec.sasl_client()
    assert sec.mechanism == "SCRAM-SHA-512" and isinstance(client, ScramClient)
    assert client.evaluate(None).startswith(b"n,,n=sam,r=")
    sec = build_security(_sasl("OAUTHBEARER", OAUTH_JAAS[:-1] + ' unsecuredLoginExtension_traceId="t1";'))
    message = sec.sasl_client().evaluate(None)
    parsed = parse_initial_response(message)
    assert parsed.extensions == {"traceId": "t1"} and _claims(parsed.token)[1]["sub"] == "bob"
    # Two authentications, two tokens made at their own time.
    assert isinstance(sec.sasl_client(), OAuthBearerClient)


def test_oauthbearer_token_from_file_url(tmp_path) -> None:
    path = tmp_path / "token.jwt"
    path.write_text("aaa.bbb.ccc\n")
    sec = build_security({**_sasl("OAUTHBEARER", None), "sasl.oauthbearer.token.endpoint.url": path.as_uri()})
    assert parse_initial_response(sec.sasl_client().evaluate(None)).token == "aaa.bbb.ccc"
    with pytest.raises(SecurityConfigError, match="file: URL only"):
        build_security({**_sasl("OAUTHBEARER", None),
                        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token"})
    with pytest.raises(SecurityConfigError, match="cannot read the token file"):
        build_security({**_sasl("OAUTHBEARER", None),
                        "sasl.oauthbearer.token.endpoint.url": (tmp_path / "missing").as_uri()})


@pytest.mark.parametrize("config, message", [
    ({"security.protocol": "SASL_SASL"}, "Invalid value SASL_SASL for configuration security.protocol"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "GSSAPI .* Kerberos"),
    (_sasl("GSSAPI", PLAIN_JAAS), "Kerberos"),
    (_sasl("DIGEST-MD5", PLAIN_JAAS), "sasl.mechanism DIGEST-MD5"),
    (_sasl("PLAIN", None), "needs credentials"),
    (_sasl("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\""),
     "not terminated by semi-colon"),
    (_sasl("PLAIN", SCRAM_JAAS), "needs the login module org.apache.kafka.common.security.plain.PlainLoginModule"),
    (_sasl("PLAIN", PLAIN_JAAS + " " + PLAIN_JAAS), "contains 2 login modules, should be 1 module"),
    (_sasl("SCRAM-SHA-256", 'org.apache.kafka.common.security.scram.ScramLoginModule required username="x";'),
     "needs the 'password' option"),
    (_sasl("OAUTHBEARER", None), "OAUTHBEARER needs a token"),
    (_sasl("OAUTHBEARER", 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                          'unsecuredLoginStringClaim_sub="b" unsecuredLoginExtension_auth="x";'),
     "Extension name auth is invalid"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/x.jks"}, "ssl.truststore.type JKS: .*PEM"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "PKCS12", "ssl.truststore.location": "/x.p12"},
     "ssl.truststore.type PKCS12"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/nonexistent.pem"},
     "Invalid PEM truststore configs"),
    ({"security.protocol": "SSL", "ssl.truststore.certificates": "-----BEGIN"},
     "SSL trust store certs can be specified only for PEM, but trust store type is JKS"),
    ({"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.key": "k"},
     "SSL private key is specified, but certificate chain is not specified"),
    ({"security.protocol": "SSL", "ssl.keystore.certificate.chain": "c"},
     "SSL certificate chain is specified, but private key is not specified"),
    ({"security.protocol": "SSL", "ssl.keystore.location": "/k.jks"}, "ssl.keystore.type JKS"),
    ({"security.protocol": "SSL", "ssl.enabled.protocols": "SSLv3"}, "ssl.enabled.protocols"),
    ({"security.protocol": "SSL", "ssl.protocol": "TLSv1.2", "ssl.enabled.protocols": "TLSv1.3"},
     "older than every protocol"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"},
     "ssl.endpoint.identification.algorithm"),
])
def test_config_errors(config: dict, message: str) -> None:
    with pytest.raises(SecurityConfigError, match=message):
        build_security(config)


@pytest.mark.parametrize("cls", [Producer, Consumer, AdminClient])
def test_clients_refuse_bad_security_at_construction(cls) -> None:
    with pytest.raises(ValueError, match="security.protocol"):
        cls({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "TLS"})
    with pytest.raises(ValueError, match="Kerberos"):
        cls({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "sasl_ssl"})


@pytest.mark.parametrize("defaults", [PRODUCER_DEFAULTS, CONSUMER_DEFAULTS, ADMIN_DEFAULTS])
def test_defaults_are_kafkas_and_case_insensitive(defaults) -> None:
    config = make_config(defaults, {"security.protocol": "sasl_plaintext", "sasl.mechanism": "plain",
                                    "sasl.jaas.config": PLAIN_JAAS})
    assert config["sasl.mechanism"] == "plain" and config["ssl.endpoint.identification.algorithm"] == "https"
    assert client_security(config).protocol == "SASL_PLAINTEXT"
    assert client_security(config).mechanism == "PLAIN"
    assert client_security(make_config(defaults, None)).protocol == "PLAINTEXT"


def test_tls_context_settings(tmp_path) -> None:
    pytest.importorskip("cryptography")
    from shoal.testing.tls_certs import make_pki

    pki = make_pki(tmp_path, clients={"alice": {"CN": "alice"}})
    cert, key = pki.clients["alice"]
    sec = build_security({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                          "ssl.truststore.location": str(pki.ca_cert), "ssl.keystore.type": "PEM",
                          "ssl.keystore.key": key.read_text(), "ssl.keystore.certificate.chain": cert.read_text(),
                          "ssl.enabled.protocols": "TLSv1.2", "ssl.protocol": "TLS"})
    ctx = sec.ssl_context
    assert ctx is not None and sec.check_hostname and ctx.check_hostname
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    assert len(ctx.get_ca_certs()) == 1
    sec = build_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS,
                          "ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki.ca_cert.read_text(),
                          "ssl.endpoint.identification.algorithm": ""})
    assert not sec.check_hostname and sec.ssl_context is not None and not sec.ssl_context.check_hostname
    assert sec.ssl_context.verify_mode == ssl.CERT_REQUIRED and sec.uses_sasl
    # No trust store: the system's CAs (whatever they are here), host names checked.
    sec = build_security({"security.protocol": "SSL"})
    assert sec.ssl_context is not None and sec.ssl_context.check_hostname


def test_reauthentication_point() -> None:
    assert reauthentication_delay_ms(1500) == 1350
    assert reauthentication_delay_ms(1) == 1


def test_auth_errors_are_not_connection_errors() -> None:
    # The client's retry loops retry KafkaConnectionError/OSError/TimeoutError: an authentication
    # failure must be none of them, or bad credentials would be retried until a deadline.
    err = SaslAuthenticationFailed("Authentication failed")
    assert isinstance(err, AuthenticationError)
    assert not isinstance(err, OSError | TimeoutError | ConnectionError)
    assert err.error_code == 58
