"""KIP-430: asked for authorized operations, a broker without an authorizer reports every
operation the resource supports (Kafka's AclEntry.supportedOperations); not asked, none."""

from __future__ import annotations

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

TOPIC_OPS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
             AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
CLUSTER_OPS = {AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
               AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE}
GROUP_OPS = {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
             AclOperation.ALTER_CONFIGS}


def test_authorized_operations_with_confluent_admin(shoal):
    admin = AdminClient({"bootstrap.servers": shoal.bootstrap})
    admin.create_topics([NewTopic("ops", 1, 1)])["ops"].result(30)
    described = admin.describe_topics(TopicCollection(["ops"]), include_authorized_operations=True)["ops"].result(30)
    assert set(described.authorized_operations) == TOPIC_OPS
    plain = admin.describe_topics(TopicCollection(["ops"]))["ops"].result(30)
    assert not plain.authorized_operations
    cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert set(cluster.authorized_operations) == CLUSTER_OPS
    groups = admin.describe_consumer_groups(["ops-group"], include_authorized_operations=True)
    assert set(groups["ops-group"].result(30).authorized_operations) == GROUP_OPS
