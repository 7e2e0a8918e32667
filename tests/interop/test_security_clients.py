"""SASL and TLS with clients others wrote: confluent-kafka (librdkafka), kafka-python and aiokafka,
over real sockets to one shoal broker with PLAINTEXT, SASL_PLAINTEXT, SASL_SSL and SSL (mTLS)
listeners. Every mechanism each client speaks, TLS with and without client certificates, and
Kafka's failures: a wrong password, an unknown user, a certificate from another CA."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
import uuid

import pytest

pytest.importorskip("cryptography")

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from shoal.testing.embedded import EmbeddedBroker  # noqa: E402
from shoal.testing.tls_certs import make_pki  # noqa: E402

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-pw" user_admin="admin-pw" user_alice="alice-pw";')
USERS = {"PLAIN": ("alice", "alice-pw"), "SCRAM-SHA-256": ("sam", "sam-pw"), "SCRAM-SHA-512": ("sue", "sue-pw")}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"), clients={"alice": {"O": "shoal", "OU": "eng", "CN": "alice"}})


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def signer(tmp_path_factory):
    """An RSA key whose public half is the SASL_SSL listener's JWKS file: sign(claims) -> a JWT."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = key.public_key().public_numbers()
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [{
        "kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
        "n": _b64url(numbers.n.to_bytes(256, "big")), "e": _b64url(numbers.e.to_bytes(3, "big"))}]}))

    def sign(claims: dict) -> str:
        head = _b64url(json.dumps({"alg": "RS256", "kid": "k1", "typ": "JWT"}).encode())
        body = _b64url(json.dumps(claims).encode())
        signature = key.sign(f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{head}.{body}.{_b64url(signature)}"

    sign.jwks_url = path.as_uri()  # type: ignore[attr-defined]
    return sign


@pytest.fixture(scope="module")
def secured(pki, signer):
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,"
                          "SSL://127.0.0.1:0",
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
             # OAUTHBEARER: Kafka's unsecured tokens on SASL_PLAINTEXT, JWTs checked against a JWKS on SASL_SSL
             "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": signer.jwks_url,
             "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.expected.audience": "shoal",
             "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
             "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=.*$/$1/L,DEFAULT",
             **pki.broker_properties("SASL_SSL"), **pki.broker_properties("SSL", client_auth="required")}
    with EmbeddedBroker(properties=props) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap("PLAINTEXT")})
        futures = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion(user, ScramCredentialInfo(getattr(ScramMechanism, mech.replace("-", "_")),
                                                                   4096), pw.encode())
            for mech, (user, pw) in USERS.items() if mech != "PLAIN"])
        for f in futures.values():
            f.result(15)
        yield b


def _rdkafka(secured, pki, protocol: str, mechanism: str | None = None, user: str | None = None,
             password: str | None = None, **extra: str) -> dict:
    conf = {"bootstrap.servers": secured.bootstrap(protocol), "security.protocol": protocol, **extra}
    if mechanism:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    if "SSL" in protocol:
        conf["ssl.ca.location"] = str(pki.ca_cert)
    return conf


def _round_trip(conf: dict) -> list[bytes]:
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    p = Producer(conf)
    for i in range(3):
        p.produce(topic, f"v{i}".encode())
    assert p.flush(20) == 0
    c = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    for _ in range(60):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
        if len(got) == 3:
            break
    c.close()
    return got


@pytest.mark.parametrize("mechanism", list(USERS))
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_librdkafka_every_mechanism(secured, pki, protocol, mechanism):
    user, pw = USERS[mechanism]
    assert _round_trip(_rdkafka(secured, pki, protocol, mechanism, user, pw)) == [b"v0", b"v1", b"v2"]


def _principal_seen(secured, listener: str, principal: str) -> bool:
    """Whether a connection on ``listener`` is authenticated as ``principal`` (the client keeps its
    connections open, but give it a moment to open one)."""
    for _ in range(50):
        if principal in {c.auth.principal for n in secured.broker.nodes.values() for c in n.connections
                         if c.listener.name == listener}:
            return True
        time.sleep(0.1)
    return False


def _auth_error(conf: dict) -> str:
    errors: list[str] = []
    p = Producer({**conf, "error_cb": lambda e: errors.append(e.str())})
    p.produce("never", b"x")
    p.flush(3)
    return " ".join(errors)


def test_librdkafka_wrong_password_and_unknown_user(secured, pki):
    assert "Authentication failed: Invalid username or password" in _auth_error(
        _rdkafka(secured, pki, "SASL_PLAINTEXT", "PLAIN", "alice", "wrong"))
    assert ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-256") in _auth_error(_rdkafka(secured, pki, "SASL_PLAINTEXT", "SCRAM-SHA-256", "nobody", "x"))


