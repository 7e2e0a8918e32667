"""Spark on a secured shoal: Spark's own connector (``format("kafka")``, Kafka's Java client) and
``format("shoal")`` (shoal's client) read and write over SASL_SSL with SCRAM-SHA-512, configured
with the same ``kafka.*`` options, and read the same rows."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from shoal.testing.embedded import EmbeddedBroker
from shoal.testing.tls_certs import make_pki
from tests.spark.test_connectors import _java_home, connector_jars, spark_kafka_python  # noqa: F401 - fixture

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "spark" / "secured_job.py"
USER, PASSWORD = "spark", "spark-secret"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("spark-pki"))
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
             "sasl.enabled.mechanisms": "SCRAM-SHA-512", **pki.broker_properties("SASL_SSL")}
    with EmbeddedBroker(properties=props) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap("PLAINTEXT")})
        for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())]).values():
            f.result(15)
        p = Producer({"bootstrap.servers": b.bootstrap("PLAINTEXT")})
        for i in range(10):
            p.produce("secured-in", f"v{i}".encode(), partition=0)
        assert p.flush(15) == 0
        yield b, pki


def _run(python: Path, spec: dict[str, Any], tmp: Path) -> dict[str, Any]:
    spec_path, out_path = tmp / f"{spec['format']}.spec.json", tmp / f"{spec['format']}.out.json"
    spec_path.write_text(json.dumps(spec))
    res = subprocess.run([str(python), str(JOB), str(spec_path), str(out_path)], cwd=tmp, capture_output=True,
                         text=True, timeout=400, env={"PATH": f"{python.parent}:/usr/bin:/bin",
                                                      "PYSPARK_PYTHON": str(python), "HOME": str(Path.home()),
                                                      "JAVA_HOME": _java_home()})
    causes = [line for line in res.stderr.splitlines() if "Exception" in line or "Error" in line]
    assert res.returncode == 0, f"{spec['format']} job failed:\n" + ("\n".join(causes[:8]) or res.stderr[-3000:])
    return json.loads(out_path.read_text())


def test_both_connectors_read_and_write_over_sasl_ssl(secured, connector_jars, tmp_path):  # noqa: F811
    import sys

    broker, pki = secured
    options = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
               "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                         f'username="{USER}" password="{PASSWORD}";',
               "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(pki.ca_cert)}
    results = {}
    for fmt, python, jars in (("kafka", spark_kafka_python(), connector_jars), ("shoal", Path(sys.executable), [])):
        sink = f"secured-out-{fmt}-{uuid.uuid4().hex[:6]}"
        spec = {"format": fmt, "bootstrap": broker.bootstrap("SASL_SSL"), "options": options, "jars": jars,
                "source": "secured-in", "sink": sink}
        results[fmt] = _run(python, spec, tmp_path)["values"]
        assert sorted(_values(broker.bootstrap("PLAINTEXT"), sink)) == [f"v{i}" for i in range(10)]
    assert results["kafka"] == results["shoal"] == sorted(f"v{i}" for i in range(10))
    wrong = {**options, "kafka.sasl.jaas.config": options["kafka.sasl.jaas.config"].replace(PASSWORD, "nope")}
    with pytest.raises(AssertionError, match="job failed"):
        _run(Path(sys.executable), {"format": "shoal", "bootstrap": broker.bootstrap("SASL_SSL"), "options": wrong,
                                    "jars": [], "source": "secured-in", "sink": "never"}, tmp_path)


def _values(bootstrap: str, topic: str) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rb-{uuid.uuid4().hex[:6]}"})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    for _ in range(40):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
        if len(got) >= 10:
            break
    c.close()
    return got
