"""SASL listeners over real sockets, byte by byte: what a connection may send before it has
authenticated, Kafka's answers to each failure, re-authentication (KIP-368), and SCRAM users
managed over the wire. Real clients' SASL is in tests/interop/test_security_clients.py."""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest

from shoal.broker.broker import Broker
from shoal.broker.config import BrokerConfig, ConfigError
from shoal.broker.security.scram import salted_password
from shoal.protocol.generated.alter_user_scram_credentials_request import AlterUserScramCredentialsRequest
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.api_versions_request import ApiVersionsRequest
from shoal.protocol.generated.describe_configs_request import DescribeConfigsRequest
from shoal.protocol.generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from shoal.protocol.generated.metadata_request import MetadataRequest
from shoal.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
from shoal.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from tests.unit.broker_harness import RawClient, create_req, run

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-pw" user_admin="admin-pw" user_alice="alice-pw";')
SASL_PROPS = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
              "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
              "group.initial.rebalance.delay.ms": "0"}


async def _broker(tmp, **props: str) -> Broker:
    broker = Broker(BrokerConfig({**SASL_PROPS, "log.dirs": str(tmp), **props}), 1)
    await broker.start()
    return broker


def _ports(broker: Broker) -> tuple[int, int]:
    node = broker.nodes[broker.node_ids[0]]
    return node.listener("PLAINTEXT").port, node.listener("SASL_PLAINTEXT").port


async def _plain_login(c: RawClient, user: str, password: str, version: int = 2):
    hs = await c.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    assert hs.error_code == 0
    return await c.call(ApiKey.SASL_AUTHENTICATE, version,
                        SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))


def _metadata() -> MetadataRequest:
    return MetadataRequest(topics=None, allow_auto_topic_creation=False)


def test_each_listener_answers_with_its_own_addresses(tmp_path):
    async def go():
        broker = await _broker(tmp_path)
        plain, sasl = _ports(broker)
        try:
            c = await RawClient.connect(plain)
            md = await c.call(ApiKey.METADATA, 12, _metadata())
            assert [b.port for b in md.brokers] == [plain]
            s = await RawClient.connect(sasl)
            assert (await _plain_login(s, "alice", "alice-pw")).error_code == 0
            md = await s.call(ApiKey.METADATA, 12, _metadata())
            assert [b.port for b in md.brokers] == [sasl]
            await c.close()
            await s.close()
        finally:
            await broker.close()
    run(go())


def test_requests_before_authentication_close_the_connection_and_change_nothing(tmp_path):
    async def go():
        broker = await _broker(tmp_path)
        _, sasl = _ports(broker)
        try:
            c = await RawClient.connect(sasl)
            versions = await c.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
                client_software_name="t", client_software_version="1"))  # allowed before the handshake
            assert versions.error_code == 0
            await c.send_raw(_frame(ApiKey.CREATE_TOPICS, 5, create_req("sneaky").encode(5)))
            assert await c.is_closed()
            assert "sneaky" not in broker.metadata.topics
            # after a v1 handshake, only SaslAuthenticate may follow
            c = await RawClient.connect(sasl)
            assert (await c.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))).error_code == 0
            await c.send_raw(_frame(ApiKey.METADATA, 12, _metadata().encode(12)))
            assert await c.is_closed()
        finally:
            await broker.close()
    run(go())


def test_unknown_mechanism_gets_the_enabled_list_then_the_connection_closes(tmp_path):
    async def go():
        broker = await _broker(tmp_path)
        _, sasl = _ports(broker)
        try:
            c = await RawClient.connect(sasl)
            hs = await c.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
            assert (hs.error_code, hs.mechanisms) == (33, ["PLAIN", "SCRAM-SHA-256"])  # UNSUPPORTED_SASL_MECHANISM
            assert await c.is_closed()
        finally:
            await broker.close()
    run(go())