def test_librdkafka_mtls_and_the_mapped_principal(secured, pki):
    cert, key = pki.clients["alice"]
    conf = _rdkafka(secured, pki, "SSL", **{"ssl.certificate.location": str(cert), "ssl.key.location": str(key)})
    assert _round_trip(conf) == [b"v0", b"v1", b"v2"]
    p = Producer(conf)
    p.list_topics(timeout=10)
    # CN=alice,OU=eng,O=shoal (as Java prints it) mapped by the RULE
    assert _principal_seen(secured, "SSL", "User:alice")


def test_tls_refuses_a_client_without_a_certificate_or_from_another_ca(secured, pki, tmp_path):
    no_cert = _auth_error(_rdkafka(secured, pki, "SSL"))
    assert no_cert, "a client without a certificate must fail on a listener with ssl.client.auth=required"
    other = make_pki(tmp_path / "other", clients={"mallory": {"CN": "mallory"}})
    cert, key = other.clients["mallory"]
    assert _auth_error(_rdkafka(secured, pki, "SSL", **{"ssl.certificate.location": str(cert),
                                                        "ssl.key.location": str(key)}))
    # a client trusting another CA refuses shoal's certificate
    conf = _rdkafka(secured, pki, "SASL_SSL", "PLAIN", "alice", "alice-pw")
    conf["ssl.ca.location"] = str(other.ca_cert)
    assert "certificate verify failed" in _auth_error(conf)


@pytest.mark.parametrize("mechanism", list(USERS))
def test_kafka_python_every_mechanism(secured, pki, mechanism):
    from kafka import KafkaConsumer, KafkaProducer

    user, pw = USERS[mechanism]
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    common = {"security_protocol": "SASL_SSL", "sasl_mechanism": mechanism, "sasl_plain_username": user,
              "sasl_plain_password": pw, "ssl_cafile": str(pki.ca_cert)}
    producer = KafkaProducer(bootstrap_servers=secured.bootstrap("SASL_SSL"), **common)
    producer.send(topic, b"one").get(15)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=secured.bootstrap("SASL_SSL"), auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, **common)
    assert next(iter(consumer)).value == b"one"
    consumer.close()


@pytest.mark.parametrize("mechanism", list(USERS))
def test_aiokafka_every_mechanism(secured, pki, mechanism):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    user, pw = USERS[mechanism]

    async def go():
        topic = f"aio-{uuid.uuid4().hex[:8]}"
        common = {"bootstrap_servers": secured.bootstrap("SASL_SSL"), "security_protocol": "SASL_SSL",
                  "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": pw,
                  "ssl_context": create_ssl_context(cafile=str(pki.ca_cert))}
        producer = AIOKafkaProducer(**common)
        await producer.start()
        await producer.send_and_wait(topic, b"aio")
        await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **common)
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), 15)
        finally:
            await consumer.stop()
        return msg.value

    assert asyncio.run(asyncio.wait_for(go(), 60)) == b"aio"


def test_aiokafka_mtls(secured, pki):
    from aiokafka import AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    cert, key = pki.clients["alice"]

    async def go():
        ctx = create_ssl_context(cafile=str(pki.ca_cert), certfile=str(cert), keyfile=str(key))
        producer = AIOKafkaProducer(bootstrap_servers=secured.bootstrap("SSL"), security_protocol="SSL",
                                    ssl_context=ctx)
        await producer.start()
        try:
            return (await producer.send_and_wait(f"aio-tls-{uuid.uuid4().hex[:6]}", b"x")).offset
        finally:
            await producer.stop()

    assert asyncio.run(asyncio.wait_for(go(), 60)) == 0


def test_aiokafka_wrong_password_raises(secured):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def go():
        producer = AIOKafkaProducer(bootstrap_servers=secured.bootstrap("SASL_PLAINTEXT"),
                                    security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                    sasl_plain_username="alice", sasl_plain_password="bad")
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises((KafkaError, ssl.SSLError, ConnectionError)):
        asyncio.run(asyncio.wait_for(go(), 30))


