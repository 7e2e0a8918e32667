"""Share groups (KIP-932) with real clients over real sockets: Kafka's Java client 4.4 (KafkaShareConsumer)
and librdkafka (confluent-kafka's ShareConsumer), each member in its own process
(tests/reference/clients/ShareMember.java, rdkafka_share_member.py), against shoal and Apache Kafka 4.4 (the
reference) run with the same overrides (short record locks allowed, fast heartbeats).

a. three members on one partition, implicit acknowledgement: every record delivered exactly once, to more
   than one member;
b. a member killed (SIGKILL) while holding records: another member gets them, with delivery count 2 (both
   brokers release them when the dead member's connection closes); a member that stalls while holding
   records: after the lock duration another member gets them, with delivery count 2;
c. explicit acknowledgement: a released record comes back (count 2) and is then accepted, a rejected one
   never comes back;
d. the delivery limit (group config share.delivery.count.limit=2): a record released every time is
   delivered twice, then never again, and the others all get through.

Each test makes its own topic and group, and sets the group's configs (share.auto.offset.reset=earliest,
share.record.lock.duration.ms, ...) with IncrementalAlterConfigs before its first member joins. One shoal
and one Kafka serve the whole module, one after the other.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shoal.testing.process import BrokerProcess
from tests.reference.apache_kafka import KafkaCluster, fetch
from tests.reference.consumer_protocol_helpers import Member, create_topic, wait_until
from tests.reference.fixtures import COMMON_PROPERTIES
from tests.reference.share_group_helpers import (
    SHARE_BROKER_OVERRIDES,
    ShareDrivers,
    ShareMembers,
    client_errors,
    compile_share_java,
    deliveries,
    group_configs,
    produce_values,
    recs,
    set_group_configs,
    share_summary,
)

pytestmark = [pytest.mark.reference, pytest.mark.timeout(120)]

LOCK_MS = 5000  # the groups' share.record.lock.duration.ms: a survivor must acknowledge within it, even on a loaded machine
SETTLE = 45.0
CLIENTS = ["java", "rdkafka"]


@pytest.fixture(scope="session")
def share_drivers(tmp_path_factory: pytest.TempPathFactory) -> ShareDrivers:
    _, lib = fetch("4")
    return ShareDrivers(lib, compile_share_java(lib, tmp_path_factory.mktemp("java-share-member")))


@pytest.fixture(scope="module", params=["shoal", "kafka"])
def share_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """shoal, then Apache Kafka 4.4, each with the same share group overrides (the session brokers of
    fixtures.py run without them: Kafka's 15 s minimum record lock would make every test slow)."""
    props = {**COMMON_PROPERTIES, **SHARE_BROKER_OVERRIDES}
    if request.param == "shoal":
        proc: Any = BrokerProcess(tmp_path_factory.mktemp("shoal-share") / "data", 1, props)
    else:
        proc = KafkaCluster("4", 1, tmp_path_factory.mktemp("kafka-share"), overrides=props)
    proc.kind = request.param
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def members(share_drivers: ShareDrivers, tmp_path: Path) -> Iterator[ShareMembers]:
    ms = ShareMembers(share_drivers, tmp_path)
    try:
        yield ms
    finally:
        ms.close()


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def detail(ms: list[Member]) -> Any:
    return lambda: "; ".join(share_summary(m) for m in ms)


def new_share_group(bs: str, prefix: str, **configs: str) -> tuple[str, str]:
    """A one-partition topic and a share group reading it from the earliest offset, short locks."""
    topic, group = unique(f"sh-{prefix}"), unique(f"sg-{prefix}")
    create_topic(bs, topic, 1)
    wanted = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(LOCK_MS), **configs}
    set_group_configs(bs, group, wanted)
    # Kafka applies a group's configs through its metadata log: the broker answering DescribeConfigs
    # may show the defaults for a moment after IncrementalAlterConfigs was acknowledged.
    deadline = time.monotonic() + 15
    while {k: (got := group_configs(bs, group)).get(k) for k in wanted} != wanted:
        assert time.monotonic() < deadline, got
        time.sleep(0.2)
    return topic, group


def assert_clean(ms: list[Member]) -> None:
    for m in ms:
        assert not m.errors, share_summary(m)
        assert not client_errors(m), f"{m.name} logged errors: {client_errors(m)[:5]}"
        assert not m.of("commit_failed"), share_summary(m)


def at_least(ms: list[Member], want: dict[str, int]) -> bool:
    got = deliveries(ms)
    return all(got[v] >= n for v, n in want.items())


