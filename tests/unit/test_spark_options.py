"""format("shoal")'s options where they follow Spark's Kafka connector: no option dropped silently."""

from __future__ import annotations

import logging

import pytest

from shoal.spark.options import OptionError, sink_options, source_options
from shoal.spark.source import _Planner

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}


@pytest.mark.parametrize("extra, message", [
    ({"kafka.security.protocol": "SASL_TLS"}, "security.protocol"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/x.jks"}, "JKS"),
    ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "GSSAPI"}, "Kerberos"),
    ({"maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "6"},
     r"minOffsetPerTrigger\(6\) is higher than the maxOffsetsPerTrigger\(5\)"),
])
def test_what_cannot_be_honoured_is_refused_naming_it(extra, message):
    with pytest.raises(OptionError, match=message):
        source_options({**BASE, **extra}, streaming=True)


def test_security_options_reach_shoals_client():
    from shoal.spark.options import client_config, kafka_params

    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";'
    params = kafka_params({**BASE, "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "SCRAM-SHA-256",
                           "kafka.sasl.jaas.config": jaas}, {})
    cfg = client_config(params)
    assert (cfg["security.protocol"], cfg["sasl.mechanism"], cfg["sasl.jaas.config"]) == (
        "SASL_PLAINTEXT", "SCRAM-SHA-256", jaas)


def test_plaintext_is_accepted_and_java_client_tuning_is_named_in_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="shoal.spark.options"):
        source_options({**BASE, "kafka.security.protocol": "plaintext", "kafka.fetch.min.bytes": "1",
                        "kafka.group.id": "g", "kafka.isolation.level": "read_committed"}, streaming=False)
    assert "fetch.min.bytes, group.id" in caplog.text
    assert "isolation.level" not in caplog.text


def test_batch_queries_ignore_trigger_limits_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="shoal.spark.options"):
        o = source_options({**BASE, "maxOffsetsPerTrigger": "3"}, streaming=False)
    assert "maxOffsetsPerTrigger option ignored in batch queries" in caplog.text
    assert o.max_offsets_per_trigger == 3  # kept, but the batch reader never applies it


@pytest.mark.parametrize("name, kind", [
    (None, "default"),
    ("org.apache.kafka.clients.producer.RoundRobinPartitioner", "round_robin"),
    ("org.apache.kafka.clients.producer.UniformStickyPartitioner", "uniform_sticky"),
])
def test_kafkas_own_partitioners_are_followed(name, kind):
    extra = {} if name is None else {"kafka.partitioner.class": name}
    assert sink_options({"kafka.bootstrap.servers": "b:1", "topic": "t", **extra}).partitioner == kind


def test_a_custom_partitioner_class_is_refused():
    with pytest.raises(OptionError, match="'partitioner.class' = com.example.Mine cannot be honoured"):
        sink_options({"kafka.bootstrap.servers": "b:1", "topic": "t", "kafka.partitioner.class": "com.example.Mine"})


def test_max_records_per_partition_splits_ranges():
    planner = _Planner(source_options({**BASE, "maxRecordsPerPartition": "4"}, streaming=False))
    got = planner._split([(("t", 0), 0, 10), (("t", 1), 5, 7)])
    assert [r.value for r in got] == [("t", 0, 0, 4), ("t", 0, 4, 8), ("t", 0, 8, 10), ("t", 1, 5, 7)]


class FlakyIO:
    """Fails the first `failures` look-ups, as a broker that is not there yet."""

    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    def partitions(self, topics: list[str]) -> dict[str, int]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("not yet")
        return dict.fromkeys(topics, 2)


@pytest.mark.parametrize("retries, failures, ok", [("3", 2, True), ("2", 2, False)])
def test_fetch_offset_retries_are_honoured(retries, failures, ok):
    planner = _Planner(source_options({**BASE, "fetchOffset.numRetries": retries,
                                       "fetchOffset.retryIntervalMs": "1"}, streaming=False))
    planner._io = FlakyIO(failures)
    if ok:
        assert planner.topic_partitions() == [("t", 0), ("t", 1)]
    else:
        with pytest.raises(ConnectionError):
            planner.topic_partitions()
    assert planner._io.calls == min(failures + 1, int(retries))


def test_the_sinks_transactional_producers_are_bounded_per_worker(monkeypatch):
    from shoal.spark import kafka_io

    closed: list[str] = []

    class FakeProducer:
        def __init__(self, config: dict) -> None:
            self.tid = config["transactional.id"]

        def close(self) -> None:
            closed.append(self.tid)

    monkeypatch.setattr(kafka_io, "Producer", FakeProducer)
    io = object.__new__(kafka_io.KafkaIO)
    io.config, io._txn_producers = {}, {}
    kept = kafka_io.TXN_PRODUCERS_KEPT
    first = io.transactional_producer("q-0", {})
    for i in range(1, kept + 5):
        io.transactional_producer(f"q-{i}", {})
        assert io.transactional_producer("q-0", {}) is first  # in use every batch: never closed
    assert len(io._txn_producers) == kept
    assert closed == [f"q-{i}" for i in range(1, 6)]


def test_batch_earliest_and_latest_are_bound_by_the_executor():
    """As Spark's connector: a batch plan keeps -2 (earliest) and -1 (latest) for the reading task, so a
    retention pass between planning and reading cannot fail the read."""
    planner = _Planner(source_options({**BASE, "startingOffsets": '{"t": {"0": 3, "1": -2}}'}, streaming=False))
    tps = [("t", 0), ("t", 1)]
    start, end = planner.resolve(tps, "starting", late=True), planner.resolve(tps, "ending", late=True)
    assert [r.value for r in planner.ranges(start, end)] == [("t", 0, 3, -1), ("t", 1, -2, -1)]


class FakeTopicIO:
    """Topic t with the given partitions' earliest and latest offsets."""

    def __init__(self, earliest: dict[int, int], latest: dict[int, int]) -> None:
        self.earliest, self.latest = earliest, latest

    def partitions(self, topics: list[str]) -> dict[str, int]:
        return {"t": len(self.latest)}

    def list_offsets(self, specs: dict, read_committed: bool) -> dict:
        return {tp: (self.earliest if spec == -2 else self.latest)[tp.partition] for tp, spec in specs.items()}


def test_a_partition_new_to_a_stream_starts_in_the_offset_log():
    """Its first batch ends at its earliest offset, so a replay after a retention pass reads the same."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from shoal.spark.source import KafkaStreamReader

    reader = KafkaStreamReader({**BASE, "startingOffsets": "earliest"})
    reader._planner._io = io = FakeTopicIO({0: 0, 1: 3}, {0: 8, 1: 9})
    start = {"t": {"0": 5}}
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 8, "1": 3}}
    planned = [r.value for r in reader.partitions(start, end)]
    io.earliest[1] = 6  # retention ran before the batch was replayed
    assert [r.value for r in reader.partitions(start, end)] == planned == [("t", 0, 5, 8)]
    assert [r.value for r in reader.partitions(end, reader.latestOffset(end, ReadAllAvailable()))] == [
        ("t", 1, 3, 9)]