def test_plain_success_and_kafkas_answer_to_a_wrong_password(tmp_path):
    async def go():
        broker = await _broker(tmp_path)
        _, sasl = _ports(broker)
        try:
            c = await RawClient.connect(sasl)
            ok = await _plain_login(c, "alice", "alice-pw")
            assert (ok.error_code, ok.session_lifetime_ms) == (0, 0)
            assert (await c.call(ApiKey.METADATA, 12, _metadata())).brokers
            conns = {conn.auth.principal for conn in broker.nodes[0].connections}
            assert "User:alice" in conns
            bad = await RawClient.connect(sasl)
            resp = await _plain_login(bad, "alice", "nope")
            assert (resp.error_code, resp.error_message) == (58, "Authentication failed: Invalid username or password")
            assert await bad.is_closed()
            unknown = await RawClient.connect(sasl)
            resp = await _plain_login(unknown, "mallory", "alice-pw")
            assert resp.error_code == 58
        finally:
            await broker.close()
    run(go())


def test_v0_handshake_then_raw_tokens(tmp_path):
    async def go():
        broker = await _broker(tmp_path)
        _, sasl = _ports(broker)
        try:
            c = await RawClient.connect(sasl)
            hs = await c.call(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"))
            assert hs.error_code == 0
            await c.send_raw(_sized(b"\0admin\0admin-pw"))
            assert await c.read_frame() == b""  # PLAIN's empty answer, framed by its size
            assert (await c.call(ApiKey.METADATA, 12, _metadata())).brokers
            bad = await RawClient.connect(sasl)
            await bad.call(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"))
            await bad.send_raw(_sized(b"\0admin\0wrong"))
            assert await bad.is_closed()
        finally:
            await broker.close()
    run(go())


def test_frames_before_authentication_are_bounded_by_sasl_server_max_receive_size(tmp_path):
    async def go():
        broker = await _broker(tmp_path, **{"sasl.server.max.receive.size": "1024"})
        _, sasl = _ports(broker)
        try:
            c = await RawClient.connect(sasl)
            await c.send_raw(struct.pack(">i", 100_000) + b"\0" * 2000)  # claims 100 kB before authenticating
            assert await c.is_closed()
            ok = await RawClient.connect(sasl)
            assert (await _plain_login(ok, "alice", "alice-pw")).error_code == 0
            big = create_req("t" * 200, configs={"retention.ms": "1" * 1000})  # over 1 KiB once authenticated
            resp = await ok.call(ApiKey.CREATE_TOPICS, 5, big)
            assert resp.topics[0].error_code != 0 or resp.topics  # answered, not closed
        finally:
            await broker.close()
    run(go())


def test_reauthentication_extends_the_session_and_an_expired_session_is_closed(tmp_path):
    async def go():
        broker = await _broker(tmp_path, **{"connections.max.reauth.ms": "600"})
        _, sasl = _ports(broker)
        try:
            c = await RawClient.connect(sasl)
            first = await _plain_login(c, "alice", "alice-pw")
            assert first.session_lifetime_ms == 600
            again = await _plain_login(c, "alice", "alice-pw")  # KIP-368: same mechanism, same user
            assert (again.error_code, again.session_lifetime_ms) == (0, 600)
            assert (await c.call(ApiKey.METADATA, 12, _metadata())).brokers
            other = await _plain_login(c, "admin", "admin-pw")
            assert other.error_code == 58
            assert other.error_message == "Cannot change principals during re-authentication from User.alice: User.admin"
            assert await c.is_closed()
            late = await RawClient.connect(sasl)
            await _plain_login(late, "alice", "alice-pw")
            await asyncio.sleep(0.8)  # past the session's lifetime without re-authenticating
            await late.send_raw(_frame(ApiKey.METADATA, 12, _metadata().encode(12)))
            assert await late.is_closed()
        finally:
            await broker.close()
    run(go())


def test_sasl_handshake_on_a_plaintext_listener_is_an_illegal_state(tmp_path):
    async def go():
        broker = await _broker(tmp_path)
        plain, _ = _ports(broker)
        try:
            c = await RawClient.connect(plain)
            hs = await c.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
            assert hs.error_code == 34  # ILLEGAL_SASL_STATE
            assert (await c.call(ApiKey.METADATA, 12, _metadata())).brokers  # still open
        finally:
            await broker.close()
    run(go())


def _upsert(user: str, mechanism: int = 1, iterations: int = 4096, password: str = "pw"):
    salt = b"0123456789abcdef"
    name = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-256")
    return AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=user, mechanism=mechanism, iterations=iterations, salt=salt,
        salted_password=salted_password(name, password, salt, max(iterations, 1)))


def test_scram_credentials_are_validated_as_kafka_and_survive_a_restart(tmp_path):
    Req = AlterUserScramCredentialsRequest

    async def go():
        broker = await _broker(tmp_path)
        plain, _ = _ports(broker)
        try:
            c = await RawClient.connect(plain)
            resp = await c.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, Req(deletions=[
                Req.ScramCredentialDeletion(name="ghost", mechanism=1)], upsertions=[
                _upsert("bob"), _upsert("few", iterations=100), _upsert("many", iterations=20000),
                _upsert("", iterations=4096), _upsert("odd", mechanism=9), _upsert("twice"), _upsert("twice")]))
            got = {r.user: (r.error_code, r.error_message) for r in resp.results}
            assert got == {"bob": (0, None), "few": (93, "Too few iterations"), "many": (93, "Too many iterations"),
                           "": (93, "Username must not be empty"), "odd": (33, "Unknown SCRAM mechanism"),
                           "twice": (92, "A user credential cannot be altered twice in the same request"),
                           "ghost": (91, "Attempt to delete a user credential that does not exist")}
            desc = await c.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, DescribeUserScramCredentialsRequest(
                users=[DescribeUserScramCredentialsRequest.UserName(name=n) for n in ("bob", "nobody")]))
            by_user = {r.user: r for r in desc.results}
            assert [(i.mechanism, i.iterations) for i in by_user["bob"].credential_infos] == [(1, 4096)]
            assert by_user["nobody"].error_code == 91
        finally:
            await broker.close()
        broker = await _broker(tmp_path)  # the credential is in the metadata log
        try:
            assert broker.metadata.scram.get("bob", "SCRAM-SHA-256") is not None
        finally:
            await broker.close()
    run(go())


