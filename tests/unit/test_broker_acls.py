"""ACLs over real sockets: CreateAcls/DescribeAcls/DeleteAcls, and what an authenticated principal
may do once Kafka's StandardAuthorizer is configured (authorizer.class.name). The decision itself
is tested in test_security_authorizer.py; here, each API's answer to a denial."""

from __future__ import annotations

import uuid

import pytest

from shoal.broker.broker import Broker
from shoal.broker.config import STANDARD_AUTHORIZER, BrokerConfig, ConfigError
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.create_acls_request import CreateAclsRequest
from shoal.protocol.generated.delete_acls_request import DeleteAclsRequest
from shoal.protocol.generated.describe_acls_request import DescribeAclsRequest
from shoal.protocol.generated.describe_cluster_request import DescribeClusterRequest
from shoal.protocol.generated.describe_configs_request import DescribeConfigsRequest
from shoal.protocol.generated.describe_groups_request import DescribeGroupsRequest
from shoal.protocol.generated.describe_log_dirs_request import DescribeLogDirsRequest
from shoal.protocol.generated.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from shoal.protocol.generated.init_producer_id_request import InitProducerIdRequest
from shoal.protocol.generated.join_group_request import JoinGroupRequest
from shoal.protocol.generated.list_groups_request import ListGroupsRequest
from shoal.protocol.generated.list_offsets_request import ListOffsetsRequest
from shoal.protocol.generated.metadata_request import MetadataRequest
from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest
from shoal.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
from shoal.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from tests.unit.broker_harness import RawClient, batch, create_req, fetch_req, produce_req, run

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-pw" user_alice="alice-pw";')
PROPS = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
         "sasl.enabled.mechanisms": "PLAIN",
         "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
         "group.initial.rebalance.delay.ms": "0"}
SECURED = {**PROPS, "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin"}

TOPIC, GROUP, CLUSTER = int(ResourceType.TOPIC), int(ResourceType.GROUP), int(ResourceType.CLUSTER)
LITERAL, PREFIXED, ALLOW, DENY = 3, 4, 3, 2


async def _broker(tmp, props: dict[str, str]) -> Broker:
    broker = Broker(BrokerConfig({**props, "log.dirs": str(tmp)}), 1)
    await broker.start()
    return broker


async def _login(broker: Broker, user: str) -> RawClient:
    """A connection authenticated as ``user`` (PLAIN over SASL_PLAINTEXT)."""
    c = await RawClient.connect(broker.nodes[broker.node_ids[0]].listener("SASL_PLAINTEXT").port)
    assert (await c.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))).error_code == 0
    resp = await c.call(ApiKey.SASL_AUTHENTICATE, 2,
                        SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{user}-pw".encode()))
    assert resp.error_code == 0
    return c


async def _anonymous(broker: Broker) -> RawClient:
    return await RawClient.connect(broker.nodes[broker.node_ids[0]].listener("PLAINTEXT").port)


def _creation(resource_type: int, name: str, principal: str, operation: AclOperation, *,
              pattern: int = LITERAL, permission: int = ALLOW, host: str = "*") -> CreateAclsRequest.AclCreation:
    return CreateAclsRequest.AclCreation(resource_type=resource_type, resource_name=name,
                                         resource_pattern_type=pattern, principal=principal, host=host,
                                         operation=int(operation), permission_type=permission)


async def _grant(admin: RawClient, *creations: CreateAclsRequest.AclCreation) -> None:
    resp = await admin.call(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=list(creations)))
    assert [(r.error_code, r.error_message) for r in resp.results] == [(0, "")] * len(creations)  # Kafka leaves "" on success


def _describe_all(version: int = 3) -> DescribeAclsRequest:
    return DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                               pattern_type_filter=LITERAL if version == 0 else 1,
                               principal_filter=None, host_filter=None, operation=1, permission_type=1)


