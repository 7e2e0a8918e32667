"""A Spark session (local[2,3], so failed tasks are retried) and a shoal broker for the Spark tests.

The broker is one `shoal serve` subprocess for the whole module; each test uses topics of its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.conftest import ShoalProcess

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# spark-defaults.conf of every Spark the tests start, in this process and in the jobs they run as
# subprocesses: JVM options that cut a small job's CPU (see the file).
os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).parent / "conf"))


@pytest.fixture(scope="session")
def spark() -> Iterator:
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2,3]").appName("shoal-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[ShoalProcess]:
    proc = ShoalProcess(tmp_path_factory.mktemp("spark-broker") / "data", overrides={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
        "log.retention.check.interval.ms": "200"})
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def bootstrap(broker: ShoalProcess) -> str:
    return broker.bootstrap


def spark_dir(tmp_path: Path, name: str) -> str:
    d = tmp_path / name
    d.mkdir(parents=True, exist_ok=True)
    return str(d)