def counts_of(ms: list[Member], value: str) -> list[Any]:
    return [e.get("dc") for e in recs(ms) if e["v"] == value]


# ---------------------------------------------------------------------------------------- a
@pytest.mark.parametrize("client", CLIENTS)
def test_three_members_one_partition_each_record_once(share_broker: Any, members: ShareMembers,
                                                      client: str) -> None:
    bs = share_broker.bootstrap_servers
    topic, group = new_share_group(bs, "spread")
    ms = [members.start(f"{client}-{i}", client, bs, group, topic, max_poll_records=5, sleep_ms=20)
          for i in range(3)]
    wait_until(lambda: all(m.of("start") for m in ms), SETTLE, "three members started", detail(ms))
    time.sleep(3.0)  # three heartbeats: every member has the partition assigned
    values = produce_values(bs, topic, [f"r-{i}" for i in range(300)], one_batch_each=True)
    wait_until(lambda: set(values) <= set(deliveries(ms)), SETTLE, "all 300 records delivered", detail(ms))
    time.sleep(1.0)  # a re-delivery would show by now
    counts = deliveries(ms)
    twice = {v: n for v, n in counts.items() if n != 1}
    per_member = {m.name: len(m.of("rec")) for m in ms}
    print(f"\n{share_broker.kind}/{client}: records per member {per_member}")
    assert not twice, f"delivered more than once: {dict(list(twice.items())[:10])}; {detail(ms)()}"
    assert sorted(counts) == sorted(values)
    assert {e.get("dc") for e in recs(ms)} == {1}, detail(ms)()
    assert sum(1 for n in per_member.values() if n) > 1, f"one member got everything: {per_member}"
    assert_clean(ms)


# ---------------------------------------------------------------------------------------- b
def _victim_holding(share_broker: Any, members: ShareMembers, client: str, prefix: str
                    ) -> tuple[str, str, Member, dict[str, dict[str, Any]]]:
    """A topic of five "hold" records and a member (explicit acknowledgement) that acquired them all and
    never acknowledges them."""
    bs = share_broker.bootstrap_servers
    topic, group = new_share_group(bs, prefix)
    values = produce_values(bs, topic, [f"hold-{i}" for i in range(5)])
    victim = members.start(f"{client}-victim", client, bs, group, topic, mode="explicit")
    wait_until(lambda: victim.of("holding"), SETTLE, "the victim holds records", detail([victim]))
    held = {e["v"]: e for e in victim.of("rec")}
    assert sorted(held) == sorted(values), detail([victim])()
    assert {e.get("dc") for e in held.values()} == {1}, detail([victim])()
    return topic, group, victim, held


def _assert_redelivered(client: str, survivor: Member, held: dict[str, Any]) -> list[Any]:
    got = survivor.of("rec")
    assert sorted(e["v"] for e in got) == sorted(held), share_summary(survivor)
    dcs = [e.get("dc") for e in got]  # both clients report it (Java's deliveryCount(), librdkafka's delivery_count())
    # 2: the victim's delivery, then the survivor's. On a loaded machine a lock has expired once more before the
    # client handed the records to its application (a CI run saw 3 on every record, the survivor's only delivery):
    # the count may be higher, never lower, and each record still reaches the survivor's application once.
    assert all(isinstance(dc, int) and dc >= 2 for dc in dcs), dcs
    assert_clean([survivor])
    return dcs


@pytest.mark.parametrize("client", CLIENTS)
def test_killed_member_records_redelivered(share_broker: Any, members: ShareMembers, client: str) -> None:
    """SIGKILL of a member holding records: another member gets them, delivery count 2. Both brokers hand
    them over when the dead member's connection closes (before its locks would expire)."""
    bs = share_broker.bootstrap_servers
    topic, group, victim, held = _victim_holding(share_broker, members, client, "kill")
    survivor = members.start(f"{client}-survivor", client, bs, group, topic, mode="explicit")
    wait_until(lambda: survivor.of("start"), SETTLE, "the survivor started", detail([survivor]))
    time.sleep(1.0)
    early = survivor.of("rec")
    acquired_at = min(e["t"] for e in held.values())
    killed_at = time.monotonic()
    victim.kill()
    wait_until(lambda: set(held) <= {e["v"] for e in survivor.of("rec")}, SETTLE,
               "the survivor got the victim's records", detail([victim, survivor]))
    time.sleep(1.0)
    got = survivor.of("rec")
    after_kill = min(e["t"] for e in got) - killed_at
    dcs = _assert_redelivered(client, survivor, held)
    print(f"\n{share_broker.kind}/{client}: survivor got the killed member's records {after_kill:.2f}s after "
          f"the kill, {min(e['t'] for e in got) - acquired_at:.2f}s after they were acquired (lock {LOCK_MS} ms), "
          f"counts {dcs}")
    assert not early, f"given to the survivor while the victim held them: {early}"
    assert after_kill < LOCK_MS / 1000 + 5.0