def test_describe_configs_never_shows_a_secret(tmp_path):
    async def go():
        broker = await _broker(tmp_path)
        plain, _ = _ports(broker)
        try:
            c = await RawClient.connect(plain)
            resp = await c.call(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
                DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="0",
                                                               configuration_keys=None)], include_synonyms=True))
            entries = {e.name: e for e in resp.results[0].configs}
            jaas = entries["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
            assert (jaas.value, jaas.is_sensitive, jaas.config_type) == (None, True, 9)  # PASSWORD
            assert all(s.value is None for s in jaas.synonyms)
            assert "admin-pw" not in repr(resp.results[0].configs)
        finally:
            await broker.close()
    run(go())


@pytest.mark.parametrize("props, message", [
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": ""}, "plain.sasl.jaas.config"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": "PlainLoginModule required user_a=\"x\""},
     "semi-colon"),
    ({"listeners": "PLAINTEXT://127.0.0.1:0,CLIENT://127.0.0.1:0"}, "no security protocol defined for listener CLIENT"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "/k.jks"}, "PEM"),
    ({"listeners": "SSL://127.0.0.1:0"}, "ssl.keystore.location"),
])
def test_bad_security_config_is_a_clear_error(tmp_path, props, message):
    with pytest.raises(ConfigError, match=message):
        Broker(BrokerConfig({**SASL_PROPS, "log.dirs": str(tmp_path), **props}), 1)


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    from shoal.protocol.framing import encode_request
    return encode_request(api_key, version, 99, "raw-test", body)


def _sized(token: bytes) -> bytes:
    return struct.pack(">i", len(token)) + token


def test_a_client_that_stops_mid_handshake_is_closed_in_bounded_time(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="shoal.broker")

    async def go():
        broker = await _broker(tmp_path, **{"connections.max.idle.ms": "400", "request.read.timeout.ms": "400"})
        _, sasl = _ports(broker)
        try:
            silent = await RawClient.connect(sasl)  # a handshake, then nothing
            assert (await silent.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))).error_code == 0
            partial = await RawClient.connect(sasl)  # half a SaslAuthenticate frame, then nothing
            await partial.send_raw(struct.pack(">i", 200) + b"\0\x24\0\x02")
            assert await silent.is_closed(timeout=5) and await partial.is_closed(timeout=5)
            bad = await RawClient.connect(sasl)
            await _plain_login(bad, "alice", "not-her-password")
        finally:
            await broker.close()
    run(go())
    assert "Failed authentication with 127.0.0.1" in caplog.text
    assert "not-her-password" not in caplog.text
