"""The exactly-once pipeline on a Spark standalone cluster: a master and two workers on loopback, started
with the pyspark install's ``spark-class`` (pyspark ships no start scripts for them)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.interop.txn_helpers import create_topic, read_all
from tests.ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]


def spark_class(args: list[str], log: Path, work: Path) -> subprocess.Popen:
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable,
           "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false", "SPARK_WORKER_DIR": str(work)}
    return subprocess.Popen([str(home / "bin" / "spark-class"), *args], stdout=open(log, "w"),  # noqa: SIM115
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_for(log: Path, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text():
            return
        time.sleep(0.2)
    raise AssertionError(f"{log.name}: {text!r} not seen in {timeout} s:\n{log.read_text()[-2000:]}")


def test_pipeline_on_a_standalone_cluster(bootstrap, tmp_path):
    create_topic(bootstrap, "cluster-in", 2)
    create_topic(bootstrap, "cluster-out", 2)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(3000):
        p.produce("cluster-in", key=b"%d" % i, value=b"%d" % i, partition=i % 2)
    p.flush(10)
    port = free_port()
    procs = [spark_class(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                          "--webui-port", "0"], tmp_path / "master.log", tmp_path)]
    try:
        wait_for(tmp_path / "master.log", "I have been elected leader")
        for i in range(2):
            log = tmp_path / f"worker{i}.log"
            procs.append(spark_class(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                      "--webui-port", "0", "--cores", "1", "--memory", "1g",
                                      "--work-dir", str(tmp_path / f"work{i}"), f"spark://127.0.0.1:{port}"],
                                     log, tmp_path))
            wait_for(log, "Successfully registered with master")
        # From a folder outside the checkout, as a user's job: format("shoal") must be found all the same.
        job = subprocess.run([sys.executable, str(ROOT / "tests" / "spark" / "cluster_job.py"), bootstrap,
                              f"spark://127.0.0.1:{port}", str(tmp_path / "ckpt")], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
        assert "rows 3000 executors 2" in job.stdout, job.stdout[-2000:]
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)
    out = Counter(read_all(bootstrap, "cluster-out", 2))
    assert set(out) == {b"out-%d" % i for i in range(3000)} and max(out.values()) == 1
