"""shoal's own client with security configured as Kafka's Java client is: sync and asyncio producers
and consumers and the admin client against an embedded broker's SASL_PLAINTEXT, SASL_SSL and SSL
(client certificates required) listeners. Every mechanism, TLS key stores from a file and inline,
Kafka's messages for a wrong password, an unknown mechanism or a refused certificate (raised at
once, not retried), and KIP-368 re-authentication against a broker that ends sessions after 1.5 s."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

pytest.importorskip("cryptography")

from confluent_kafka.admin import AdminClient as RdAdminClient  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from shoal.client import AdminClient, AIOConsumer, AIOProducer, Consumer, NewTopic, Producer  # noqa: E402
from shoal.client.config import ADMIN_DEFAULTS, make_config  # noqa: E402
from shoal.client.conn import BrokerConnection  # noqa: E402
from shoal.client.errors import (  # noqa: E402
    KafkaConnectionError,
    SaslAuthenticationFailed,
    SslAuthenticationFailed,
)
from shoal.client.protocol import request_class  # noqa: E402
from shoal.client.security import ClientSecurity  # noqa: E402
from shoal.protocol.generated.api_keys import ApiKey  # noqa: E402
from shoal.testing.embedded import EmbeddedBroker  # noqa: E402
from shoal.testing.tls_certs import make_pki  # noqa: E402

pytestmark = pytest.mark.timeout(120)

BROKER_PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                     'user_alice="alice-pw" user_admin="admin-pw";')
BROKER_OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
USERS = {"PLAIN": ("alice", "alice-pw"), "SCRAM-SHA-256": ("sam", "sam-pw"), "SCRAM-SHA-512": ("sue", "sue-pw")}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]


def client_jaas(mechanism: str, password: str | None = None, **oauth: str) -> str:
    if mechanism == "OAUTHBEARER":
        options = {"unsecuredLoginStringClaim_sub": "olivia", **oauth}
        return ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";")
    user, pw = USERS[mechanism]
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    return (f"org.apache.kafka.common.security.{module} required "
            f'username="{user}" password="{password if password is not None else pw}";')


def _listener_props(listeners: list[str], pki: Any) -> dict[str, str]:
    props: dict[str, str] = {}
    for name in listeners:
        if name.startswith("SASL"):
            props[f"listener.name.{name.lower()}.plain.sasl.jaas.config"] = BROKER_PLAIN_JAAS
            props[f"listener.name.{name.lower()}.oauthbearer.sasl.jaas.config"] = BROKER_OAUTH_JAAS
    if "SASL_SSL" in listeners:
        props.update(pki.broker_properties("SASL_SSL"))
    if "SSL" in listeners:
        props.update(pki.broker_properties("SSL", client_auth="required"))
    return props


def _add_scram_users(broker: EmbeddedBroker) -> None:
    admin = RdAdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, ScramCredentialInfo(getattr(ScramMechanism, mech.replace("-", "_")), 4096),
                                     pw.encode())
        for mech, (user, pw) in USERS.items() if mech != "PLAIN"])
    for f in futures.values():
        f.result(15)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"), clients={"alice": {"O": "shoal", "CN": "alice"}})


@pytest.fixture(scope="module")
def secured(pki):
    listeners = ["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"]
    props = {"listeners": ",".join(f"{n}://127.0.0.1:0" for n in listeners),
             "sasl.enabled.mechanisms": ",".join(MECHANISMS), **_listener_props(listeners, pki)}
    with EmbeddedBroker(properties=props) as b:
        _add_scram_users(b)
        yield b


@pytest.fixture(scope="module")
def reauth_broker(pki):
    """Sessions end after 1.5 s: a connection that does not re-authenticate is closed by its next request."""
    listeners = ["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"]
    props = {"listeners": ",".join(f"{n}://127.0.0.1:0" for n in listeners),
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
             "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
             "connections.max.reauth.ms": "1500", **_listener_props(listeners, pki)}
    with EmbeddedBroker(properties=props) as b:
        _add_scram_users(b)
        yield b


def conf_for(broker: EmbeddedBroker, pki: Any, protocol: str, mechanism: str | None = None,
             password: str | None = None, **extra: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": broker.bootstrap(protocol), "security.protocol": protocol}
    if mechanism:
        conf.update({"sasl.mechanism": mechanism, "sasl.jaas.config": client_jaas(mechanism, password)})
    if "SSL" in protocol:
        conf.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_cert)})
    conf.update(extra)
    return conf


def _topic() -> str:
    return f"sec-{uuid.uuid4().hex[:8]}"


def drain(consumer: Consumer, want: int, timeout: float = 20.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want:
        assert time.monotonic() < deadline, f"only {len(got)} of {want} records within {timeout}s"
        for records in consumer.poll(200).values():
            got.extend(r.value for r in records)
    return got


def sync_round_trip(conf: dict[str, Any], n: int = 3) -> list[bytes]:
    topic = _topic()
    with Producer(conf) as producer:
        futures = [producer.send(topic, f"v{i}".encode()) for i in range(n)]
        producer.flush(20)
        assert all(f.done() for f in futures)
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        return sorted(drain(consumer, n))
    finally:
        consumer.close()


def _connections(client: Any) -> list[BrokerConnection]:
    return [c for c in client._conns.values() if not c.closed]


# -- every mechanism, sync and asyncio --------------------------------------------------------


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sync_producer_consumer_every_mechanism(secured, pki, protocol, mechanism):
    assert sync_round_trip(conf_for(secured, pki, protocol, mechanism)) == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("protocol, mechanism", [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "OAUTHBEARER"),
                                                 ("SASL_SSL", "PLAIN"), ("SSL", None)])
def test_asyncio_producer_consumer(secured, pki, protocol, mechanism):
    extra: dict[str, Any] = {}
    if protocol == "SSL":
        cert, key = pki.clients["alice"]
        extra = {"ssl.keystore.type": "PEM", "ssl.keystore.key": key.read_text(),
                 "ssl.keystore.certificate.chain": cert.read_text()}
    conf = conf_for(secured, pki, protocol, mechanism, **extra)
    topic = _topic()

    async def run() -> list[bytes]:
        async with AIOProducer(conf) as producer:
            futures = [await producer.send(topic, f"a{i}".encode()) for i in range(3)]
            await asyncio.wait_for(asyncio.gather(*futures), 20)
        async with AIOConsumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"}) as consumer:
            consumer.subscribe([topic])
            got: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(got) < 3 and time.monotonic() < deadline:
                for records in (await consumer.poll(200)).values():
                    got.extend(r.value for r in records)
            return sorted(got)

    assert asyncio.run(run()) == [b"a0", b"a1", b"a2"]


@pytest.mark.parametrize("protocol, mechanism", [("SASL_SSL", "SCRAM-SHA-256"), ("SASL_PLAINTEXT", "PLAIN"),
                                                 ("SSL", None)])
def test_admin_client(secured, pki, protocol, mechanism, tmp_path):
    extra: dict[str, Any] = {}
    if protocol == "SSL":
        cert, key = pki.clients["alice"]
        keystore = tmp_path / "alice-keystore.pem"  # a PEM key store: the key and its chain in one file
        keystore.write_text(key.read_text() + cert.read_text())
        extra = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore)}
    admin = AdminClient(conf_for(secured, pki, protocol, mechanism, **extra))
    try:
        topic = _topic()
        assert admin.create_topics([NewTopic(topic, 2, 1)]) == {topic: None}
        assert sorted(admin.list_topics()[topic]) == [0, 1]
        assert admin.describe_cluster().brokers
    finally:
        admin.close()


def test_ssl_client_certificate_from_a_pem_keystore_file(secured, pki, tmp_path):
    cert, key = pki.clients["alice"]
    keystore = tmp_path / "alice.pem"
    keystore.write_text(key.read_text() + cert.read_text())
    conf = conf_for(secured, pki, "SSL", **{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
                                            "ssl.endpoint.identification.algorithm": ""})
    assert sync_round_trip(conf) == [b"v0", b"v1", b"v2"]


def test_ssl_inline_truststore(secured, pki):
    conf = conf_for(secured, pki, "SASL_SSL", "PLAIN")
    del conf["ssl.truststore.location"]
    conf["ssl.truststore.certificates"] = pki.ca_cert.read_text()
    assert sync_round_trip(conf, n=1) == [b"v0"]


# -- failures: raised promptly, with Kafka's messages ------------------------------------------


def _fails_fast(make: Any, error: type[Exception], match: str, bound: float = 8.0) -> Exception:
    started = time.monotonic()
    with pytest.raises(error, match=match) as info:
        make()
    assert time.monotonic() - started < bound, "an authentication failure must not be retried until a deadline"
    return info.value


@pytest.mark.parametrize("cls", [Producer, Consumer, AdminClient])
def test_wrong_password_plain(secured, pki, cls):
    def make() -> None:
        client = cls(conf_for(secured, pki, "SASL_SSL", "PLAIN", password="wrong", **{"group.id": "g"}))
        try:
            if cls is Consumer:
                client.subscribe([_topic()])
                client.poll(1000)
            elif cls is AdminClient:
                client.list_topics()
        finally:
            client.close()

    err = _fails_fast(make, SaslAuthenticationFailed, "^Authentication failed: Invalid username or password$")
    assert err.error_code == 58


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_scram(secured, pki, mechanism):
    conf = conf_for(secured, pki, "SASL_PLAINTEXT", mechanism, password="wrong")
    _fails_fast(lambda: Producer(conf).close(), SaslAuthenticationFailed,
                f"^Authentication failed during authentication due to invalid credentials with SASL mechanism "
                f"{mechanism}$")


def test_wrong_password_asyncio_producer_send(secured, pki):
    conf = conf_for(secured, pki, "SASL_PLAINTEXT", "SCRAM-SHA-256", password="wrong")

    async def run() -> None:
        producer = AIOProducer(conf)
        try:
            await producer.start()
        finally:
            await producer.close()

    _fails_fast(lambda: asyncio.run(run()), SaslAuthenticationFailed, "invalid credentials")


def test_unsupported_mechanism(reauth_broker, pki):
    conf = conf_for(reauth_broker, pki, "SASL_PLAINTEXT", "SCRAM-SHA-256")
    _fails_fast(lambda: AdminClient(conf).list_topics(), SaslAuthenticationFailed,
                r"^Client SASL mechanism 'SCRAM-SHA-256' not enabled in the server, enabled mechanisms are "
                r"\[PLAIN, OAUTHBEARER\]$")


def test_oauthbearer_expired_token_refused(secured, pki):
    conf = conf_for(secured, pki, "SASL_PLAINTEXT", None, **{
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": client_jaas("OAUTHBEARER", unsecuredLoginLifetimeSeconds="-10")})
    _fails_fast(lambda: AdminClient(conf).list_topics(), SaslAuthenticationFailed, '"status":"invalid_token"')


def test_ssl_without_client_certificate(secured, pki):
    # With TLS 1.3 the broker refuses a missing certificate after the client's handshake is done, by
    # closing the connection: the client (like Java's, which reports "terminated during authentication")
    # sees a closed connection, retries within its own deadline, and says what may be wrong.
    conf = conf_for(secured, pki, "SSL", **{"request.timeout.ms": 1500})
    err = _fails_fast(lambda: AdminClient(conf), KafkaConnectionError, "before it answered ApiVersions")
    assert "refused this client's certificate" in str(err)


def test_ssl_untrusted_broker_certificate(secured, pki, tmp_path):
    other = make_pki(tmp_path / "other")
    conf = conf_for(secured, pki, "SASL_SSL", "PLAIN", **{"ssl.truststore.location": str(other.ca_cert)})
    _fails_fast(lambda: Producer(conf).close(), SslAuthenticationFailed, "CERTIFICATE_VERIFY_FAILED")
    # No trust store: the system's CAs, which do not know the test CA either.
    conf = conf_for(secured, pki, "SASL_SSL", "PLAIN")
    del conf["ssl.truststore.location"], conf["ssl.truststore.type"]
    _fails_fast(lambda: Producer(conf).close(), SslAuthenticationFailed, "CERTIFICATE_VERIFY_FAILED")


@pytest.mark.parametrize("algorithm", ["https", ""])
def test_ssl_endpoint_identification(secured, pki, monkeypatch, algorithm):
    """The broker's certificate names localhost and 127.0.0.1; the client is made to expect another
    name: refused with "https" (Kafka's default), accepted with "" (no host name check)."""
    host, port = secured.bootstrap("SASL_SSL").rsplit(":", 1)
    conf = make_config(ADMIN_DEFAULTS, conf_for(secured, pki, "SASL_SSL", "PLAIN", **{
        "ssl.endpoint.identification.algorithm": algorithm}))
    monkeypatch.setattr(ClientSecurity, "server_hostname", lambda self, h: "broker.example.com")

    async def connect() -> None:
        conn = BrokerConnection(host, int(port), -1, conf)
        try:
            await conn.connect()
        finally:
            conn.close()

    if algorithm:
        with pytest.raises(SslAuthenticationFailed, match="Hostname mismatch|doesn't match|CERTIFICATE_VERIFY_FAILED"):
            asyncio.run(connect())
    else:
        asyncio.run(connect())


# -- KIP-368 re-authentication -----------------------------------------------------------------


def test_connection_without_reauthentication_is_closed(reauth_broker, pki, monkeypatch):
    """The control experiment: the broker does end sessions, so the tests below mean something."""
    host, port = reauth_broker.bootstrap("SASL_PLAINTEXT").rsplit(":", 1)
    conf = make_config(ADMIN_DEFAULTS, conf_for(reauth_broker, pki, "SASL_PLAINTEXT", "PLAIN"))
    metadata = request_class(ApiKey.METADATA)

    async def two_requests(reauthenticate: bool) -> BrokerConnection:
        conn = BrokerConnection(host, int(port), -1, conf)
        if not reauthenticate:
            conn._begin_reauthentication = lambda: None  # type: ignore[method-assign]
        await conn.connect()
        try:
            assert conn.session_lifetime_ms == 1500
            await conn.send(metadata(topics=[]))
            await asyncio.sleep(1.8)
            await conn.send(metadata(topics=[]))
            return conn
        finally:
            conn.close()

    assert asyncio.run(two_requests(True)).reauthentications == 1
    with pytest.raises(KafkaConnectionError):
        asyncio.run(two_requests(False))


def test_requests_during_reauthentication_are_held_then_written(reauth_broker, pki):
    host, port = reauth_broker.bootstrap("SASL_SSL").rsplit(":", 1)
    conf = make_config(ADMIN_DEFAULTS, conf_for(reauth_broker, pki, "SASL_SSL", "SCRAM-SHA-512"))
    metadata = request_class(ApiKey.METADATA)

    async def run() -> None:
        conn = BrokerConnection(host, int(port), -1, conf)
        await conn.connect()
        try:
            assert conn._reauth_timer is not None
            conn._reauth_timer.cancel()  # re-authenticate now, with a request on the wire
            first = conn.send_nowait(metadata(topics=[]))
            conn._begin_reauthentication()
            second = conn.send_nowait(metadata(topics=[]))
            assert conn._held is not None and len(conn._held) == 1 and conn.in_flight == 2
            assert first is not None and second is not None
            await asyncio.wait_for(first, 5)
            await asyncio.wait_for(second, 5)
            assert conn.reauthentications == 1 and conn._held is None
            assert conn._reauth_timer is not None  # the next one is scheduled
        finally:
            conn.close()

    asyncio.run(run())


@pytest.mark.parametrize("protocol, mechanism", [("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256"),
                                                 ("SASL_SSL", "OAUTHBEARER")])
def test_producer_and_consumer_keep_working_across_reauthentication(reauth_broker, pki, protocol, mechanism):
    conf = conf_for(reauth_broker, pki, protocol, mechanism)
    topic = _topic()
    producer = Producer(conf)
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 300,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    try:
        consumer.subscribe([topic])
        sent = 0
        got: list[bytes] = []
        started = time.monotonic()
        while time.monotonic() - started < 4.0:  # more than two session lifetimes
            producer.send(topic, f"r{sent}".encode()).result(10)
            sent += 1
            for records in consumer.poll(100).values():
                got.extend(r.value for r in records)
        got.extend(drain(consumer, sent - len(got)))
        assert sorted(got, key=lambda v: int(v[1:])) == [f"r{i}".encode() for i in range(sent)]
        producer_conns = _connections(producer._core.client)
        assert producer_conns and all(c.reauthentications >= 1 for c in producer_conns)
        assert any(c.reauthentications >= 2 for c in producer_conns)
        assert any(c.reauthentications >= 2 for c in _connections(consumer._core.client))
    finally:
        consumer.close()
        producer.close()


def test_oauthbearer_token_lifetime_bounds_the_session(reauth_broker, pki):
    """A token living 1 s: the broker's session ends with it, the client makes a new token each time."""
    conf = conf_for(reauth_broker, pki, "SASL_PLAINTEXT", None, **{
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": client_jaas("OAUTHBEARER", unsecuredLoginLifetimeSeconds="1")})
    admin = AdminClient(conf)
    try:
        topic = _topic()
        admin.create_topics([NewTopic(topic, 1, 1)])
        started = time.monotonic()
        while time.monotonic() - started < 3.2:
            assert topic in admin.list_topics()
            time.sleep(0.2)
        conns = _connections(admin._core.client)
        assert conns and all(c.session_lifetime_ms <= 1000 for c in conns)
        assert all(c.reauthentications >= 3 for c in conns)
    finally:
        admin.close()


def test_asyncio_consumer_long_poll_during_reauthentication(reauth_broker, pki):
    """Fetches waiting on the broker when re-authentication is due: it waits for them, holds new
    requests, and writes them after; the consumer sees every record."""
    conf = conf_for(reauth_broker, pki, "SASL_SSL", "SCRAM-SHA-512")
    topic = _topic()

    async def run() -> tuple[list[bytes], int]:
        async with AIOProducer(conf) as producer, AIOConsumer(
                {**conf, "group.id": topic, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 1000}) as consumer:
            consumer.subscribe([topic])
            got: list[bytes] = []
            started = time.monotonic()
            n = 0
            while time.monotonic() - started < 3.5:
                if n < 10:
                    await (await producer.send(topic, f"x{n}".encode()))
                    n += 1
                for records in (await consumer.poll(400)).values():
                    got.extend(r.value for r in records)
            while len(got) < n and time.monotonic() - started < 20:
                for records in (await consumer.poll(400)).values():
                    got.extend(r.value for r in records)
            reauths = max(c.reauthentications for c in _connections(consumer.client))
            return sorted(got), reauths

    got, reauths = asyncio.run(run())
    assert got == sorted(f"x{i}".encode() for i in range(10))
    assert reauths >= 2
