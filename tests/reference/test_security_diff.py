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


# -- ACLs -----------------------------------------------------------------------------------------

ACL_PROPS = {
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw" '
        'user_admin="admin-pw" user_alice="alice-pw";',
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # User:ANONYMOUS is Kafka's own controller and inter-broker traffic on its PLAINTEXT listeners
    "super.users": "User:admin;User:ANONYMOUS",
}
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5  # resource types
READ, WRITE, CREATE, DESCRIBE, ALL = 3, 4, 5, 8, 2
LITERAL, PREFIXED, ANY_PATTERN, MATCH = 3, 4, 1, 2
ALLOW = 3


async def _login(port: int, user: str) -> RawClient:
    c = await RawClient.connect(port)
    assert (await _plain(c, user, f"{user}-pw"))[1] == 0
    return c


async def _as_alice(port: int) -> dict:
    """What alice may do: each request's errors as the broker answers them."""
    from shoal.protocol.generated.create_acls_request import CreateAclsRequest
    from shoal.protocol.generated.create_topics_request import CreateTopicsRequest
    from shoal.protocol.generated.describe_acls_request import DescribeAclsRequest
    from shoal.protocol.generated.describe_configs_request import DescribeConfigsRequest
    from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
    from shoal.protocol.generated.init_producer_id_request import InitProducerIdRequest
    from shoal.protocol.generated.list_groups_request import ListGroupsRequest
    from shoal.protocol.generated.offset_fetch_request import OffsetFetchRequest
    from shoal.protocol.generated.produce_request import ProduceRequest
    from tests.unit.broker_harness import batch, fetch_req

    c = await _login(port, "alice")
    seen: dict = {}
    md = await c.call(ApiKey.METADATA, 12, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="acl-t")], allow_auto_topic_creation=False,
        include_topic_authorized_operations=True))
    seen["metadata named"] = [(t.name, t.error_code, t.topic_authorized_operations) for t in md.topics]
    md = await c.call(ApiKey.METADATA, 12, MetadataRequest(topics=None))
    seen["metadata all"] = sorted(t.name for t in md.topics if not t.name.startswith("__"))
    pr = await c.call(ApiKey.PRODUCE, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name="acl-t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch(1))])]))
    seen["produce"] = pr.responses[0].partition_responses[0].error_code
    fe = await c.call(ApiKey.FETCH, 12, fetch_req("acl-t", 0, 0))
    seen["fetch"] = fe.responses[0].partitions[0].error_code
    fc = await c.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["g-1"]))
    seen["find coordinator"] = [x.error_code for x in fc.coordinators]
    of = await c.call(ApiKey.OFFSET_FETCH, 8, OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id="g-1", topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name="acl-t", partition_indexes=[0])])]))
    g = of.groups[0]
    seen["offset fetch"] = (g.error_code, [(t.name, [p.error_code for p in t.partitions]) for t in g.topics])
    ct = await c.call(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(timeout_ms=5000, topics=[
        CreateTopicsRequest.CreatableTopic(name="acl-new", num_partitions=1, replication_factor=1)]))
    seen["create topic"] = [(t.name, t.error_code) for t in ct.topics]
    dc = await c.call(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="acl-t", configuration_keys=None)]))
    seen["describe configs"] = dc.results[0].error_code
    da = await c.call(ApiKey.DESCRIBE_ACLS, 3, DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1))
    seen["describe acls"] = da.error_code
    ca = await c.call(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
        resource_type=TOPIC, resource_name="x", resource_pattern_type=LITERAL, principal="User:alice", host="*",
        operation=ALL, permission_type=ALLOW)]))
    seen["create acls"] = [r.error_code for r in ca.results]
    ip = await c.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(transactional_id="tx-1",
                                                                        transaction_timeout_ms=10000))
    seen["init transactional producer"] = ip.error_code
    lg = await c.call(ApiKey.LIST_GROUPS, 4, ListGroupsRequest(states_filter=[]))
    seen["list groups"] = (lg.error_code, sorted(x.group_id for x in lg.groups))
    await c.close()
    return seen


