"""IncrementalAlterConfigs and AlterConfigs from real admin clients: topic configs applied live and
kept across restarts, dynamic broker configs (cluster default and per node) with Kafka's config
sources, and Kafka's errors for bad changes."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as KPConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient


def incremental(admin: AdminClient, rtype, name: str, ops: list[tuple[str, str | None, AlterConfigOpType]]):
    res = ConfigResource(rtype, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])
    return admin.incremental_alter_configs([res])[res]


def alter_raw(bs: str, rtype: int, name: str, key: str, value: str | None, op: int = 0) -> tuple[int, str | None]:
    """One IncrementalAlterConfigs over the wire (librdkafka cannot name broker resource "" and waits for a
    broker id that does not exist): (error code, message)."""
    from shoal.protocol.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest as R
    from shoal.tools.wire import ToolClient

    with ToolClient(bs) as c:
        resp = c.node(c.all_nodes()[0]).send(R(resources=[R.AlterConfigsResource(
            resource_type=rtype, resource_name=name, configs=[R.AlterableConfig(name=key, config_operation=op,
                                                                                value=value)])],
            validate_only=False))
    r = resp.responses[0]
    return r.error_code, r.error_message


def describe(admin: AdminClient, rtype, name: str) -> dict:
    res = ConfigResource(rtype, name)
    return admin.describe_configs([res])[res].result(15)


def earliest_offset(bs: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bs, "group.id": "probe"})
    from confluent_kafka import TopicPartition

    low, _ = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    return low


def test_topic_configs_applied_live_and_kept_across_restart(shoal_factory):
    # Retention checks every 200 ms (Kafka's default is 5 min), so the new retention.ms shows soon.
    shoal = shoal_factory(overrides={"log.retention.check.interval.ms": "200"})
    bs = shoal.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("live", 1, 1)])["live"].result(15)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for _ in range(20):
        p.produce("live", b"x" * 100)
        p.flush(10)  # one batch each
    # Small segments and a short retention: old segments go at the next retention check.
    incremental(admin, ConfigResource.Type.TOPIC, "live", [
        ("segment.bytes", "1024", AlterConfigOpType.SET), ("retention.ms", "100", AlterConfigOpType.SET),
        ("cleanup.policy", "compact", AlterConfigOpType.APPEND)]).result(15)
    entries = describe(admin, ConfigResource.Type.TOPIC, "live")
    assert entries["retention.ms"].value == "100"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete,compact"
    incremental(admin, ConfigResource.Type.TOPIC, "live", [
        ("cleanup.policy", "compact", AlterConfigOpType.SUBTRACT)]).result(15)
    assert describe(admin, ConfigResource.Type.TOPIC, "live")["cleanup.policy"].value == "delete"
    time.sleep(0.3)
    for _ in range(20):  # rolls segments under the new segment.bytes
        p.produce("live", b"y" * 100)
        p.flush(10)
    deadline = time.monotonic() + 20
    while earliest_offset(bs, "live") == 0 and time.monotonic() < deadline:
        time.sleep(0.3)
    assert earliest_offset(bs, "live") > 0  # retention.ms=100 applied without a restart
    shoal.restart()
    entries = describe(AdminClient({"bootstrap.servers": shoal.bootstrap}), ConfigResource.Type.TOPIC, "live")
    assert entries["retention.ms"].value == "100" and entries["segment.bytes"].value == "1024"
    # DELETE returns to the default.
    admin = AdminClient({"bootstrap.servers": shoal.bootstrap})
    incremental(admin, ConfigResource.Type.TOPIC, "live", [("retention.ms", None, AlterConfigOpType.DELETE)]).result(15)
    entries = describe(admin, ConfigResource.Type.TOPIC, "live")
    assert entries["retention.ms"].value == "604800000"
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_dynamic_broker_configs(shoal):
    admin = AdminClient({"bootstrap.servers": shoal.bootstrap})
    admin.create_topics([NewTopic("plain", 1, 1), NewTopic("own", 1, 1, config={"retention.ms": "5000"})])["plain"] \
        .result(15)
    assert alter_raw(shoal.bootstrap, 4, "", "log.retention.ms", "7200000") == (0, None)
    t = describe(admin, ConfigResource.Type.TOPIC, "plain")["retention.ms"]
    assert t.value == "7200000" and t.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert describe(admin, ConfigResource.Type.TOPIC, "own")["retention.ms"].value == "5000"  # its own wins
    incremental(admin, ConfigResource.Type.BROKER, "0", [
        ("log.retention.ms", "3600000", AlterConfigOpType.SET)]).result(15)
    b = describe(admin, ConfigResource.Type.BROKER, "0")["log.retention.ms"]
    assert b.value == "3600000" and b.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value and not b.is_read_only
    shoal.restart()
    admin = AdminClient({"bootstrap.servers": shoal.bootstrap})
    assert describe(admin, ConfigResource.Type.TOPIC, "plain")["retention.ms"].value == "3600000"
    # A config Kafka cannot change at runtime, an unknown node, a bad value, a null: Kafka's errors.
    bs = shoal.bootstrap
    assert alter_raw(bs, 4, "0", "num.partitions", "5") == (
        42, "Cannot update these configs dynamically: Set(num.partitions)")
    assert alter_raw(bs, 4, "7", "log.retention.ms", "1")[0] == 42
    assert alter_raw(bs, 4, "x", "log.retention.ms", "1") == (42, "Node id must be an integer, but it is: x")
    code, message = alter_raw(bs, 4, "0", "log.retention.ms", "soon")
    assert code == 42 and "log.retention.ms" in message
    assert alter_raw(bs, 4, "0", "log.retention.ms", None) == (42, "Null value not supported for : log.retention.ms")
    assert alter_raw(bs, 4, "0", "log.retention.ms", "1", op=9) == (42, "Unknown operations type 9")
    with pytest.raises(KafkaException, match="INVALID_REQUEST"):  # and as librdkafka reports it
        incremental(admin, ConfigResource.Type.BROKER, "0", [("num.partitions", "5", AlterConfigOpType.SET)]) \
            .result(15)
    assert describe(admin, ConfigResource.Type.TOPIC, "plain")["retention.ms"].value == "3600000"  # unchanged


def test_kafkas_other_dynamic_broker_configs_are_kept(shoal):
    """Kafka's dynamic broker configs that shoal does not act on (thread pools, cleaner tuning,
    SASL login settings) are accepted, typed, kept across a restart and reported as Kafka does;
    librdkafka's admin test alters one of them."""
    admin = AdminClient({"bootstrap.servers": shoal.bootstrap})
    b = describe(admin, ConfigResource.Type.BROKER, "0")["sasl.kerberos.min.time.before.relogin"]
    assert b.value == "60000" and b.source == ConfigSource.DEFAULT_CONFIG.value and not b.is_read_only
    assert alter_raw(shoal.bootstrap, 4, "0", "sasl.kerberos.min.time.before.relogin", "58000") == (0, None)
    assert alter_raw(shoal.bootstrap, 4, "", "num.io.threads", "4") == (0, None)
    code, message = alter_raw(shoal.bootstrap, 4, "0", "log.cleaner.io.buffer.load.factor", "lots")
    assert code == 42 and "log.cleaner.io.buffer.load.factor" in message
    shoal.restart()
    admin = AdminClient({"bootstrap.servers": shoal.bootstrap})
    entries = describe(admin, ConfigResource.Type.BROKER, "0")
    assert entries["sasl.kerberos.min.time.before.relogin"].value == "58000"
    assert entries["sasl.kerberos.min.time.before.relogin"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert entries["num.io.threads"].value == "4"
    assert entries["num.io.threads"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


def test_topic_config_errors(shoal):
    admin = AdminClient({"bootstrap.servers": shoal.bootstrap})
    admin.create_topics([NewTopic("errs", 1, 1)])["errs"].result(15)
    cases = [("errs", [("no.such.config", "1", AlterConfigOpType.SET)], "INVALID_CONFIG"),
             ("errs", [("retention.ms", "soon", AlterConfigOpType.SET)], "INVALID_CONFIG"),
             ("errs", [("retention.ms", "1", AlterConfigOpType.APPEND)], "INVALID_CONFIG"),
             ("missing", [("retention.ms", "1", AlterConfigOpType.SET)], "UNKNOWN_TOPIC_OR_PART")]
    for topic, ops, code in cases:
        with pytest.raises(KafkaException, match=code):
            incremental(admin, ConfigResource.Type.TOPIC, topic, ops).result(15)
    assert describe(admin, ConfigResource.Type.TOPIC, "errs")["retention.ms"].value == "604800000"  # unchanged


def test_legacy_alter_configs_from_kafka_python(shoal):
    admin = KafkaAdminClient(bootstrap_servers=shoal.bootstrap)
    try:
        from kafka.admin import NewTopic as KPNewTopic

        admin.create_topics([KPNewTopic("legacy", 1, 1, topic_configs={"retention.ms": "1000"})])
        # kafka-python's default (IncrementalAlterConfigs): the other configs stay.
        admin.alter_configs([KPConfigResource(ConfigResourceType.TOPIC, "legacy",
                                              configs={"segment.ms": "60000"})])
        entries = describe(AdminClient({"bootstrap.servers": shoal.bootstrap}), ConfigResource.Type.TOPIC, "legacy")
        assert entries["segment.ms"].value == "60000" and entries["retention.ms"].value == "1000"
        # Forced to AlterConfigs, kafka-python sends the whole set (adding the dynamic configs it read).
        admin.alter_configs([KPConfigResource(ConfigResourceType.TOPIC, "legacy",
                                              configs={"max.message.bytes": "5000"})], incremental=False)
    finally:
        admin.close()
    entries = describe(AdminClient({"bootstrap.servers": shoal.bootstrap}), ConfigResource.Type.TOPIC, "legacy")
    assert entries["max.message.bytes"].value == "5000" and entries["retention.ms"].value == "1000"
    # AlterConfigs itself replaces the set: what the request leaves out goes back to its default.
    from shoal.protocol.generated.alter_configs_request import AlterConfigsRequest as R
    from shoal.tools.wire import ToolClient

    with ToolClient(shoal.bootstrap) as c:
        resp = c.node(0).send(R(resources=[R.AlterConfigsResource(
            resource_type=2, resource_name="legacy", configs=[R.AlterableConfig(name="retention.ms", value="2000")])],
            validate_only=False))
    assert resp.responses[0].error_code == 0
    entries = describe(AdminClient({"bootstrap.servers": shoal.bootstrap}), ConfigResource.Type.TOPIC, "legacy")
    assert entries["retention.ms"].value == "2000" and entries["max.message.bytes"].value == "1048588"
    assert entries["segment.ms"].value == "604800000"
