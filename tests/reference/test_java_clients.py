"""Kafka's Java clients, the 4.x line and 3.9.x, against shoal (issue 17): one Java program,
ClientChecks (tests/reference/clients/checks/: its main and the checks it runs, in files for the producer,
consumer and Admin checks), compiled against each line's jars, runs every scenario against a bootstrap
address and prints one JSON line per check (name, ok, detail):

- producer: plain (acks=1), every compression codec with keys and headers, idempotent (contiguous
  offsets, DescribeProducers), transactional (commit with sendOffsetsToTransaction, abort);
- consumer, classic protocol: each assignor (range, roundrobin, sticky, cooperative-sticky: a second
  member joins, eager revokes everything first, cooperative only what moves), static membership (a
  member restarted within the session timeout gets its partitions back, the other member sees no
  rebalance), read_committed (aborted records invisible, offsets skip them);
- consumer protocol (``group.protocol=consumer``, KIP-848), 4.x client only;
- Admin: every method whose API shoal serves (topics, partitions, cluster, configs, offsets, records,
  consumer groups, log dirs, leader elections, reassignments, producers, transactions, fencing, ACLs,
  client quotas, SCRAM credentials, features, the metadata quorum), and one API shoal does not serve
  (DescribeDelegationToken), which the Java Admin surfaces as UnsupportedVersionException.

Parametrized over the client line (4.x, 3.9) and shoal on one node and on three; the same program runs
against Apache Kafka 4.x (both client lines), the reference that validates the program's expectations.
Each run is one JVM, bounded by its own deadline and a subprocess timeout; every broker and JVM stops
with the test (PR_SET_PDEATHSIG for the JVM). The brokers run with the fast consumer-group timers and
Kafka's StandardAuthorizer (ANONYMOUS as super user), so the ACL methods do more than report
SECURITY_DISABLED.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from shoal.testing.process import BrokerProcess
from tests.builds import die_with_parent, javac
from tests.reference.apache_kafka import KafkaCluster, fetch
from tests.reference.consumer_protocol_helpers import FAST_GROUPS
from tests.reference.fixtures import COMMON_PROPERTIES

pytestmark = [pytest.mark.reference, pytest.mark.timeout(240)]

SOURCES = Path(__file__).parent / "clients" / "checks"  # ClientChecks.java and the checks it runs
JAVA_CACHE = Path(os.environ.get("SHOAL_JAVA_CACHE", Path.home() / ".cache" / "shoal" / "java"))
DEADLINE_MS = 90_000  # the program's own deadline; the subprocess gets 30 s more

PROPERTIES = {
    **COMMON_PROPERTIES,
    **FAST_GROUPS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}

CHECKS = [
    "producer.plain", "producer.compression+headers", "producer.idempotent", "producer.transactional",
    "producer.transactional.consume_transform_produce", "producer.record_too_large", "consumer.read_committed",
    "consumer.offset_out_of_range",
    "consumer.classic.range", "consumer.classic.roundrobin", "consumer.classic.sticky",
    "consumer.classic.cooperative-sticky", "consumer.classic.static_membership",
    "admin.createTopics", "admin.listTopics", "admin.describeTopics", "admin.createPartitions",
    "admin.describeCluster", "admin.describeConfigs", "admin.incrementalAlterConfigs",
    "admin.incrementalAlterConfigs.broker", "admin.listOffsets", "admin.deleteRecords", "admin.group.setup", "admin.listTopics.internal",
    "admin.listConsumerGroups", "admin.describeConsumerGroups", "admin.describeConsumerGroups.unknown",
    "admin.listConsumerGroupOffsets", "admin.removeMembersFromConsumerGroup", "admin.alterConsumerGroupOffsets",
    "admin.deleteConsumerGroupOffsets", "admin.deleteConsumerGroups", "admin.describeLogDirs",
    "admin.describeReplicaLogDirs+alterReplicaLogDirs", "admin.electLeaders",
    "admin.alterPartitionReassignments", "admin.listPartitionReassignments", "admin.describeProducers",
    "admin.listTransactions", "admin.describeTransactions", "admin.abortTransaction", "admin.fenceProducers",
    "admin.createAcls+describeAcls+deleteAcls", "admin.alterClientQuotas+describeClientQuotas",
    "admin.alterUserScramCredentials+describeUserScramCredentials", "admin.describeFeatures",
    "admin.describeMetadataQuorum", "admin.unsupported_api", "admin.deleteTopics",
]
CHECKS_4X = ["consumer.protocol_consumer", "admin.listGroups"]  # KIP-848, Admin.listGroups: 4.x clients only


def compiled(line: str) -> tuple[Path, Path]:
    """Kafka ``line``'s jar folder and ClientChecks compiled against it, cached by a hash of the sources
    (each file's name and bytes) and the Kafka version (javac runs once per machine and source)."""
    version, lib = fetch(line)
    sources = sorted(SOURCES.glob("*.java"), key=lambda p: p.name)
    hasher = hashlib.sha256()
    for source in sources:
        data = source.read_bytes()
        hasher.update(f"{source.name}\0{len(data)}\0".encode() + data)
    hasher.update(version.encode())
    digest = hasher.hexdigest()[:16]
    classes = JAVA_CACHE / f"ClientChecks-{version}-{digest}"
    if (classes / "ClientChecks.class").exists():
        return lib, classes
    tmp = javac(sources, lib, classes.with_name(f"{classes.name}.tmp{os.getpid()}"))
    try:
        tmp.rename(classes)
    except OSError:  # another run put it there first
        pass
    return lib, classes


def run_checks(line: str, bootstrap: str, nodes: int, target: str, log_dir: Path) -> dict[str, dict[str, Any]]:
    """Runs the program once; its checks by name (raises with its output when it did not finish)."""
    lib, classes = compiled(line)
    cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", f"{lib}/*:{classes}",
           "ClientChecks", bootstrap, f"line={line}", f"nodes={nodes}", f"target={target}",
           f"deadline.ms={DEADLINE_MS}"]
    t0 = time.monotonic()
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE_MS / 1000 + 30,
                             preexec_fn=die_with_parent)
    except subprocess.TimeoutExpired as e:  # run() killed it
        raise AssertionError(f"ClientChecks did not end in time; stdout: {e.stdout!r}") from None
    (log_dir / f"client-checks-{line}.stderr").write_text(run.stderr)
    print(f"ClientChecks {line} against {target} ({nodes} node(s)): {time.monotonic() - t0:.1f} s")
    results: dict[str, dict[str, Any]] = {}
    done = None
    for raw in run.stdout.splitlines():
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if "name" in event:
            results[event["name"]] = event
        elif "done" in event:
            done = event
    assert done is not None and done["done"], (
        f"ClientChecks exited {run.returncode} without finishing: {done}; stdout:\n{run.stdout[-3000:]}\n"
        f"stderr:\n{run.stderr[-3000:]}")
    return results


def assert_all_ok(results: dict[str, dict[str, Any]], line: str) -> None:
    expected = CHECKS + (CHECKS_4X if line == "4" else [])
    failed = {name: r["detail"] for name, r in results.items() if not r["ok"]}
    missing = [name for name in expected if name not in results]
    assert not failed and not missing, (
        f"{len(failed)} check(s) failed, {len(missing)} missing {missing}:\n"
        + "\n".join(f"  {name}: {detail}" for name, detail in failed.items()))


@pytest.fixture(scope="module", autouse=True)
def _compile_both_lines() -> None:
    """javac against both lines at once (on a cold cache), before any broker starts."""
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(compiled, ["4", "3.9"]))


@pytest.fixture(scope="module", params=[1, 3], ids=["1node", "3nodes"])
def shoal_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """``shoal serve --nodes N`` with the fast group timers and the StandardAuthorizer."""
    proc = BrokerProcess(tmp_path_factory.mktemp(f"shoal-java-{request.param}") / "data", request.param, PROPERTIES)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def kafka_reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Apache Kafka 4.x, one node, set up as the shoal brokers are."""
    cluster = KafkaCluster("4", 1, tmp_path_factory.mktemp("kafka-java"), overrides=PROPERTIES)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.parametrize("line", ["4", "3.9"])
def test_java_clients_on_shoal(shoal_cluster: BrokerProcess, line: str, tmp_path: Path) -> None:
    results = run_checks(line, shoal_cluster.bootstrap_servers, shoal_cluster.nodes, "shoal", tmp_path)
    assert_all_ok(results, line)


@pytest.mark.parametrize("line", ["4", "3.9"])
def test_java_clients_on_kafka(kafka_reference: KafkaCluster, line: str, tmp_path: Path) -> None:
    """The reference: the program's expectations hold on Apache Kafka itself."""
    results = run_checks(line, kafka_reference.bootstrap_servers, 1, "kafka", tmp_path)
    assert_all_ok(results, line)