async def _acl_script(plain_port: int, sasl_port: int) -> dict:
    from shoal.protocol.generated.create_acls_request import CreateAclsRequest
    from shoal.protocol.generated.delete_acls_request import DeleteAclsRequest
    from shoal.protocol.generated.describe_acls_request import DescribeAclsRequest
    from tests.unit.broker_harness import create_req

    admin = await _login(sasl_port, "admin")
    assert (await admin.call(ApiKey.CREATE_TOPICS, 5, create_req("acl-t"))).topics[0].error_code == 0
    from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest

    for _ in range(60):  # a fresh Kafka makes __consumer_offsets on the first lookup: wait it out on both
        fc = await admin.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["w"]))
        if fc.coordinators[0].error_code == 0:
            break
        await asyncio.sleep(0.5)
    await asyncio.sleep(0.5)
    seen = {"denied": await _as_alice(sasl_port)}

    def acl(rtype: int, name: str, pattern: int, op: int) -> CreateAclsRequest.AclCreation:
        return CreateAclsRequest.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
                                             principal="User:alice", host="*", operation=op, permission_type=ALLOW)

    created = await admin.call(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[
        acl(TOPIC, "acl-", PREFIXED, WRITE), acl(TOPIC, "acl-t", LITERAL, READ), acl(GROUP, "g-", PREFIXED, READ),
        acl(TXN, "tx-1", LITERAL, WRITE), acl(CLUSTER, "kafka-cluster", LITERAL, CREATE),
        acl(TOPIC, "bad", 9, READ), acl(CLUSTER, "not-the-cluster", LITERAL, CREATE)]))
    seen["create acls"] = [(r.error_code, r.error_message) for r in created.results]
    await asyncio.sleep(1.0)  # Kafka applies ACLs through its metadata log
    described = await admin.call(ApiKey.DESCRIBE_ACLS, 3, DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1))
    seen["describe acls message"] = (described.error_code, described.error_message)
    seen["describe acls"] = sorted((r.resource_type, r.resource_name, r.pattern_type,
                                    sorted((a.principal, a.host, a.operation, a.permission_type) for a in r.acls))
                                   for r in described.resources)
    matched = await admin.call(ApiKey.DESCRIBE_ACLS, 3, DescribeAclsRequest(
        resource_type_filter=TOPIC, resource_name_filter="acl-t", pattern_type_filter=MATCH, principal_filter=None,
        host_filter=None, operation=1, permission_type=1))
    seen["describe acls matching acl-t"] = sorted((r.resource_name, r.pattern_type) for r in matched.resources)
    seen["allowed"] = await _as_alice(sasl_port)
    deleted = await admin.call(ApiKey.DELETE_ACLS, 3, DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=TOPIC, resource_name_filter=None, pattern_type_filter=ANY_PATTERN,
        principal_filter="User:alice", host_filter=None, operation=1, permission_type=1)]))
    seen["delete acls"] = [(r.error_code, r.error_message, sorted((m.resource_name, m.operation, m.error_message)
                                                                  for m in r.matching_acls))
                           for r in deleted.filter_results]
    await admin.close()
    return seen


def test_acl_answers_equal_kafkas(tmp_path):
    kafka = KafkaCluster("4", 1, tmp_path / "kafka", overrides={**COMMON_PROPERTIES, **ACL_PROPS},
                         extra_listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    kafka.start()
    try:
        on_kafka = asyncio.run(asyncio.wait_for(
            _acl_script(kafka.ports[1], kafka.listener_ports[1]["SASL_PLAINTEXT"]), 120))
    finally:
        kafka.stop()
    props = {**COMMON_PROPERTIES, **ACL_PROPS, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"}
    with EmbeddedBroker(properties=props, data_dir=tmp_path / "shoal") as shoal:
        ports = shoal.listener_ports[0]
        on_shoal = asyncio.run(asyncio.wait_for(_acl_script(ports["PLAINTEXT"], ports["SASL_PLAINTEXT"]), 120))
    differing = {k: (on_shoal[k], on_kafka[k]) for k in on_kafka if on_shoal[k] != on_kafka[k]}
    for k, (mine, theirs) in differing.items():  # the detail of nested answers, one line each
        if isinstance(theirs, dict):
            differing[k] = {kk: (mine.get(kk), vv) for kk, vv in theirs.items() if mine.get(kk) != vv}
    assert not differing, "\n".join(f"{k}: shoal, kafka = {v}" for k, v in differing.items())


# -- client quotas ------------------------------------------------------------------------------

async def _quota_script(plain_port: int) -> dict:
    from tests.unit.test_broker_quotas import alter, describe, described

    c = await RawClient.connect(plain_port)
    seen: dict = {}
    cases = {
        "ok": (([("user", "alice")], [("producer_byte_rate", 1000.0)]),
               ([("user", None), ("client-id", None)], [("consumer_byte_rate", 2000.0), ("request_percentage", 12.5)]),
               ([("client-id", "app")], [("producer_byte_rate", 5000.0)])),
        "unknown key": (([("user", "bob")], [("no_such_quota", 1.0)]),),
        "negative": (([("user", "bob")], [("producer_byte_rate", -1.0)]),),
        "fractional byte rate": (([("user", "bob")], [("consumer_byte_rate", 1.5)]),),
        "unknown entity type": (([("topic", "t")], [("producer_byte_rate", 1.0)]),),
        "user and ip": (([("user", "bob"), ("ip", "127.0.0.1")], [("producer_byte_rate", 1.0)]),),
        "removal of nothing": (([("user", "carol")], [("producer_byte_rate", None)]),),
    }
    for name, entries in cases.items():
        resp = await c.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter(*entries))
        seen[f"alter {name}"] = sorted((e.error_code, e.error_message) for e in resp.entries)
    await asyncio.sleep(1.0)  # Kafka applies the records through its metadata log
    for name, components in {"all users": (("user", 2, None),), "alice": (("user", 0, "alice"),),
                             "default user strict": (("user", 1, None),),
                             "client app": (("client-id", 0, "app"),), "any": ()}.items():
        resp = await c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, describe(*components, strict="strict" in name))
        seen[f"describe {name}"] = (resp.error_code, described(resp) if resp.error_code == 0 else resp.error_message)
    await c.close()
    return seen


def test_client_quota_answers_equal_kafkas(tmp_path):
    kafka = KafkaCluster("4", 1, tmp_path / "kafka", overrides=COMMON_PROPERTIES)
    kafka.start()
    try:
        on_kafka = asyncio.run(asyncio.wait_for(_quota_script(kafka.ports[1]), 120))
    finally:
        kafka.stop()
    with EmbeddedBroker(properties=COMMON_PROPERTIES, data_dir=tmp_path / "shoal") as shoal:
        on_shoal = asyncio.run(asyncio.wait_for(_quota_script(shoal.ports[0]), 120))
    differing = {k: (on_shoal[k], on_kafka[k]) for k in on_kafka if on_shoal[k] != on_kafka[k]}
    assert not differing, "\n".join(f"{k}: shoal, kafka = {v}" for k, v in differing.items())
