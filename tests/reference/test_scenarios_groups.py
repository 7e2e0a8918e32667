"""Consumer-group behaviour diffed: the same scripted scenarios against shoal and Apache Kafka 4.x.

Wire-level scenarios (tests/reference/group_scenarios.py) record every error code,
generation, leader and assignment the coordinator answers; the transcripts of the two
brokers must be equal. Client-level scenarios run librdkafka consumers with each
assignor and compare who ends up with which partitions.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer

from tests.interop.group_helpers import create_topic
from tests.reference import group_scenarios
from tests.reference.scenarios import Transcript, diff

pytestmark = pytest.mark.timeout(180)


def _run(bootstrap: str, scenario: Callable[[str, str, str], Transcript]) -> dict[str, Any]:
    topic = f"gs-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 4)
    transcript = scenario(bootstrap, f"gsg-{uuid.uuid4().hex[:8]}", topic)
    # Topic names are random per run: the transcript names the topic "T".
    return {k: json.loads(json.dumps(v).replace(topic, "T")) for k, v in transcript.as_dict().items()}


def _both(kafka_broker: Any, shoal_reference: Any, scenario: Callable[[str, str, str], Transcript]) -> None:
    kafka = _run(kafka_broker.bootstrap_servers, scenario)
    shoal = _run(shoal_reference.bootstrap_servers, scenario)
    assert kafka, "the scenario recorded nothing"
    differences = diff(shoal, kafka)
    assert not differences, "shoal and Kafka disagree:\n" + "\n".join(differences)


def test_dynamic_members_agree(kafka_broker: Any, shoal_reference: Any) -> None:
    """MEMBER_ID_REQUIRED, generations, ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID on every API,
    REBALANCE_IN_PROGRESS, leave, session expiry, committed offsets."""
    _both(kafka_broker, shoal_reference, group_scenarios.dynamic_members)


def test_static_members_agree(kafka_broker: Any, shoal_reference: Any) -> None:
    """group.instance.id: a restart keeps the assignment with no rebalance (skip_assignment);
    the old member id is FENCED_INSTANCE_ID on heartbeat, sync, commit, join and leave."""
    _both(kafka_broker, shoal_reference, group_scenarios.static_members)


def test_expiry_during_rebalance_agrees(kafka_broker: Any, shoal_reference: Any) -> None:
    """A silent member holds a rebalance until its session expires; then it is UNKNOWN_MEMBER_ID."""
    _both(kafka_broker, shoal_reference, group_scenarios.expiry_during_rebalance)


def test_edge_errors_agree(kafka_broker: Any, shoal_reference: Any) -> None:
    """INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL, OFFSET_METADATA_TOO_LARGE, JoinGroup v3,
    requests to unknown groups, NON_EMPTY_GROUP / GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC,
    and an Empty group that OffsetDelete emptied of offsets still there for DeleteGroups."""
    _both(kafka_broker, shoal_reference, group_scenarios.edge_errors)


# ---------------------------------------------------------------- librdkafka assignors
def _consumer(bootstrap: str, group: str, name: str, strategy: str, **extra: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                     "partition.assignment.strategy": strategy, "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000, **extra})


def _settle(consumers: dict[str, Consumer], total: int, timeout: float = 40.0) -> dict[str, list[tuple[str, int]]]:
    """Poll every consumer until their assignments split all ``total`` partitions and stay so for 1 s."""
    deadline = time.monotonic() + timeout
    stable_since, last = None, None
    while time.monotonic() < deadline:
        for c in consumers.values():
            c.poll(0.05)
        now = {n: sorted((tp.topic, tp.partition) for tp in c.assignment()) for n, c in consumers.items()}
        flat = [tp for parts in now.values() for tp in parts]
        if len(flat) == total == len(set(flat)):
            if now != last:
                stable_since = time.monotonic()
            elif stable_since is not None and time.monotonic() - stable_since > 1.0:
                return now
        else:
            stable_since = None
        last = now
    raise AssertionError(f"assignments did not settle in {timeout}s: {last}")


def _assignor_scenario(bootstrap: str, strategy: str) -> list[Any]:
    """c1 alone, c2 joins, c3 joins, c2 leaves: the assignment after each step, by client id."""
    topics = [f"ga-{uuid.uuid4().hex[:6]}", f"gb-{uuid.uuid4().hex[:6]}"]
    for t in topics:
        create_topic(bootstrap, t, 3)
    group = f"gas-{uuid.uuid4().hex[:8]}"
    names = {topics[0]: "A", topics[1]: "B"}  # random topic names, read as A and B
    consumers: dict[str, Consumer] = {}
    steps: list[Any] = []

    def record(step: str) -> None:
        got = _settle(consumers, 6)
        steps.append((step, {n: [(names[t], p) for t, p in parts] for n, parts in got.items()}))

    try:
        for name in ("c1", "c2", "c3"):
            consumers[name] = _consumer(bootstrap, group, name, strategy)
            consumers[name].subscribe(topics)
            record(f"{name} joined")
        consumers.pop("c2").close()
        record("c2 left")
    finally:
        for c in consumers.values():
            c.close()
    return steps


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_assignor_rebalances_agree(kafka_broker: Any, shoal_reference: Any, strategy: str) -> None:
    """librdkafka consumers: the same joins and leave give the same assignments on both brokers."""
    kafka = _assignor_scenario(kafka_broker.bootstrap_servers, strategy)
    shoal = _assignor_scenario(shoal_reference.bootstrap_servers, strategy)
    assert shoal == kafka


def _static_restart_scenario(bootstrap: str) -> dict[str, Any]:
    """Two static members (range); c1's process restarts within the session timeout: it gets its
    partitions back and c2 sees no rebalance (no revoke, no new assign)."""
    topic = f"gst-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 4)
    group = f"gst-{uuid.uuid4().hex[:8]}"
    c2_callbacks: list[str] = []
    consumers: dict[str, Consumer] = {}
    out: dict[str, Any] = {}
    try:
        consumers["c1"] = _consumer(bootstrap, group, "c1", "range", **{"group.instance.id": "inst-1"})
        consumers["c1"].subscribe([topic])
        _settle(consumers, 4)
        consumers["c2"] = _consumer(bootstrap, group, "c2", "range", **{"group.instance.id": "inst-2"})
        consumers["c2"].subscribe([topic], on_assign=lambda c, ps: c2_callbacks.append("assign"),
                                  on_revoke=lambda c, ps: c2_callbacks.append("revoke"))
        out["before restart"] = _settle(consumers, 4)
        seen_before = list(c2_callbacks)
        consumers.pop("c1").close()  # a static member's close sends no LeaveGroup
        consumers["c1"] = _consumer(bootstrap, group, "c1", "range", **{"group.instance.id": "inst-1"})
        consumers["c1"].subscribe([topic])
        out["after restart"] = _settle(consumers, 4)
        out["c2 callbacks during restart"] = c2_callbacks[len(seen_before):]
    finally:
        for c in consumers.values():
            c.close()
    return json.loads(json.dumps(out).replace(topic, "T"))


def test_static_member_restart_agrees(kafka_broker: Any, shoal_reference: Any) -> None:
    kafka = _static_restart_scenario(kafka_broker.bootstrap_servers)
    shoal = _static_restart_scenario(shoal_reference.bootstrap_servers)
    # What the scenario is about, on the reference: the restarted instance got its partitions back.
    assert kafka["before restart"] == kafka["after restart"], kafka
    assert shoal == kafka
