"""DescribeConfigs diffed: a fresh shoal and a fresh Apache Kafka 4.x, the same static properties,
the same fresh topic; every config both report must agree in value, source, type, sensitivity and
read-only, unless `ALLOWED` (below) names the difference and why.

Kafka reports hundreds of broker configs shoal has no use for; those are listed (not failed)
by `kafka_only_broker_configs`, and their count is in docs/compatibility.md. Topic configs must
match name for name: every topic config Kafka reports, shoal must report too.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from shoal.protocol.generated.describe_configs_request import DescribeConfigsRequest
from shoal.testing.process import BrokerProcess
from shoal.tools.wire import ToolClient
from tests.interop.txn_helpers import create_topic
from tests.reference.scenarios import wait_for

pytestmark = pytest.mark.timeout(240)

TOPIC, BROKER, GROUP = 2, 4, 32
FIELDS = ("value", "source", "type", "sensitive", "read_only", "synonyms")

# Static properties given to both brokers. num.partitions is set to its default on purpose: Kafka
# reports a property given in the file as STATIC_BROKER_CONFIG even when it equals the default.
STATIC = {"num.partitions": "1", "log.retention.hours": "100", "offsets.topic.replication.factor": "1",
          "transaction.state.log.replication.factor": "1",
          # the Kafka harness gives a one-node Kafka these (its share coordinator needs them); shoal too here
          "share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1"}
TOPIC_CONFIGS = {"retention.ms": "123456", "cleanup.policy": "compact"}

# (resource type, config name) -> (the fields allowed to differ, why). Keep every entry reasoned.
_SETUP = "set per process by the harness (ports, paths, node ids differ between the two brokers)"
ALLOWED: dict[tuple[int, str], tuple[frozenset[str], str]] = {
    (BROKER, "listeners"): (frozenset({"value", "read_only", "synonyms"}),
                            _SETUP + "; Kafka can change listeners at runtime, shoal cannot (read-only); "
                            "shoal's default listens on loopback only (PLAINTEXT://127.0.0.1:9092)"),
    (BROKER, "advertised.listeners"): (frozenset({"value", "source", "synonyms"}),
                                       _SETUP + "; Kafka's harness sets it, shoal's derives it from listeners"),
    (BROKER, "log.dirs"): (frozenset({"value", "synonyms"}),
                           _SETUP + "; shoal's default is ./shoal-data, Kafka has none (log.dir's /tmp/kafka-logs)"),
    (BROKER, "node.id"): (frozenset({"value", "source", "synonyms"}), _SETUP + "; shoal's first node is 0 by default"),
    (BROKER, "queued.max.request.bytes"): (
        frozenset({"value", "synonyms"}), "shoal bounds the request bytes it holds (512 MiB) where Kafka's -1 is unbounded: "
        "a broker that shares a process with tests must not grow without limit"),
    (BROKER, "max.connections"): (frozenset({"read_only"}),
                                  "shoal reads it when a listener starts; it cannot be altered at runtime"),
    (BROKER, "max.connections.per.ip"): (frozenset({"read_only"}),
                                         "shoal reads it when a listener starts; it cannot be altered at runtime"),
    (BROKER, "log.cleaner.backoff.ms"): (frozenset({"read_only"}),
                                         "shoal's cleaner reads it at start; not alterable at runtime"),
    (BROKER, "log.message.timestamp.after.max.ms"): (
        frozenset({"value", "synonyms"}), "Kafka 4.0 lowered the default to 1 hour (KIP-937); shoal keeps 3.x's unbounded "
        "default, which the 3.9 clients' suites expect. A decision for the lead, not a bug fix"),
    (TOPIC, "message.timestamp.after.max.ms"): (
        frozenset({"value", "synonyms"}), "the broker default above (log.message.timestamp.after.max.ms)"),
    (BROKER, "group.coordinator.rebalance.protocols"): (
        frozenset({"value", "synonyms"}), "Kafka 4.4's default also enables streams groups (KIP-1071), which shoal "
        "does not serve: shoal's default is classic,consumer"),
    (BROKER, "controller.listener.names"): (frozenset({"value", "source", "synonyms"}),
                                            _SETUP + " (Kafka's runs a KRaft controller listener)"),
    (BROKER, "listener.security.protocol.map"): (
        frozenset({"value", "source", "synonyms", "read_only"}),
        _SETUP + "; Kafka can change a listener's protocol at runtime, shoal reads it at start"),
}
# Kafka reloads a listener's TLS settings at runtime (AlterConfigs per listener); shoal builds a
# listener's TLS context when it starts, so it reports them read-only.
ALLOWED.update({(BROKER, key): (frozenset({"read_only"}), "TLS settings are read when a listener starts")
                for key in ("ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols",
                            "ssl.endpoint.identification.algorithm", "ssl.key.password",
                            "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location",
                            "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol", "ssl.truststore.certificates",
                            "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type")})

# Names only one side reports (besides Kafka's broker configs that shoal does not know).
SHOAL_ONLY: dict[tuple[int, str], str] = {
    (BROKER, "cluster.id"): "shoal keeps the cluster id as a config; KRaft Kafka keeps it in meta.properties",
    (BROKER, "log.message.format.version"): "a Kafka 3.x config (removed in 4.0), kept for 3.x tools",
    (BROKER, "log.message.timestamp.difference.max.ms"): "a Kafka 3.x config (removed in 4.0), kept for 3.x tools",
    (BROKER, "metrics.port"): "shoal's own: the Prometheus endpoint",
    (BROKER, "max.records.per.user.op"): "shoal's own: Kafka fixes it at 10,000",
    (BROKER, "log.max.open.segments"): "shoal's own: open segment files per process",
    (BROKER, "fetch.memory.max.bytes"): "shoal's own: the broker-wide fetch response budget",
    (BROKER, "request.read.timeout.ms"): "shoal's own: a request whose bytes stop arriving",
    (TOPIC, "message.downconversion.enable"): "a Kafka 3.x topic config (removed in 4.0), kept for 3.x tools",
    (TOPIC, "message.format.version"): "a Kafka 3.x topic config (removed in 4.0), kept for 3.x tools",
    (TOPIC, "message.timestamp.difference.max.ms"): "a Kafka 3.x topic config (removed in 4.0), kept for 3.x tools",
}
KAFKA_ONLY_TOPIC: dict[str, str] = {
    "max.decompressed.message.bytes": "new in Kafka 4.4: a limit on a record's decompressed size that shoal "
                                      "does not enforce, so it does not claim the config",
}


def describe(bootstrap: str, rtype: int, name: str) -> tuple[int, dict[str, dict[str, Any]]]:
    """(error code, name -> the compared fields) of one resource, DescribeConfigs v4 with synonyms."""
    with ToolClient(bootstrap) as client:
        req = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=rtype, resource_name=name, configuration_keys=None)], include_synonyms=True)
        result = client._any.send(req, 4).results[0]
    return result.error_code, {c.name: {"value": c.value, "source": c.config_source, "type": c.config_type,
                                        "sensitive": c.is_sensitive, "read_only": c.read_only,
                                        "synonyms": [(y.name, y.value, y.source) for y in c.synonyms]}
                               for c in result.configs}


def differences(rtype: int, shoal: dict[str, dict[str, Any]], kafka: dict[str, dict[str, Any]]) -> list[str]:
    """Every field of every config both report that differs and that ALLOWED does not excuse."""
    out = []
    for name in sorted(set(shoal) & set(kafka)):
        allowed = ALLOWED.get((rtype, name), (frozenset(), ""))[0]
        for f in FIELDS:
            if f not in allowed and shoal[name][f] != kafka[name][f]:
                out.append(f"{name}.{f}: shoal={shoal[name][f]!r} kafka={kafka[name][f]!r}")
    return out


@pytest.fixture(scope="module")
def fresh_pair(kafka_factory_module: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    from tests.reference.fixtures import COMMON_PROPERTIES

    shoal = BrokerProcess(tmp_path_factory.mktemp("shoal-dc") / "data", 1, {**COMMON_PROPERTIES, **STATIC})
    shoal.start()
    try:
        yield shoal.bootstrap_servers, kafka_factory_module.bootstrap_servers
    finally:
        shoal.stop()


@pytest.fixture(scope="module")
def kafka_factory_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Kafka of this module's own (fresh: no other test altered its configs)."""
    from tests.reference.apache_kafka import KafkaCluster
    from tests.reference.fixtures import COMMON_PROPERTIES

    cluster = KafkaCluster("4", 1, tmp_path_factory.mktemp("kafka-dc"), overrides={**COMMON_PROPERTIES, **STATIC})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _node(bootstrap: str) -> str:
    with ToolClient(bootstrap) as client:
        return str(client.all_nodes()[0])


