"""Differential conformance: the raw-socket corpus against shoal and Apache Kafka 4.4.0.

Fails on any difference not in the reasoned allow-list
(:mod:`tests.reference.conformance_allowlist`).
"""

from __future__ import annotations

from shoal.testing.process import BrokerProcess
from tests.reference.apache_kafka import KafkaCluster
from tests.reference.conformance import DIFFERENT, run, summary
from tests.reference.conformance_allowlist import ALLOWED


def test_corpus_matches_kafka(kafka_broker: KafkaCluster, shoal_reference: BrokerProcess) -> None:
    outcomes = run(shoal_reference.bootstrap_servers, kafka_broker.bootstrap_servers)
    print(summary(outcomes))
    assert outcomes, "nothing was compared"
    unexplained = [f"{o.case} v{o.version}: {'; '.join(o.diffs)}"
                   for o in outcomes if o.verdict == DIFFERENT and o.case not in ALLOWED]
    assert not unexplained, "differences from Apache Kafka not in the allow-list:\n" + "\n".join(unexplained)


def test_allowlist_names_real_cases() -> None:
    """A stale allow-list entry would hide nothing but mislead; every key must be a corpus case."""
    from tests.reference.conformance_corpus import CASES

    names = {c.name for c in CASES}
    assert set(ALLOWED) <= names