def test_librdkafka_unsecured_oauthbearer(secured, pki):
    conf = {"bootstrap.servers": secured.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": "principal=olive"}
    assert _round_trip(conf) == [b"v0", b"v1", b"v2"]
    p = Producer(conf)
    p.list_topics(timeout=10)
    assert _principal_seen(secured, "SASL_PLAINTEXT", "User:olive")


def _kafka_python_token(token: str):
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return token
    return Provider()


def test_kafka_python_oauthbearer_jwt_checked_against_the_jwks(secured, pki, signer):
    from kafka import KafkaProducer

    now = int(time.time())
    good = signer({"sub": "carol", "aud": "shoal", "iat": now, "exp": now + 600})
    common = {"bootstrap_servers": secured.bootstrap("SASL_SSL"), "security_protocol": "SASL_SSL",
              "sasl_mechanism": "OAUTHBEARER", "ssl_cafile": str(pki.ca_cert), "max_block_ms": 5000}
    producer = KafkaProducer(sasl_oauth_token_provider=_kafka_python_token(good), **common)
    assert producer.send(f"jwt-{uuid.uuid4().hex[:6]}", b"x").get(15).offset == 0
    assert _principal_seen(secured, "SASL_SSL", "User:carol")
    producer.close()


def test_aiokafka_unsecured_oauthbearer(secured):
    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider

    now = int(time.time())
    claims = _b64url(json.dumps({"sub": "otto", "iat": now, "exp": now + 600}).encode())
    unsecured = f"{_b64url(json.dumps({'alg': 'none'}).encode())}.{claims}."

    class Provider(AbstractTokenProvider):
        async def token(self) -> str:
            return unsecured

    async def go():
        producer = AIOKafkaProducer(bootstrap_servers=secured.bootstrap("SASL_PLAINTEXT"),
                                    security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                                    sasl_oauth_token_provider=Provider())
        await producer.start()
        try:
            return (await producer.send_and_wait(f"aio-oauth-{uuid.uuid4().hex[:6]}", b"x")).offset
        finally:
            await producer.stop()

    assert asyncio.run(asyncio.wait_for(go(), 60)) == 0


def test_aiokafka_refuses_bad_jwts(secured, pki, signer):
    """A wrong audience, an expired token and an altered signature each fail authentication.
    (kafka-python retries a failed bootstrap for 30 s, so the failures are checked with aiokafka.)"""
    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider
    from aiokafka.errors import KafkaError
    from aiokafka.helpers import create_ssl_context

    now = int(time.time())
    good = signer({"sub": "carol", "aud": "shoal", "iat": now, "exp": now + 600})
    bad_tokens = [signer({"sub": "carol", "aud": "other", "iat": now, "exp": now + 600}),
                  signer({"sub": "carol", "aud": "shoal", "iat": now - 900, "exp": now - 300}),
                  good.rsplit(".", 1)[0] + "." + _b64url(b"\0" * 256)]

    async def attempt(token: str) -> None:
        class Provider(AbstractTokenProvider):
            async def token(self) -> str:
                return token

        producer = AIOKafkaProducer(bootstrap_servers=secured.bootstrap("SASL_SSL"), security_protocol="SASL_SSL",
                                    sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider(),
                                    ssl_context=create_ssl_context(cafile=str(pki.ca_cert)))
        try:
            await producer.start()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(attempt(good), 30))
    for token in bad_tokens:
        with pytest.raises((KafkaError, ConnectionError)):
            asyncio.run(asyncio.wait_for(attempt(token), 30))


def test_broker_wide_ssl_client_auth_is_for_ssl_listeners_only(pki, tmp_path):
    """KIP-684, as Kafka: `ssl.client.auth=required` without a listener prefix makes SSL listeners ask
    for a certificate, not SASL_SSL ones (their clients authenticate with SASL); the prefixed form does."""
    base = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server_pem),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_cert), "ssl.client.auth": "required"}
    for extra, sasl_ok in (({}, True), ({"listener.name.sasl_ssl.ssl.client.auth": "required"}, False)):
        with EmbeddedBroker(properties={**base, **extra}, data_dir=tmp_path / str(sasl_ok)) as b:
            sasl = {"bootstrap.servers": b.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                    "ssl.ca.location": str(pki.ca_cert), "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                    "sasl.password": "alice-pw"}
            assert (_auth_error(sasl) == "") is sasl_ok
            no_cert = {"bootstrap.servers": b.bootstrap("SSL"), "security.protocol": "SSL",
                       "ssl.ca.location": str(pki.ca_cert)}
            assert _auth_error(no_cert) != ""  # the SSL listener asks for a certificate either way


def test_a_certificate_no_mapping_rule_matches_is_refused(pki, tmp_path):
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
             "ssl.principal.mapping.rules": "RULE:^CN=ops,.*$/ops/",  # no DEFAULT: other subjects have no principal
             **pki.broker_properties("SSL", client_auth="required")}
    with EmbeddedBroker(properties=props, data_dir=tmp_path / "d") as b:
        cert, key = pki.clients["alice"]
        conf = {"bootstrap.servers": b.bootstrap("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_cert),
                "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
        assert _auth_error(conf)  # refused, as Kafka refuses a principal it cannot build
        assert not _principal_seen(b, "SSL", "User:alice")
        assert _round_trip({"bootstrap.servers": b.bootstrap("PLAINTEXT")}) == [b"v0", b"v1", b"v2"]  # still serving