@pytest.mark.parametrize("client", CLIENTS)
def test_stalled_member_records_redelivered_after_lock(share_broker: Any, members: ShareMembers,
                                                       client: str) -> None:
    """A member that holds records and stays alive without acknowledging: when the record locks expire
    another member gets them, delivery count 2."""
    bs = share_broker.bootstrap_servers
    topic, group, victim, held = _victim_holding(share_broker, members, client, "stall")
    acquired_at = min(e["t"] for e in held.values())
    survivor = members.start(f"{client}-survivor", client, bs, group, topic, mode="explicit")
    wait_until(lambda: set(held) <= {e["v"] for e in survivor.of("rec")}, SETTLE,
               "the survivor got the stalled member's records", detail([victim, survivor]))
    time.sleep(1.0)
    got = survivor.of("rec")
    waited = min(e["t"] for e in got) - acquired_at
    dcs = _assert_redelivered(client, survivor, held)
    print(f"\n{share_broker.kind}/{client}: survivor got the stalled member's records {waited:.2f}s after they "
          f"were acquired (lock {LOCK_MS} ms), counts {dcs}")
    assert victim.alive and len(victim.of("rec")) == len(held), share_summary(victim)
    assert waited >= LOCK_MS / 1000 - 0.5, f"redelivered after {waited:.2f}s, before the lock expired"


# ---------------------------------------------------------------------------------------- c
@pytest.mark.parametrize("client", CLIENTS)
def test_release_redelivers_reject_does_not(share_broker: Any, members: ShareMembers, client: str) -> None:
    bs = share_broker.bootstrap_servers
    topic, group = new_share_group(bs, "ack")
    values = produce_values(bs, topic, ["ok-0", "release-1", "reject-2", "ok-3"])
    m = members.start(f"{client}-0", client, bs, group, topic, mode="explicit")
    wait_until(lambda: at_least([m], {"ok-0": 1, "release-1": 2, "reject-2": 1, "ok-3": 1}), SETTLE,
               "the released record back once", detail([m]))
    time.sleep(LOCK_MS / 1000 + 1.0)  # past a lock: anything not settled would come again
    counts = deliveries([m])
    assert counts == {"ok-0": 1, "release-1": 2, "reject-2": 1, "ok-3": 1}, detail([m])()
    assert set(counts) == set(values)
    acks = [(e["o"], e["type"]) for e in m.of("acked")]
    assert sorted(acks) == [(0, "ACCEPT"), (1, "ACCEPT"), (1, "RELEASE"), (2, "REJECT"), (3, "ACCEPT")], acks
    assert acks.index((1, "RELEASE")) < acks.index((1, "ACCEPT")), acks
    assert counts_of([m], "release-1") == [1, 2]
    assert counts_of([m], "reject-2") == [1]
    assert_clean([m])


# ---------------------------------------------------------------------------------------- d
@pytest.mark.parametrize("client", CLIENTS)
def test_delivery_count_limit_archives_poison(share_broker: Any, members: ShareMembers, client: str) -> None:
    bs = share_broker.bootstrap_servers
    topic, group = new_share_group(bs, "limit", **{"share.delivery.count.limit": "2"})
    values = produce_values(bs, topic, ["ok-0", "poison-1", "ok-2", "ok-3", "poison-4", "ok-5"])
    m = members.start(f"{client}-0", client, bs, group, topic, mode="explicit")
    wait_until(lambda: at_least([m], {v: 2 if v.startswith("poison") else 1 for v in values}), SETTLE,
               "every record, each poison twice", detail([m]))
    time.sleep(LOCK_MS / 1000 + 1.5)  # a third delivery would show by now
    # and records produced after the poison ones still flow
    later = produce_values(bs, topic, ["ok-6", "ok-7"])
    wait_until(lambda: set(later) <= set(deliveries([m])), SETTLE, "records after the poison", detail([m]))
    counts = deliveries([m])
    assert counts == {**{v: 2 if v.startswith("poison") else 1 for v in values}, "ok-6": 1, "ok-7": 1}, \
        detail([m])()
    assert counts_of([m], "poison-1") == [1, 2] and counts_of([m], "poison-4") == [1, 2]
    assert_clean([m])
