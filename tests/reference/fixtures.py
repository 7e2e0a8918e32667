"""Pytest fixtures that put Apache Kafka beside shoal, so one test body runs against both.

- ``kafka_broker``: Apache Kafka 4.x (one KRaft node) for the session;
- ``kafka39_broker``: Apache Kafka 3.9.x, the old clients' reference;
- ``shoal_reference``: a ``shoal serve`` subprocess for the session, set up as the Kafka is;
- ``either_broker``: parametrized ``shoal`` / ``kafka``; the same test runs on each.

Tests that use a Kafka fixture carry the ``reference`` marker (``pytest -m reference``
runs just them). Kafka that cannot be fetched or started fails the test with the
cause; it is never skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from shoal.testing.process import BrokerProcess
from tests.reference.apache_kafka import KafkaCluster, fetch
from tests.reference.tools_helpers import compile_tool_runner

KAFKA_FIXTURES = {"kafka_broker", "kafka39_broker", "either_broker", "kafka_factory"}

# What both brokers run with in the reference tests (shoal's test brokers use the same).
# Tests write records with fixed historic timestamps (2020, 2023) to compare them across brokers. Under
# the default 7-day time retention Kafka deletes such a log at its next retention check (every 5 min,
# the active segment included: it rolls it first), which emptied topics mid-session in CI. The reference
# brokers of a test session run no retention check.
COMMON_PROPERTIES = {"group.initial.rebalance.delay.ms": "0", "log.retention.check.interval.ms": "86400000"}

# Every Kafka node the suite starts compiles with C1 only: its work here is starting and serving small test
# loads, where C2's compile threads cost a third of its CPU (10 CPU-s against 6.4 for a start and 20,000
# records, measured), on two cores shared with everything else. Benchmarks keep Kafka's own JIT.
KafkaCluster.default_jvm_options = ("-XX:TieredStopAtLevel=1",)


@dataclass
class Reference:
    """A running broker under test: which one, and where."""

    kind: str  # "shoal" or "kafka"
    bootstrap_servers: str
    version: str
    process: object

    def __str__(self) -> str:
        return f"{self.kind} {self.version} at {self.bootstrap_servers}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "reference: runs against Apache Kafka (fetched from Maven) as well")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if KAFKA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.reference)


def _kafka(tmp_path_factory: pytest.TempPathFactory, line: str, nodes: int = 1) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(line, nodes, tmp_path_factory.mktemp(f"kafka-{line}-{nodes}n"),
                           overrides=COMMON_PROPERTIES)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()  # the folder stays with pytest's temporary files: the logs outlive a failure


@pytest.fixture(scope="session")
def tool_runner(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Kafka 4's jars, and ToolRunner.java compiled against them: ``ToolSession(*tool_runner, workdir)`` runs
    Kafka's tools one after another in one JVM (tests/reference/tools_helpers.py)."""
    _, lib = fetch("4")
    return lib, compile_tool_runner(lib, tmp_path_factory.mktemp("tool-runner"))


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Apache Kafka 4.x, one node, for the whole session."""
    yield from _kafka(tmp_path_factory, "4")


@pytest.fixture(scope="session")
def kafka39_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Apache Kafka 3.9.x, one node, for the whole session."""
    yield from _kafka(tmp_path_factory, "3.9")


@pytest.fixture
def kafka_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """Start Kafka clusters of a test's own (``kafka_factory(nodes=3, line="4")``); all stopped after it."""
    started: list[KafkaCluster] = []

    def make(nodes: int = 1, line: str = "4", overrides: dict[str, str] | None = None) -> KafkaCluster:
        cluster = KafkaCluster(line, nodes, tmp_path_factory.mktemp(f"kafka-{line}-{nodes}n"),
                               overrides={**COMMON_PROPERTIES, **(overrides or {})})
        started.append(cluster)
        return cluster.start()

    yield make
    for cluster in started:
        cluster.stop()


@pytest.fixture(scope="session")
def shoal_reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A ``shoal serve`` subprocess for the session, beside ``kafka_broker``."""
    proc = BrokerProcess(tmp_path_factory.mktemp("shoal-ref") / "data", 1, COMMON_PROPERTIES)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(params=["shoal", "kafka"])
def either_broker(request: pytest.FixtureRequest) -> Reference:
    """shoal, then Apache Kafka 4.x: the same test body runs against each."""
    if request.param == "shoal":
        proc = request.getfixturevalue("shoal_reference")
        return Reference("shoal", proc.bootstrap_servers, "shoal", proc)
    cluster = request.getfixturevalue("kafka_broker")
    return Reference("kafka", cluster.bootstrap_servers, cluster.version, cluster)


@pytest.fixture
def shoal_brokers(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Start ``shoal serve`` processes of a test's own (``shoal_brokers(nodes=3, overrides={...})``, with
    COMMON_PROPERTIES); all stopped after it."""
    started: list[BrokerProcess] = []

    def make(nodes: int = 1, overrides: dict[str, str] | None = None) -> BrokerProcess:
        proc = BrokerProcess(tmp_path / f"shoal{len(started)}" / "data", nodes,
                             {**COMMON_PROPERTIES, **(overrides or {})})
        started.append(proc)
        return proc.start()

    yield make
    for proc in started:
        proc.stop()
