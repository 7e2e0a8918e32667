"""DescribeConfigs / DescribeCluster / CreateTopics with configs, as admin clients ask for them."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from kafka.admin import ConfigResource as KPConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient


def test_confluent_admin_configs_and_cluster(shoal_cluster):
    admin = AdminClient({"bootstrap.servers": shoal_cluster.bootstrap})
    fs = admin.create_topics([NewTopic("cfg", 3, 1, config={"retention.ms": "12345", "cleanup.policy": "compact"})])
    fs["cfg"].result(15)
    res = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "cfg")])
    entries = next(iter(res.values())).result(15)
    assert entries["retention.ms"].value == "12345"
    assert entries["cleanup.policy"].value == "compact"
    assert entries["segment.bytes"].value == "1073741824" and entries["segment.bytes"].is_default
    cluster = admin.describe_cluster().result(15)
    assert sorted(n.id for n in cluster.nodes) == sorted(shoal_cluster.ports)
    assert cluster.controller.id in shoal_cluster.ports
    admin.create_partitions([NewPartitions("cfg", 5)])["cfg"].result(15)
    assert len(admin.list_topics("cfg", timeout=10).topics["cfg"].partitions) == 5
    bad = admin.create_topics([NewTopic("cfg2", 1, 1, config={"retention.ms": "soon"})])
    try:
        bad["cfg2"].result(15)
        raise AssertionError("an invalid config value must be refused")
    except Exception as e:  # confluent_kafka raises KafkaException(INVALID_CONFIG)
        assert "INVALID_CONFIG" in str(e) or "Invalid" in str(e)
    admin.delete_topics(["cfg"])["cfg"].result(15)
    assert "cfg" not in admin.list_topics(timeout=10).topics


def test_kafka_python_admin_describe_configs(shoal):
    admin = KafkaAdminClient(bootstrap_servers=shoal.bootstrap)
    try:
        from kafka.admin import NewTopic as KPNewTopic

        admin.create_topics([KPNewTopic("kcfg", 2, 1, topic_configs={"max.message.bytes": "5000"})])
        out = admin.describe_configs([KPConfigResource(ConfigResourceType.TOPIC, "kcfg")])
        text = repr(out)
        assert "max.message.bytes" in text and "5000" in text
        brokers = admin.describe_configs([KPConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all")
        assert "num.partitions" in repr(brokers)
    finally:
        admin.close()