@pytest.mark.reference  # Kafka runs in this module's own fixture, which the marker hook does not see
def test_broker_configs_agree(fresh_pair: tuple[str, str]) -> None:
    shoal_bs, kafka_bs = fresh_pair
    s_err, shoal = describe(shoal_bs, BROKER, _node(shoal_bs))
    k_err, kafka = describe(kafka_bs, BROKER, _node(kafka_bs))
    assert s_err == k_err == 0
    assert not differences(BROKER, shoal, kafka), "\n".join(differences(BROKER, shoal, kafka))
    unexplained = sorted(n for n in set(shoal) - set(kafka) if (BROKER, n) not in SHOAL_ONLY)
    assert not unexplained, f"shoal reports broker configs Kafka does not: {unexplained}"
    # Kafka's own configs that shoal does not know are many; what counts is that none of those
    # shoal reports differ. They are listed for docs/compatibility.md.
    kafka_only = sorted(set(kafka) - set(shoal))
    print(f"Kafka reports {len(kafka)} broker configs, shoal {len(shoal)}; {len(kafka_only)} only on Kafka:")
    print(" ".join(kafka_only))


@pytest.mark.reference
def test_cluster_default_configs_agree(fresh_pair: tuple[str, str]) -> None:
    """The cluster-wide default resource (name ""): a fresh KRaft cluster's dynamic defaults."""
    (s_err, shoal), (k_err, kafka) = (describe(bs, BROKER, "") for bs in fresh_pair)
    assert s_err == k_err == 0
    assert set(shoal) == set(kafka)
    assert not differences(BROKER, shoal, kafka), "\n".join(differences(BROKER, shoal, kafka))


