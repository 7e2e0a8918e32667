"""Group coordinator fail-over in a 3-node cluster.

Two members consume with a synchronous commit after every batch. When the
node coordinating the group stops, its `__consumer_offsets` partition moves
to another node, which loads the group from the log; the clients get
NOT_COORDINATOR, find the new coordinator, rejoin and carry on from their
committed offsets. Every record consumed before the fail-over was committed,
so nothing may be delivered twice. Stopping the node also moves leadership
of the data partitions it led (the topic has 3 replicas).
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.interop.group_helpers import (
    Member,
    assert_partitioned,
    committed_offsets,
    create_topic,
    describe_group,
    group_state,
    is_partitioned,
    kafka_conf,
    members,  # noqa: F401 - fixture
    produce,
    wait_until,
)

PARTS = 6
BATCH = 60


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_group_survives_coordinator_failover(shoal_factory, members, client):  # noqa: F811
    broker = shoal_factory(nodes=3)
    bs, topic, group = broker.bootstrap, f"fo-{client}", f"g-fo-{client}"
    create_topic(bs, topic, PARTS, replication=3)
    everything = {(topic, p) for p in range(PARTS)}
    ms = [members.start(f"{client}-{i}", client, bs, group, [topic], kafka_conf(client), commit=True)
          for i in range(2)]

    def settled() -> bool:
        if not is_partitioned({m.name: m.assignment for m in ms}, everything):
            return False
        view = describe_group(bs, group)
        return view.state == "STABLE" and all(view.members.get(m.name) == m.assignment for m in ms)

    def all_committed(n: int) -> bool:
        done: dict[tuple[str, int], int] = {}
        for m in ms:
            for tp, o in m.committed.items():
                done[tp] = max(done.get(tp, 0), o)
        return done == {tp: n // PARTS for tp in everything}

    diag = lambda: group_state(bs, group, ms)  # noqa: E731
    wait_until(settled, 40, "group settled", detail=diag)
    produce(bs, topic, PARTS, BATCH)
    wait_until(lambda: all_committed(BATCH), 30, f"first {BATCH} records consumed and committed",
               detail=diag)
    assert committed_offsets(bs, group) == {tp: BATCH // PARTS for tp in everything}

    callbacks = [m.callbacks for m in ms]
    coordinator = describe_group(bs, group).coordinator
    assert coordinator in broker.ports
    broker.command(f"stop-node {coordinator}")
    live = {n: p for n, p in broker.ports.items() if n != coordinator}
    live_bs = ",".join(f"127.0.0.1:{p}" for p in live.values())

    # Another node now coordinates the group, loaded from the log with the commits intact.
    view = wait_until(lambda: (v := describe_group(live_bs, group)).coordinator != coordinator and v, 30,
                      "a new coordinator")
    assert view.coordinator in live
    assert committed_offsets(live_bs, group) == {tp: BATCH // PARTS for tp in everything}

    # The members rejoin there and keep consuming, from their commits: no record twice.
    produce(live_bs, topic, PARTS, BATCH, start=BATCH)
    wait_until(lambda: all_committed(2 * BATCH), 60, f"next {BATCH} records consumed and committed",
               detail=diag)
    wait_until(settled, 30, "group settled on the new coordinator", detail=diag)
    assert describe_group(live_bs, group).coordinator == view.coordinator
    assert_partitioned({m.name: m.assignment for m in ms}, everything)
    # The group came back with its members and generation: nobody had to rebalance.
    assert [m.callbacks for m in ms] == callbacks, "members were rebalanced by the fail-over"
    consumed = sorted(r for m in ms for r in m.records)
    expected = sorted((topic, i % PARTS, i // PARTS) for i in range(2 * BATCH))
    dupes = sorted({r for r in consumed if consumed.count(r) > 1})
    assert not dupes, f"re-delivered after fail-over: {dupes}"
    assert consumed == expected

    # The old coordinator comes back and, as preferred leader, takes the group back,
    # this time while records keep arriving and members keep committing.
    producer = threading.Thread(target=produce, args=(bs, topic, PARTS, 2 * BATCH),
                                kwargs={"start": 2 * BATCH, "pace_s": 0.02})
    producer.start()
    time.sleep(0.5)
    broker.command(f"start-node {coordinator}")
    producer.join(60)
    assert not producer.is_alive()
    wait_until(lambda: describe_group(bs, group).coordinator == coordinator, 30, "the group moved back")
    wait_until(lambda: all_committed(4 * BATCH), 60, "records produced across the move consumed and committed",
               detail=diag)
    consumed = [r for m in ms for r in m.records]
    assert sorted(set(consumed)) == sorted((topic, i % PARTS, i // PARTS) for i in range(4 * BATCH))
    dupes = sorted({r for r in consumed if consumed.count(r) > 1})
    unconfirmed = set().union(*(_unconfirmed(m) for m in ms))
    # Only records whose commit failed may come again.
    assert set(dupes) <= unconfirmed, f"re-delivered though committed: {sorted(set(dupes) - unconfirmed)}"
    assert all(m.alive for m in ms)
    print(f"{client}: {len(dupes)} re-delivered, {len(unconfirmed)} unconfirmed, "
          f"{sum(len(m.of('commit_failed')) for m in ms)} failed commits")


def _unconfirmed(m: Member) -> set[tuple[str, int, int]]:
    """Records of the batches whose synchronous commit failed."""
    out: set[tuple[str, int, int]] = set()
    batch: list[tuple[str, int, int]] = []
    with m.lock:
        events = list(m.events)
    for e in events:
        if e["ev"] == "rec":
            batch.append((e["t"], e["p"], e["o"]))
        elif e["ev"] == "committed":
            batch = []
        elif e["ev"] == "commit_failed":
            out.update(batch)
            batch = []
    return out
