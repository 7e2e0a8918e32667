"""The sink's exactly-once guarantee under faults, on shoal: the job (tests/spark/eos_harness.py) is
SIGKILLed mid-batch, between its tasks' commits and between batches, and one of its Python workers
crashes, while input keeps arriving; each time it restarts from its checkpoint. A read_committed reader
of the output then finds every input exactly once. The same harness with
deliveryGuarantee=at_least_once and one of the kills (between a batch's tasks) finds duplicates, which
shows the faults bite. test_exactly_once_on_kafka.py repeats the exactly-once run on Apache Kafka."""

from __future__ import annotations

import pytest

from tests.interop.conftest import ShoalProcess
from tests.spark.eos_harness import copy_and_check

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_every_input_exactly_once_after_kills_and_crashes(tmp_path, guarantee):
    broker = ShoalProcess(tmp_path / "data", overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        copy_and_check(broker.bootstrap, tmp_path, guarantee)
    finally:
        broker.stop()