def _metadata(*names: str, version_auto: bool = False) -> MetadataRequest:
    return MetadataRequest(topics=None if not names else [MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                           allow_auto_topic_creation=version_auto, include_topic_authorized_operations=True)


def _bits(*ops: AclOperation) -> int:
    return sum(1 << op for op in ops)


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(tmp_path):
    async def go():
        broker = await _broker(tmp_path, PROPS)
        try:
            c = await _anonymous(broker)
            for v in range(4):
                created = await c.call(ApiKey.CREATE_ACLS, v, CreateAclsRequest(creations=[
                    _creation(TOPIC, "t", "User:alice", AclOperation.READ)]))
                assert [(r.error_code, r.error_message) for r in created.results] == [
                    (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")]
                described = await c.call(ApiKey.DESCRIBE_ACLS, v, _describe_all(v))
                assert (described.error_code, described.error_message, described.resources) == (
                    ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker", [])
                deleted = await c.call(ApiKey.DELETE_ACLS, v, DeleteAclsRequest(filters=[
                    DeleteAclsRequest.DeleteAclsFilter(resource_type_filter=1, resource_name_filter=None,
                                                       pattern_type_filter=LITERAL, principal_filter=None,
                                                       host_filter=None, operation=1, permission_type=1)]))
                assert [r.error_code for r in deleted.filter_results] == [ErrorCode.SECURITY_DISABLED]
            # and everything else is allowed, as before
            assert (await c.call(ApiKey.CREATE_TOPICS, 5, create_req("open"))).topics[0].error_code == 0
            await c.close()
        finally:
            await broker.close()
    run(go())


def test_only_kafkas_standard_authorizer_is_accepted(tmp_path):
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        BrokerConfig({**PROPS, "log.dirs": str(tmp_path),
                      "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    assert BrokerConfig({**SECURED, "log.dirs": str(tmp_path)}).get("authorizer.class.name") == STANDARD_AUTHORIZER


def test_acls_are_created_described_deleted_and_survive_a_restart(tmp_path):
    async def go():
        broker = await _broker(tmp_path, SECURED)
        try:
            admin = await _login(broker, "admin")
            await _grant(admin, _creation(TOPIC, "orders", "User:alice", AclOperation.READ),
                         _creation(TOPIC, "ord", "User:alice", AclOperation.WRITE, pattern=PREFIXED),
                         _creation(GROUP, "*", "User:bob", AclOperation.READ, permission=DENY, host="10.0.0.1"))
            bad = await admin.call(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[
                _creation(CLUSTER, "other", "User:alice", AclOperation.ALTER),
                _creation(TOPIC, "", "User:alice", AclOperation.READ),
                _creation(TOPIC, "x", "alice", AclOperation.READ)]))
            assert [(r.error_code, r.error_message) for r in bad.results][:2] == [
                (ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
                (ErrorCode.INVALID_REQUEST, "Invalid empty resource name")]
            assert bad.results[2].error_code == ErrorCode.INVALID_REQUEST
            described = await admin.call(ApiKey.DESCRIBE_ACLS, 3, _describe_all())
            assert described.error_code == 0
            got = {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                    a.permission_type) for r in described.resources for a in r.acls}
            assert got == {(TOPIC, "orders", LITERAL, "User:alice", "*", AclOperation.READ, ALLOW),
                           (TOPIC, "ord", PREFIXED, "User:alice", "*", AclOperation.WRITE, ALLOW),
                           (GROUP, "*", LITERAL, "User:bob", "10.0.0.1", AclOperation.READ, DENY)}
            # MATCH: every ACL that applies to the topic "orders"
            matching = await admin.call(ApiKey.DESCRIBE_ACLS, 3, DescribeAclsRequest(
                resource_type_filter=TOPIC, resource_name_filter="orders", pattern_type_filter=2,
                principal_filter=None, host_filter=None, operation=1, permission_type=1))
            assert sorted(r.pattern_type for r in matching.resources) == [LITERAL, PREFIXED]
            # v0 knows only LITERAL patterns
            v0 = await admin.call(ApiKey.DESCRIBE_ACLS, 0, DescribeAclsRequest(
                resource_type_filter=TOPIC, resource_name_filter=None, principal_filter=None, host_filter=None,
                operation=1, permission_type=1))
            assert [(r.resource_name, r.pattern_type) for r in v0.resources] == [("orders", LITERAL)]
            deleted = await admin.call(ApiKey.DELETE_ACLS, 3, DeleteAclsRequest(filters=[
                DeleteAclsRequest.DeleteAclsFilter(resource_type_filter=GROUP, resource_name_filter=None,
                                                   pattern_type_filter=1, principal_filter="User:bob",
                                                   host_filter=None, operation=1, permission_type=1),
                DeleteAclsRequest.DeleteAclsFilter(resource_type_filter=0, resource_name_filter=None,
                                                   pattern_type_filter=1, principal_filter=None,
                                                   host_filter=None, operation=1, permission_type=1)]))
            first, unknown = deleted.filter_results
            assert [(m.resource_name, m.principal) for m in first.matching_acls] == [("*", "User:bob")]
            assert (unknown.error_code, unknown.error_message) == (ErrorCode.INVALID_REQUEST, "Unknown patternFilter.")
            await admin.close()
        finally:
            await broker.close()
        broker = await _broker(tmp_path, SECURED)
        try:
            assert {(b.pattern.name, b.entry.operation) for b in broker.metadata.acls} == {
                ("orders", AclOperation.READ), ("ord", AclOperation.WRITE)}
        finally:
            await broker.close()
    run(go())


def test_cluster_apis_are_refused_to_principals_without_cluster_acls(tmp_path):
    async def go():
        broker = await _broker(tmp_path, SECURED)
        try:
            for c in (await _login(broker, "alice"), await _anonymous(broker)):
                created = await c.call(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[
                    _creation(TOPIC, "t", "User:alice", AclOperation.ALL)]))
                assert [r.error_code for r in created.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
                described = await c.call(ApiKey.DESCRIBE_ACLS, 3, _describe_all())
                assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                dirs = await c.call(ApiKey.DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(topics=None))
                assert (dirs.error_code, dirs.results) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
                cluster = await c.call(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(
                    include_cluster_authorized_operations=True))
                assert (cluster.error_code, cluster.cluster_authorized_operations) == (0, 0)
                pid = await c.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
                    transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
                assert pid.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                await c.close()
            admin = await _login(broker, "admin")
            described = await admin.call(ApiKey.DESCRIBE_ACLS, 3, _describe_all())
            assert (described.error_code, described.resources) == (0, [])
            cluster = await admin.call(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(
                include_cluster_authorized_operations=True))
            assert cluster.cluster_authorized_operations == _bits(
                AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE)
            await admin.close()
        finally:
            await broker.close()
    run(go())


def test_topics_are_hidden_refused_then_allowed_by_acls(tmp_path):
    async def go():
        broker = await _broker(tmp_path, SECURED)
        try:
            admin = await _login(broker, "admin")
            assert (await admin.call(ApiKey.CREATE_TOPICS, 5, create_req("orders"))).topics[0].error_code == 0
            alice = await _login(broker, "alice")
            listed = await alice.call(ApiKey.METADATA, 12, _metadata())
            assert listed.topics == []
            named = await alice.call(ApiKey.METADATA, 12, _metadata("orders", "nope"))
            assert [(t.name, t.error_code, t.topic_id) for t in named.topics] == [
                ("orders", ErrorCode.TOPIC_AUTHORIZATION_FAILED, uuid.UUID(int=0)),
                ("nope", ErrorCode.TOPIC_AUTHORIZATION_FAILED, uuid.UUID(int=0))]
            produced = await alice.call(ApiKey.PRODUCE, 9, produce_req("orders", 0, batch(2)))
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            fetched = await alice.call(ApiKey.FETCH, 12, fetch_req("orders", 0, 0, max_wait=5000, min_bytes=1))
            assert fetched.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            offsets = await alice.call(ApiKey.LIST_OFFSETS, 7, ListOffsetsRequest(replica_id=-1, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name="orders", partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
            assert offsets.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            configs = await alice.call(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
                DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="orders",
                                                               configuration_keys=None)]))
            assert configs.results[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            refused = await alice.call(ApiKey.CREATE_TOPICS, 5, create_req("mine"))
            assert (refused.topics[0].error_code, refused.topics[0].error_message) == (
                ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")

            await _grant(admin, _creation(TOPIC, "orders", "User:alice", AclOperation.WRITE),
                         _creation(TOPIC, "orders", "User:alice", AclOperation.READ),
                         _creation(TOPIC, "mine", "User:alice", AclOperation.CREATE, pattern=PREFIXED))
            listed = await alice.call(ApiKey.METADATA, 12, _metadata())
            assert [t.name for t in listed.topics] == ["orders"]
            # READ and WRITE imply DESCRIBE
            assert listed.topics[0].topic_authorized_operations == _bits(
                AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)
            produced = await alice.call(ApiKey.PRODUCE, 9, produce_req("orders", 0, batch(2)))
            assert produced.responses[0].partition_responses[0].error_code == 0
            fetched = await alice.call(ApiKey.FETCH, 12, fetch_req("orders", 0, 0))
            assert fetched.responses[0].partitions[0].error_code == 0
            assert fetched.responses[0].partitions[0].records
            as_follower = fetch_req("orders", 0, 0)
            as_follower.replica_id = 1  # a follower's fetch needs the cluster's CLUSTER_ACTION
            fetched = await alice.call(ApiKey.FETCH, 12, as_follower)
            assert fetched.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            created = await alice.call(ApiKey.CREATE_TOPICS, 5, create_req("mine-1"))
            # created, but its configs are not the principal's to see (no DESCRIBE_CONFIGS)
            assert (created.topics[0].error_code, created.topics[0].topic_config_error_code,
                    created.topics[0].configs) == (0, ErrorCode.TOPIC_AUTHORIZATION_FAILED, [])
            # a DENY wins over an ALLOW, and the anonymous user has no ACL at all
            await _grant(admin, _creation(TOPIC, "orders", "User:alice", AclOperation.WRITE, permission=DENY))
            produced = await alice.call(ApiKey.PRODUCE, 9, produce_req("orders", 0, batch(1)))
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            anonymous = await _anonymous(broker)
            assert (await anonymous.call(ApiKey.METADATA, 12, _metadata())).topics == []
            for c in (admin, alice, anonymous):
                await c.close()
        finally:
            await broker.close()
    run(go())


def test_groups_need_their_acls(tmp_path):
    async def go():
        broker = await _broker(tmp_path, SECURED)
        try:
            admin = await _login(broker, "admin")
            assert (await admin.call(ApiKey.CREATE_TOPICS, 5, create_req("events"))).topics[0].error_code == 0
            alice = await _login(broker, "alice")
            found = await alice.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                key_type=0, coordinator_keys=["g1"]))
            assert found.coordinators[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            join = JoinGroupRequest(group_id="g1", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                    member_id="", protocol_type="consumer", protocols=[
                                        JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
            assert (await alice.call(ApiKey.JOIN_GROUP, 5, join)).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            commit = OffsetCommitRequest(group_id="g1", generation_id_or_member_epoch=-1, member_id="", topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name="events", partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)])])
            denied = await alice.call(ApiKey.OFFSET_COMMIT, 8, commit)
            assert denied.topics[0].partitions[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            await _grant(admin, _creation(GROUP, "g", "User:alice", AclOperation.READ, pattern=PREFIXED))
            found = await alice.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                key_type=0, coordinator_keys=["g1"]))
            assert found.coordinators[0].error_code == 0  # READ implies DESCRIBE
            # the group is allowed now, the topic not yet
            denied = await alice.call(ApiKey.OFFSET_COMMIT, 8, commit)
            assert denied.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            await _grant(admin, _creation(TOPIC, "events", "User:alice", AclOperation.READ))
            assert (await alice.call(ApiKey.OFFSET_COMMIT, 8, commit)).topics[0].partitions[0].error_code == 0
            commit.group_id = "hidden"
            assert (await admin.call(ApiKey.OFFSET_COMMIT, 8, commit)).topics[0].partitions[0].error_code == 0
            # listings show only the groups the principal may DESCRIBE (the cluster's DESCRIBE: all)
            listed = await alice.call(ApiKey.LIST_GROUPS, 3, ListGroupsRequest())
            assert [g.group_id for g in listed.groups] == ["g1"]
            listed = await admin.call(ApiKey.LIST_GROUPS, 3, ListGroupsRequest())
            assert sorted(g.group_id for g in listed.groups) == ["g1", "hidden"]
            described = await alice.call(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(
                groups=["g1", "hidden"], include_authorized_operations=True))
            assert [(g.group_id, g.error_code, g.authorized_operations) for g in described.groups][0] == (
                "g1", 0, _bits(AclOperation.READ, AclOperation.DESCRIBE))
            assert described.groups[1].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            await alice.close()
            await admin.close()
        finally:
            await broker.close()
    run(go())


def test_allow_everyone_if_no_acl_found(tmp_path):
    async def go():
        broker = await _broker(tmp_path, {**SECURED, "allow.everyone.if.no.acl.found": "true"})
        try:
            anonymous = await _anonymous(broker)
            assert (await anonymous.call(ApiKey.CREATE_TOPICS, 5, create_req("free"))).topics[0].error_code == 0
            produced = await anonymous.call(ApiKey.PRODUCE, 9, produce_req("free", 0, batch(1)))
            assert produced.responses[0].partition_responses[0].error_code == 0
            # once an ACL names the topic, only it decides
            admin = await _login(broker, "admin")
            await _grant(admin, _creation(TOPIC, "free", "User:alice", AclOperation.WRITE))
            produced = await anonymous.call(ApiKey.PRODUCE, 9, produce_req("free", 0, batch(1)))
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            await anonymous.close()
            await admin.close()
        finally:
            await broker.close()
    run(go())


def test_transactional_ids_need_write(tmp_path):
    async def go():
        broker = await _broker(tmp_path, SECURED)
        try:
            admin = await _login(broker, "admin")
            assert (await admin.call(ApiKey.CREATE_TOPICS, 5, create_req("txn-out"))).topics[0].error_code == 0
            alice = await _login(broker, "alice")
            init = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000, producer_id=-1,
                                         producer_epoch=-1)
            denied = await alice.call(ApiKey.INIT_PRODUCER_ID, 4, init)
            assert denied.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            found = await alice.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                key_type=1, coordinator_keys=["tx"]))
            assert found.coordinators[0].error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            request = produce_req("txn-out", 0, batch(1))
            request.transactional_id = "tx"
            produced = await alice.call(ApiKey.PRODUCE, 9, request)
            assert produced.responses[0].partition_responses[0].error_code == \
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            await _grant(admin, _creation(int(ResourceType.TRANSACTIONAL_ID), "tx", "User:alice", AclOperation.WRITE))
            found = await alice.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                key_type=1, coordinator_keys=["tx"]))
            assert found.coordinators[0].error_code == 0
            assert (await alice.call(ApiKey.INIT_PRODUCER_ID, 4, init)).error_code == 0
            await alice.close()
            await admin.close()
        finally:
            await broker.close()
    run(go())


def test_describe_topic_partitions_refuses_and_hides_topics(tmp_path):
    async def go():
        broker = await _broker(tmp_path, SECURED)
        try:
            admin = await _login(broker, "admin")
            for name in ("orders", "secret"):
                assert (await admin.call(ApiKey.CREATE_TOPICS, 5, create_req(name))).topics[0].error_code == 0
            await _grant(admin, _creation(TOPIC, "orders", "User:alice", AclOperation.DESCRIBE))
            alice = await _login(broker, "alice")
            named = await alice.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, DescribeTopicPartitionsRequest(topics=[
                DescribeTopicPartitionsRequest.TopicRequest(name=n) for n in ("secret", "orders")]))
            assert [(t.name, t.error_code, t.topic_authorized_operations) for t in named.topics] == [
                ("orders", 0, _bits(AclOperation.DESCRIBE)),
                ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED, -2147483648)]
            listed = await alice.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, DescribeTopicPartitionsRequest(topics=[]))
            assert [t.name for t in listed.topics] == ["orders"]
            await alice.close()
            await admin.close()
        finally:
            await broker.close()
    run(go())
