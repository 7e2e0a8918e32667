"""The same Spark jobs on either connector and either broker, and the rows equal in all four.

``format("kafka")`` is Spark's own connector (spark-sql-kafka-0-10 from Maven Central) on the PySpark
that matches it, in its own venv (``.venv-spark-kafka``, made by scripts/test.sh); ``format("shoal")``
runs on this venv's PySpark. Each runs against shoal and against Apache Kafka 4.x; Spark's connector
against Kafka is the reference. What one connector writes, the other reads (cross-reading).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.interop.txn_helpers import create_topic
from tests.reference import maven

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "spark" / "connector_job.py"
SPARK_VERSION = "4.2.0"  # the newest spark-sql-kafka-0-10_2.13 on Maven Central; .venv-spark-kafka has its PySpark
CONNECTOR_JARS = ("spark-sql-kafka-0-10", "spark-token-provider-kafka-0-10", "kafka-clients", "commons-pool2")
BASE_TS = 1_700_000_000_000
STEP_MS = 1000
WRITE_TS = BASE_TS + 100 * STEP_MS  # the timestamp column of the rows the jobs write


def spark_kafka_python() -> Path:
    python = ROOT / ".venv-spark-kafka" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: scripts/test.sh makes it (PySpark {SPARK_VERSION} for Spark's connector)")
    return python


@pytest.fixture(scope="module")
def connector_jars() -> list[str]:
    """Spark's Kafka connector and what it needs beyond Spark's own jars."""
    lib = maven.resolve(f"spark-sql-kafka-{SPARK_VERSION}",
                        [("org.apache.spark", "spark-sql-kafka-0-10_2.13", SPARK_VERSION)])
    jars = [str(j) for j in sorted(lib.glob("*.jar")) if j.name.startswith(CONNECTOR_JARS)]
    assert len(jars) == len(CONNECTOR_JARS), jars
    return jars


def prepare(bootstrap: str) -> None:
    """The same input on each broker: explicit partitions, timestamps and headers; one aborted transaction.

    Each transaction's records are flushed before it ends. librdkafka's abort purges what it has not sent,
    so without the flush the aborted transaction held no records at all; and an abort racing the
    transaction's AddPartitionsToTxn (answered CONCURRENT_TRANSACTIONS while the previous commit's markers
    are written, a window Kafka has after every commit) sends EndTxn to a coordinator still in
    PrepareCommit, which answers INVALID_TXN_STATE, fatal to the producer (a CI run failed so).

    The records carry timestamps from 2023: under the default retention.ms (7 days) a retention check deletes
    them (the Spark tests' shoal broker checks every 200 ms; a CI run lost conn-data that way), so every topic
    keeps its records."""
    keep = {"retention.ms": "-1"}
    create_topic(bootstrap, "conn-data", 2, keep)
    for fmt in ("kafka", "shoal"):
        create_topic(bootstrap, f"conn-stream-{fmt}", 2, keep)
        create_topic(bootstrap, f"conn-out-{fmt}", 2, keep)
        create_topic(bootstrap, f"conn-min-{fmt}", 1, keep)
        create_topic(bootstrap, f"conn-rr-{fmt}", 2, keep)
    create_topic(bootstrap, "conn-txn", 1, keep)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(20):
        for topic in ("conn-data", "conn-stream-kafka", "conn-stream-shoal"):
            p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                      timestamp=BASE_TS + i * STEP_MS, headers=[("h", f"x{i}".encode())])
    assert p.flush(30) == 0
    tp = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"conn-{uuid.uuid4().hex[:6]}"})
    tp.init_transactions(30)
    for values, commit in ((range(0, 5), True), (range(5, 8), False), (range(8, 10), True)):
        tp.begin_transaction()
        for i in values:
            tp.produce("conn-txn", value=f"t{i}".encode(), partition=0)
        assert tp.flush(30) == 0
        tp.commit_transaction(30) if commit else tp.abort_transaction(30)


def run_job(python: Path, spec: Any, tmp: Path) -> Any:
    """Run connector_job.py on one spec, or on a list of specs in one Spark session."""
    fmt = (spec[0] if isinstance(spec, list) else spec)["format"]
    name = f"{fmt}-{uuid.uuid4().hex[:6]}"
    spec_path, out_path = tmp / f"{name}.spec.json", tmp / f"{name}.out.json"
    spec_path.write_text(json.dumps(spec))
    res = subprocess.run([str(python), str(JOB), str(spec_path), str(out_path)], cwd=tmp,
                         capture_output=True, text=True, timeout=600,
                         env={"PATH": f"{python.parent}:/usr/bin:/bin", "PYSPARK_PYTHON": str(python),
                              "HOME": str(Path.home()), "JAVA_HOME": _java_home()})
    causes = [line for line in res.stderr.splitlines() if "Exception" in line or "Error" in line]
    assert res.returncode == 0, f"{fmt} job failed:\n" + ("\n".join(causes[:8]) or res.stderr[-3000:])
    return json.loads(out_path.read_text())


def _java_home() -> str:
    import os

    return os.environ.get("JAVA_HOME") or str(Path(subprocess.check_output(["readlink", "-f", "/usr/bin/java"],
                                                                           text=True).strip()).parents[1])


def read_back(bootstrap: str, topic: str) -> list[list[Any]]:
    """(key, value, partition, where the timestamp came from, headers) of every record, with confluent-kafka."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rb-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(2)])
    got = []
    for _ in range(40):
        for m in c.consume(100, 0.5):
            if m.error() is None:
                # Spark's sink has no timestamp column (Spark 4.2 ignores one): the producer's clock stamps
                # each record, so what is compared is whether the column's value was taken.
                ts = m.timestamp()[1]
                got.append([m.key().decode(), m.value().decode(), m.partition(),
                            "from the column" if ts - WRITE_TS < 100 else "at write time",
                            [[k, v.decode()] for k, v in (m.headers() or [])]])
        if len(got) >= 10:
            break
    c.close()
    return sorted(got)


@pytest.fixture(scope="module")
def results(broker, kafka_broker, connector_jars, tmp_path_factory) -> dict[tuple[str, str], dict[str, Any]]:
    """Every job, on every (broker, connector) pair."""
    pythons = {"kafka": spark_kafka_python(), "shoal": Path(sys.executable)}
    brokers = {"shoal": broker.bootstrap, "kafka": kafka_broker.bootstrap_servers}
    out: dict[tuple[str, str], dict[str, Any]] = {}
    tmp = {}
    for kind, bootstrap in brokers.items():
        prepare(bootstrap)
        tmp[kind] = tmp_path_factory.mktemp(f"connectors-{kind}")
    # Spark's connector writes first, so that both outputs exist when each connector reads them. Each
    # step runs on both brokers in one Spark session (a driver's start is most of a small job's time).
    later = ["batch", "stream", "cross", "min_trigger", "recreate"]
    for fmt, jobs in (("kafka", ["write"]), ("shoal", ["write", *later]), ("kafka", later)):
        specs = [{"format": fmt, "bootstrap": bootstrap, "jars": connector_jars if fmt == "kafka" else [],
                  "jobs": jobs, "middle_timestamp": BASE_TS + 10 * STEP_MS,
                  "write_timestamp": WRITE_TS, "checkpoint": str(tmp[kind] / f"ckpt-{fmt}"),
                  "topics": {"data": "conn-data", "txn": "conn-txn", "out": f"conn-out-{fmt}",
                             "out_prefix": "conn-out-", "stream": f"conn-stream-{fmt}", "min": f"conn-min-{fmt}",
                             "rr": f"conn-rr-{fmt}", "recreate": f"conn-recreate-{fmt}"}}
                 for kind, bootstrap in brokers.items()]
        for kind, got in zip(brokers, run_job(pythons[fmt], specs, tmp[next(iter(brokers))]), strict=True):
            out.setdefault((kind, fmt), {}).update(got)
    for kind, bootstrap in brokers.items():
        for fmt in ("kafka", "shoal"):
            out[(kind, fmt)]["written"] = read_back(bootstrap, f"conn-out-{fmt}")
            rr = read_back(bootstrap, f"conn-rr-{fmt}")
            out[(kind, fmt)]["round_robin_per_partition"] = [sum(r[2] == p for r in rr) for p in range(2)]
    return out


SCENARIOS = ["all", "offset_range", "assign", "pattern", "by_timestamp", "by_partition_timestamp",
             "read_committed", "read_uncommitted", "stream_batches", "stream_restarted", "written",
             "read_kafka_output", "read_shoal_output", "pattern_partial", "batch_ignores_rate_limits",
             "unknown_topic", "min_trigger_held", "min_trigger_batches", "round_robin_per_partition",
             "recreate_fail_true", "recreate_fail_false"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rows_equal_on_both_connectors_and_both_brokers(results, scenario):
    reference = results[("kafka", "kafka")][scenario]
    assert reference, f"Spark's connector on Kafka gave no rows for {scenario}"
    for combo in (("kafka", "shoal"), ("shoal", "kafka"), ("shoal", "shoal")):
        assert results[combo][scenario] == reference, f"{scenario}: broker {combo[0]}, format({combo[1]!r})"
