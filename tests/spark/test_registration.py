"""format("shoal") is found with no register call, from any folder, editable install or not.

PySpark registers Python data sources by scanning sys.path for ``pyspark_*`` modules, in a Python
worker whose sys.path starts with the job's working folder. Each job here runs from a temporary
folder, so the checkout is never on sys.path by accident.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.interop.txn_helpers import create_topic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]

JOB = """
import sys
import pyspark_shoal
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2,3]").config("spark.ui.enabled", "false").getOrCreate())
rows = spark.read.format("shoal").option("kafka.bootstrap.servers", sys.argv[1]).option("subscribe", sys.argv[2]).load()
print("rows", rows.count(), "shim", pyspark_shoal.__file__, flush=True)
spark.stop()
"""


def run_job(folder: Path, bootstrap: str, topic: str, env: dict[str, str] | None = None) -> str:
    (folder / "job.py").write_text(JOB)
    # As from an activated venv: its python first on PATH, and the workers run the same python.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, **(env or {})}
    res = subprocess.run([sys.executable, "job.py", bootstrap, topic], cwd=folder, env=env,
                         capture_output=True, text=True, timeout=240)
    causes = [line for line in res.stderr.splitlines() if "Exception" in line or "Error" in line]
    assert res.returncode == 0, "\n".join(causes[:5]) or res.stderr[-3000:]
    return res.stdout


@pytest.fixture(scope="module")
def topic(broker) -> str:
    create_topic(broker.bootstrap, "registration", 2)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        p.produce("registration", b"%d" % i, partition=i % 2)
    p.flush(10)
    return "registration"


def test_found_from_a_folder_outside_the_checkout(tmp_path, bootstrap, topic):
    out = run_job(tmp_path, bootstrap, topic)
    assert "rows 20 " in out
    assert Path(out.split("shim ")[1].strip()).is_relative_to(ROOT)  # this checkout's editable install


def test_found_from_a_normal_install(tmp_path, bootstrap, topic):
    """A wheel built from the checkout and installed into a folder of its own wins over the editable one."""
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
                   check=True, timeout=300, capture_output=True)
    (wheel,) = wheels.glob("shoal-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, timeout=300, capture_output=True)
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    out = run_job(job_dir, bootstrap, topic, {"PYTHONPATH": str(site)})
    assert "rows 20 " in out
    assert Path(out.split("shim ")[1].strip()).is_relative_to(site)
