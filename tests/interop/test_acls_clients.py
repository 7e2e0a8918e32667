"""ACLs with clients others wrote: confluent-kafka's (librdkafka) and kafka-python's admin ACL calls,
and a librdkafka producer and consumer refused by the authorizer, then allowed once ACLs grant them.
One shoal broker with Kafka's StandardAuthorizer, PLAIN users admin (a super user) and alice."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from shoal.testing.embedded import EmbeddedBroker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-pw" user_alice="alice-pw";')
PROPS = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
         "sasl.enabled.mechanisms": "PLAIN",
         "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
         "authorizer.class.name": AUTHORIZER, "super.users": "User:admin"}


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker(properties=PROPS) as b:
        yield b


def _conf(broker: EmbeddedBroker, user: str) -> dict:
    return {"bootstrap.servers": broker.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-pw"}


def _admin(broker: EmbeddedBroker, user: str = "admin") -> AdminClient:
    return AdminClient(_conf(broker, user))


def _create(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings), request_timeout=15).values():
        future.result()


def _allow(resource: ResourceType, name: str, operation: AclOperation, principal: str = "User:alice",
           pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def _all_of(principal: str) -> AclBindingFilter:
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                            AclOperation.ANY, AclPermissionType.ANY)


def test_confluent_admin_creates_describes_and_deletes_acls(broker):
    admin = _admin(broker)
    principal = f"User:c-{uuid.uuid4().hex[:6]}"
    _create(admin, _allow(ResourceType.TOPIC, "orders", AclOperation.READ, principal),
            _allow(ResourceType.GROUP, "app-", AclOperation.READ, principal, ResourcePatternType.PREFIXED),
            AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, principal, "10.1.2.3",
                       AclOperation.WRITE, AclPermissionType.DENY))
    described = admin.describe_acls(_all_of(principal), request_timeout=15).result()
    assert {(b.restype, b.name, b.resource_pattern_type, b.host, b.operation, b.permission_type)
            for b in described} == {
        (ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "*", AclOperation.READ, AclPermissionType.ALLOW),
        (ResourceType.GROUP, "app-", ResourcePatternType.PREFIXED, "*", AclOperation.READ, AclPermissionType.ALLOW),
        (ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, "10.1.2.3", AclOperation.WRITE,
         AclPermissionType.DENY)}
    only_topics = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, principal, None,
                                   AclOperation.ANY, AclPermissionType.ANY)
    deleted = list(admin.delete_acls([only_topics], request_timeout=15).values())[0].result()
    assert sorted(b.name for b in deleted) == ["*", "orders"]
    left = admin.describe_acls(_all_of(principal), request_timeout=15).result()
    assert [(b.restype, b.name) for b in left] == [(ResourceType.GROUP, "app-")]
    # an invalid binding is refused with Kafka's error
    bad = AclBinding(ResourceType.BROKER, "other", ResourcePatternType.LITERAL, principal, "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException, match="only valid name for the CLUSTER resource"):
        _create(admin, bad)


def test_a_user_without_cluster_acls_may_not_manage_acls(broker):
    _create(_admin(broker), _allow(ResourceType.TOPIC, "alice-own", AclOperation.READ))
    alice = _admin(broker, "alice")
    # the broker answers CLUSTER_AUTHORIZATION_FAILED (tests/unit/test_broker_acls.py); librdkafka
    # 2.x does not surface DescribeAcls' top-level error and reports no ACLs: nothing is revealed
    assert alice.describe_acls(_all_of("User:alice"), request_timeout=15).result() == []
    with pytest.raises(KafkaException) as e:
        _create(alice, _allow(ResourceType.TOPIC, "anything", AclOperation.ALL))
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def _produce(broker: EmbeddedBroker, topic: str) -> KafkaError | None:
    """Produce one message as alice: None, or the delivery error."""
    errors: list[KafkaError | None] = []
    producer = Producer({**_conf(broker, "alice"), "message.timeout.ms": 10000})
    producer.produce(topic, b"v", callback=lambda err, msg: errors.append(err))
    producer.flush(20)
    assert len(errors) == 1
    return errors[0]


def _consume_one(broker: EmbeddedBroker, topic: str, group: str, timeout: float = 20) -> tuple[bytes | None, int | None]:
    """Subscribe as alice: (the first value, None) or (None, the first error code)."""
    consumer = Consumer({**_conf(broker, "alice"), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.time() + timeout
        while time.time() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return None, msg.error().code()
            return msg.value(), None
        return None, None
    finally:
        consumer.close()


def test_producer_and_consumer_are_refused_then_allowed(broker):
    admin = _admin(broker)
    topic, group = f"acl-{uuid.uuid4().hex[:8]}", f"grp-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=15).values():
        f.result()
    error = _produce(broker, topic)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _create(admin, _allow(ResourceType.TOPIC, topic, AclOperation.WRITE))
    assert _produce(broker, topic) is None

    _create(admin, _allow(ResourceType.TOPIC, topic, AclOperation.READ))
    value, code = _consume_one(broker, topic, group)
    assert (value, code) == (None, KafkaError.GROUP_AUTHORIZATION_FAILED)
    _create(admin, _allow(ResourceType.GROUP, group, AclOperation.READ))
    assert _consume_one(broker, topic, group) == (b"v", None)


def test_kafka_python_admin_acls(broker):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="admin", sasl_plain_password="admin-pw")
    try:
        principal = f"User:kp-{uuid.uuid4().hex[:6]}"
        acl = ACL(principal=principal, host="*", operation=ACLOperation.DESCRIBE,
                  permission_type=ACLPermissionType.ALLOW,
                  resource_pattern=ResourcePattern(KResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED))
        created = admin.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        acl_filter = ACLFilter(principal=principal, host=None, operation=ACLOperation.ANY,
                               permission_type=ACLPermissionType.ANY,
                               resource_pattern=ResourcePatternFilter(KResourceType.ANY, None,
                                                                      ACLResourcePatternType.ANY))
        found, error = admin.describe_acls(acl_filter)
        assert error.errno == 0
        assert [(a.resource_pattern.resource_name, a.operation) for a in found] == [("kp-", ACLOperation.DESCRIBE)]
        deleted = admin.delete_acls([acl_filter])
        (_, matched, delete_error), = deleted
        assert delete_error.errno == 0 and [a.principal for a in matched] == [principal]
        assert admin.describe_acls(acl_filter)[0] == []
    finally:
        admin.close()


def test_without_an_authorizer_confluent_admin_sees_security_disabled():
    with EmbeddedBroker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        with pytest.raises(KafkaException) as e:
            _create(admin, _allow(ResourceType.TOPIC, "t", AclOperation.READ))
        assert e.value.args[0].code() == KafkaError.SECURITY_DISABLED