@pytest.mark.reference
@pytest.mark.parametrize("configs", [TOPIC_CONFIGS, {}], ids=["own-configs", "broker-defaults"])
def test_topic_configs_agree(fresh_pair: tuple[str, str], configs: dict[str, str]) -> None:
    observed = {}
    for which, bs in zip(("shoal", "kafka"), fresh_pair, strict=True):
        topic = f"dc-{uuid.uuid4().hex[:8]}"
        create_topic(bs, topic, 1, configs=configs)
        # Kafka's CreateTopics returns before its broker has the topic in its metadata: wait for it.
        observed[which] = wait_for(lambda bs=bs, topic=topic: (r := describe(bs, TOPIC, topic))[0] == 0 and r,
                                   15, f"DescribeConfigs of {topic} on {which}")
    (s_err, shoal), (k_err, kafka) = observed["shoal"], observed["kafka"]
    assert s_err == k_err == 0
    assert not differences(TOPIC, shoal, kafka), "\n".join(differences(TOPIC, shoal, kafka))
    assert sorted(n for n in set(shoal) - set(kafka) if (TOPIC, n) not in SHOAL_ONLY) == []
    assert sorted(n for n in set(kafka) - set(shoal) if n not in KAFKA_ONLY_TOPIC) == []


@pytest.mark.reference
def test_unknown_topic_agrees(fresh_pair: tuple[str, str]) -> None:
    errors = [describe(bs, TOPIC, "no-such-topic-dc")[0] for bs in fresh_pair]
    assert errors[0] == errors[1]


def _alter_group(bootstrap: str, group: str, configs: dict[str, str | None]) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on one GROUP resource: SET each value, DELETE each None."""
    from shoal.protocol.generated.incremental_alter_configs_request import (
        IncrementalAlterConfigsRequest as Req,
    )

    with ToolClient(bootstrap) as client:
        resp = client._any.send(Req(resources=[Req.AlterConfigsResource(
            resource_type=GROUP, resource_name=group, configs=[
                Req.AlterableConfig(name=k, config_operation=1 if v is None else 0, value=v)
                for k, v in configs.items()])], validate_only=False), 1)
    r = resp.responses[0]
    return r.error_code, r.error_message


@pytest.mark.reference
def test_group_configs_agree(fresh_pair: tuple[str, str]) -> None:
    """KIP-848 group configs (resource type GROUP): the defaults, a group's overrides, Kafka's refusals."""
    group = f"dcg-{uuid.uuid4().hex[:8]}"
    (s_err, shoal), (k_err, kafka) = (describe(bs, GROUP, group) for bs in fresh_pair)
    assert (s_err, sorted(shoal)) == (k_err, sorted(kafka)) == (0, sorted(kafka))
    assert not differences(GROUP, shoal, kafka)
    for change in ({"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000",
                    "share.auto.offset.reset": "earliest"},
                   {"consumer.session.timeout.ms": None},
                   {"consumer.session.timeout.ms": "1000"}, {"consumer.heartbeat.interval.ms": "99999"},
                   {"consumer.session.timeout.ms": "x"}, {"no.such.group.config": "1"},
                   {"share.renew.acknowledge.enable": "maybe"}, {"streams.num.standby.replicas": "2"},
                   {"share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "15000"}):
        answers = [_alter_group(bs, group, change) for bs in fresh_pair]
        assert answers[0] == answers[1], change
        (_, shoal), (_, kafka) = (describe(bs, GROUP, group) for bs in fresh_pair)
        assert not differences(GROUP, shoal, kafka), change


# ---------------------------------------------------------------- the fixes, pinned without Kafka
def test_a_property_given_equal_to_its_default_is_static() -> None:
    """Kafka reports what server.properties sets as STATIC_BROKER_CONFIG, default value or not."""
    from shoal.broker.config import BrokerConfig, ConfigSource
    from shoal.broker.handlers.describe_configs import broker_layers

    static = ConfigSource.STATIC_BROKER_CONFIG
    assert broker_layers(BrokerConfig({"num.partitions": "1"}), "num.partitions")[0] == ("1", static)
    assert broker_layers(BrokerConfig({}), "num.partitions")[0][1] != static


def test_list_and_int_broker_config_types() -> None:
    """Kafka's ConfigDef types: listeners and log.dirs are lists, the listen backlog an int."""
    from shoal.broker.config_types import INT, LIST, config_type

    assert [config_type(n) for n in ("listeners", "advertised.listeners", "log.dirs")] == [LIST] * 3
    assert config_type("socket.listen.backlog.size") == INT


