"""The admin APIs declare the ACL checks Kafka's KafkaApis / ControllerApis make for them."""

from __future__ import annotations

from shoal.broker.apis import Access, ApiRegistry
from shoal.protocol.acl_operations import AclOperation as Op
from shoal.protocol.acl_operations import ResourceType as Res
from shoal.protocol.generated.api_keys import ApiKey

TOPIC, CLUSTER = Res.TOPIC, Res.CLUSTER
EXPECTED = {
    ApiKey.CREATE_TOPICS: {(TOPIC, Op.CREATE), (CLUSTER, Op.CREATE)},
    ApiKey.DELETE_TOPICS: {(TOPIC, Op.DELETE)},
    ApiKey.CREATE_PARTITIONS: {(TOPIC, Op.ALTER)},
    ApiKey.DESCRIBE_CONFIGS: {(TOPIC, Op.DESCRIBE_CONFIGS), (CLUSTER, Op.DESCRIBE_CONFIGS)},
    ApiKey.ALTER_CONFIGS: {(TOPIC, Op.ALTER_CONFIGS), (CLUSTER, Op.ALTER_CONFIGS)},
    ApiKey.INCREMENTAL_ALTER_CONFIGS: {(TOPIC, Op.ALTER_CONFIGS), (CLUSTER, Op.ALTER_CONFIGS)},
    ApiKey.DELETE_RECORDS: {(TOPIC, Op.DELETE)},
    ApiKey.ELECT_LEADERS: {(CLUSTER, Op.ALTER)},
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: {(CLUSTER, Op.ALTER)},
    ApiKey.ALTER_REPLICA_LOG_DIRS: {(CLUSTER, Op.ALTER)},
    ApiKey.LIST_PARTITION_REASSIGNMENTS: {(CLUSTER, Op.DESCRIBE)},
    ApiKey.DESCRIBE_LOG_DIRS: {(CLUSTER, Op.DESCRIBE)},
    ApiKey.DESCRIBE_QUORUM: {(CLUSTER, Op.DESCRIBE)},
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: {(TOPIC, Op.DESCRIBE)},
}


def test_admin_apis_declare_kafkas_access_checks() -> None:
    registry = ApiRegistry.default()
    for key, expected in EXPECTED.items():
        api = registry.get(key)
        assert api is not None, key.name
        assert {(a.resource, a.operation) for a in api.access} == expected, key.name
        assert all(isinstance(a, Access) for a in api.access)
