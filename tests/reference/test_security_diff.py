"""SASL side by side: Apache Kafka 4.x and shoal, configured with the same properties, answer the
same exchanges with the same errors, messages and closed connections.

Each broker runs a PLAINTEXT and a SASL_PLAINTEXT listener (PLAIN from the JAAS config, SCRAM-SHA-256
users made over the wire, `connections.max.reauth.ms` set); one script of raw exchanges runs
against each, and what each broker answered is compared as a whole.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import struct

import pytest

from shoal.protocol.framing import encode_request
from shoal.protocol.generated.alter_user_scram_credentials_request import AlterUserScramCredentialsRequest
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.api_versions_request import ApiVersionsRequest
from shoal.protocol.generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from shoal.protocol.generated.metadata_request import MetadataRequest
from shoal.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
from shoal.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from shoal.testing.embedded import EmbeddedBroker
from tests.reference.apache_kafka import KafkaCluster
from tests.reference.fixtures import COMMON_PROPERTIES
from tests.unit.broker_harness import RawClient

pytestmark = pytest.mark.reference

PROPS = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw" '
        'user_admin="admin-pw" user_alice="alice-pw";',
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "connections.max.reauth.ms": "30000",
}
SALT = b"salt-for-the-test"


def _salted(password: str, iterations: int = 4096) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), SALT, iterations)


async def _plain(c: RawClient, user: str, password: str, version: int = 1):
    hs = await c.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    auth = await c.call(ApiKey.SASL_AUTHENTICATE, version,
                        SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))
    return hs.error_code, auth.error_code, auth.error_message, auth.session_lifetime_ms


async def _scram(port: int, user: str, password: str) -> tuple:
    """A whole SCRAM-SHA-256 exchange, the client side computed here (RFC 5802)."""
    c = await RawClient.connect(port)
    hs = await c.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
    first_bare = f"n={user},r=clientnonce123"
    first = await c.call(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"n,," + first_bare.encode()))
    if first.error_code:
        return hs.error_code, first.error_code, first.error_message, await c.is_closed()
    server_first = first.auth_bytes.decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth_message, "sha256")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    final = await c.call(ApiKey.SASL_AUTHENTICATE, 2,
                         SaslAuthenticateRequest(auth_bytes=f"{without_proof},p={proof}".encode()))
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    verified = final.auth_bytes == b"v=" + base64.b64encode(hmac.digest(server_key, auth_message, "sha256"))
    result = (hs.error_code, final.error_code, final.error_message, verified)
    await c.close()
    return result


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    return encode_request(api_key, version, 7, "diff", body)


async def _script(plain_port: int, sasl_port: int) -> dict:
    seen: dict = {}
    c = await RawClient.connect(plain_port)
    versions = await c.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="diff",
                                                                       client_software_version="1"))
    seen["versions"] = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys
                        if k.api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
                                         ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)}
    hs = await c.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    seen["handshake on plaintext"] = (hs.error_code, list(hs.mechanisms))
    auth = await c.call(ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=b"\0a\0b"))
    seen["authenticate on plaintext"] = (auth.error_code, auth.error_message)
    Req = AlterUserScramCredentialsRequest
    up = Req.ScramCredentialUpsertion
    alter = await c.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, Req(
        deletions=[Req.ScramCredentialDeletion(name="ghost", mechanism=1)],
        upsertions=[up(name="bob", mechanism=1, iterations=4096, salt=SALT, salted_password=_salted("bob-pw")),
                    up(name="few", mechanism=1, iterations=100, salt=SALT, salted_password=_salted("x", 100)),
                    up(name="odd", mechanism=9, iterations=4096, salt=SALT, salted_password=_salted("x"))]))
    seen["alter scram"] = sorted((r.user, r.error_code, r.error_message) for r in alter.results)
    await asyncio.sleep(0.5)  # Kafka applies the records through its metadata log
    describe = await c.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, DescribeUserScramCredentialsRequest(
        users=[DescribeUserScramCredentialsRequest.UserName(name=n) for n in ("bob", "nobody")]))
    seen["describe scram"] = sorted((r.user, r.error_code, r.error_message,
                                     [(i.mechanism, i.iterations) for i in r.credential_infos])
                                    for r in describe.results)
    await c.close()

    s = await RawClient.connect(sasl_port)
    await s.send_raw(_frame(ApiKey.METADATA, 12, MetadataRequest(topics=None).encode(12)))
    seen["metadata before handshake closes"] = await s.is_closed()
    s = await RawClient.connect(sasl_port)
    hs = await s.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
    seen["unknown mechanism"] = (hs.error_code, list(hs.mechanisms), await s.is_closed())
    s = await RawClient.connect(sasl_port)
    seen["wrong password"] = (*await _plain(s, "alice", "nope"), await s.is_closed())
    s = await RawClient.connect(sasl_port)
    seen["plain"] = await _plain(s, "alice", "alice-pw")
    md = await s.call(ApiKey.METADATA, 12, MetadataRequest(topics=None))
    seen["metadata port is the listener's"] = [b.port == sasl_port for b in md.brokers]
    seen["re-authenticate as someone else"] = (*await _plain(s, "admin", "admin-pw"), await s.is_closed())
    s = await RawClient.connect(sasl_port)
    await s.call(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"))
    await s.send_raw(struct.pack(">i", 15) + b"\0alice\0alice-pw")
    seen["v0 raw token answer"] = await s.read_frame()
    seen["after v0"] = len((await s.call(ApiKey.METADATA, 12, MetadataRequest(topics=None))).brokers)
    await s.close()
    seen["scram"] = await _scram(sasl_port, "bob", "bob-pw")
    seen["scram wrong password"] = await _scram(sasl_port, "bob", "bad")
    seen["scram unknown user"] = await _scram(sasl_port, "nobody", "x")
    return seen


def test_sasl_answers_equal_kafkas(tmp_path):
    kafka = KafkaCluster("4", 1, tmp_path / "kafka", overrides={**COMMON_PROPERTIES, **PROPS},
                         extra_listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    kafka.start()
    try:
        on_kafka = asyncio.run(asyncio.wait_for(
            _script(kafka.ports[1], kafka.listener_ports[1]["SASL_PLAINTEXT"]), 120))
    finally:
        kafka.stop()
    props = {**COMMON_PROPERTIES, **PROPS, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"}
    with EmbeddedBroker(properties=props, data_dir=tmp_path / "shoal") as shoal:
        ports = shoal.listener_ports[0]
        on_shoal = asyncio.run(asyncio.wait_for(_script(ports["PLAINTEXT"], ports["SASL_PLAINTEXT"]), 120))
    assert on_shoal == on_kafka