def test_kafka_4_topic_configs_are_accepted() -> None:
    """Kafka 4.x's tiered-storage and dead-letter topic configs: accepted, kept, reported."""
    from shoal.broker.config import BrokerConfig
    from shoal.broker.topic_configs import broker_topic_defaults, log_config_defaults, topic_log_config

    new = {"remote.copy.lag.bytes": "10", "remote.copy.lag.ms": "5", "remote.log.copy.disable": "true",
           "remote.log.delete.on.disable": "true", "errors.deadletterqueue.group.enable": "true"}
    config = BrokerConfig({})
    topic_log_config(new, log_config_defaults(config))  # raised InvalidTopicConfig before
    assert set(new) <= set(broker_topic_defaults(config))


def test_topic_synonyms_follow_kafka() -> None:
    """Kafka lists a topic config's broker synonyms by source, then synonym order, and drops all
    before the first entry of the main synonym: retention.ms lists log.retention.hours only when
    log.retention.ms is set somewhere, and its source is DEFAULT_CONFIG otherwise."""
    from shoal.broker.config import BrokerConfig
    from shoal.broker.handlers.describe_configs import topic_synonym_layers

    static_hours = BrokerConfig({"log.retention.hours": "100"})
    assert topic_synonym_layers(static_hours, "retention.ms") == []
    both = BrokerConfig({"log.retention.hours": "100", "log.retention.ms": "5000"})
    assert topic_synonym_layers(both, "retention.ms") == [("log.retention.ms", "5000", 4),
                                                          ("log.retention.hours", "100", 4),
                                                          ("log.retention.hours", "168", 5)]
    assert topic_synonym_layers(BrokerConfig({}), "retention.bytes") == [("log.retention.bytes", "-1", 5)]


def test_passive_topic_configs_have_their_broker_synonyms() -> None:
    """compression.type, preallocate, segment.index.bytes, ... default from broker configs, as in Kafka."""
    from shoal.broker.config import BrokerConfig
    from shoal.broker.handlers.describe_configs import topic_synonym_layers
    from shoal.broker.topic_configs import broker_topic_defaults

    config = BrokerConfig({"log.preallocate": "true"})
    assert topic_synonym_layers(config, "preallocate") == [("log.preallocate", "true", 4),
                                                           ("log.preallocate", "false", 5)]
    assert broker_topic_defaults(config)["preallocate"] == "true"
    assert topic_synonym_layers(config, "segment.index.bytes") == [("log.index.size.max.bytes", "10485760", 5)]


def test_cluster_default_resource_lists_only_its_own_synonyms() -> None:
    """Kafka lists, for the cluster default resource, the dynamic default layer only."""
    from shoal.broker.config import BrokerConfig, ConfigSource
    from shoal.broker.handlers.describe_configs import broker_synonym_layers

    config = BrokerConfig({"min.insync.replicas": "2"}).with_dynamic({"min.insync.replicas": "1"}, {})
    assert broker_synonym_layers(config, "min.insync.replicas", cluster_default=True) == [
        ("1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    assert len(broker_synonym_layers(config, "min.insync.replicas", cluster_default=False)) == 3
