"""The exactly-once run of test_exactly_once.py with Apache Kafka 4.x as the broker (its own module, so
that it can run beside the shoal runs in another test process)."""

from __future__ import annotations

import pytest

from tests.spark.eos_harness import copy_and_check

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def test_every_input_exactly_once_on_apache_kafka(tmp_path, kafka_factory):
    """The same kills and crashes with Apache Kafka 4.x as the broker: the sink's guarantee is Kafka's
    transactions, not something of shoal's broker."""
    copy_and_check(kafka_factory().bootstrap_servers, tmp_path, "exactly_once")
