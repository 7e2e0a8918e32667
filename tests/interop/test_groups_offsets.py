"""Committed offsets: a new member of the group resumes exactly after the last commit.

One consumer commits synchronously after every batch and stops part-way;
another consumer of the same group must start at the committed offsets,
so the two together see every record exactly once. Also across a graceful
broker restart, and across kill -9 of the broker with a flush per message.
"""

from __future__ import annotations

import pytest

from tests.interop.group_helpers import (
    Member,
    Members,
    committed_offsets,
    create_topic,
    kafka_conf,
    members,  # noqa: F401 - fixture
    produce,
    wait_until,
)

PARTS = 3
TOTAL = 60


def _consume_part(ms: Members, client: str, bs: str, group: str, topic: str, name: str,
                  stop_after: int | None) -> Member:
    m = ms.start(name, client, bs, group, [topic], kafka_conf(client), commit=True, stop_after=stop_after)
    return m


def _first_half(ms: Members, client: str, bs: str, group: str, topic: str) -> Member:
    first = _consume_part(ms, client, bs, group, topic, "first", stop_after=25)
    wait_until(lambda: first.of("closed"), 40, "first consumer consumed 25 records and closed")
    assert first.proc.wait(10) == 0
    assert not first.of("commit_failed"), first.of("commit_failed")
    assert len(first.records) == 25
    # What it committed is exactly one past the last record it consumed of each partition.
    last: dict[tuple[str, int], int] = {}
    for t, p, o in first.records:
        last[(t, p)] = o + 1
    assert first.committed == last
    assert committed_offsets(bs, group) == last
    return first


def _second_half(ms: Members, client: str, bs: str, group: str, topic: str, first: Member,
                 committed: dict[tuple[str, int], int]) -> None:
    second = _consume_part(ms, client, bs, group, topic, "second", stop_after=None)
    wait_until(lambda: len(first.records) + len(second.records) >= TOTAL, 40,
               f"second consumer consumed the remaining {TOTAL - len(first.records)} records")
    starts: dict[tuple[str, int], int] = {}
    for t, p, o in second.records:
        starts.setdefault((t, p), o)
    for tp, start in starts.items():
        assert start == committed.get(tp, 0), f"{tp}: resumed at {start}, committed {committed.get(tp)}"
    both = sorted(first.records + second.records)
    assert both == sorted((topic, i % PARTS, i // PARTS) for i in range(TOTAL)), "records lost or re-delivered"
    wait_until(lambda: committed_offsets(bs, group) == {(topic, p): TOTAL // PARTS for p in range(PARTS)}, 10,
               "everything committed")


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_new_member_resumes_after_last_commit(shoal, members, client):  # noqa: F811
    bs, topic, group = shoal.bootstrap, f"off-{client}", f"g-off-{client}"
    create_topic(bs, topic, PARTS)
    produce(bs, topic, PARTS, TOTAL)
    first = _first_half(members, client, bs, group, topic)
    _second_half(members, client, bs, group, topic, first, first.committed)


def test_committed_offsets_survive_broker_restart(shoal, members):  # noqa: F811
    bs, topic, group = shoal.bootstrap, "off-restart", "g-off-restart"
    create_topic(bs, topic, PARTS)
    produce(bs, topic, PARTS, TOTAL)
    first = _first_half(members, "confluent", bs, group, topic)
    shoal.restart()
    assert shoal.bootstrap == bs
    assert committed_offsets(bs, group) == first.committed
    _second_half(members, "confluent", bs, group, topic, first, first.committed)


def test_committed_offsets_survive_broker_kill9_with_flush_per_message(shoal_factory, members):  # noqa: F811
    broker = shoal_factory(overrides={"log.flush.interval.messages": "1"})
    bs, topic, group = broker.bootstrap, "off-kill", "g-off-kill"
    create_topic(bs, topic, PARTS)
    produce(bs, topic, PARTS, TOTAL)
    first = _first_half(members, "confluent", bs, group, topic)
    broker.kill9()
    broker.start()
    assert broker.bootstrap == bs
    assert committed_offsets(bs, group) == first.committed
    _second_half(members, "confluent", bs, group, topic, first, first.committed)


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
@pytest.mark.parametrize("how", ["restart", "kill9"])
def test_live_group_carries_on_across_broker_restart(shoal_factory, members, client, how):  # noqa: F811
    """Members stay up while the broker goes down and comes back: no record twice, none lost."""
    broker = shoal_factory(overrides={"log.flush.interval.messages": "1"})
    bs, topic, group = broker.bootstrap, f"live-{how}-{client}", f"g-live-{how}-{client}"
    create_topic(bs, topic, PARTS)
    ms = [members.start(f"{client}-{i}", client, bs, group, [topic], kafka_conf(client), commit=True)
          for i in range(2)]

    def consumed_and_committed(n: int) -> bool:
        done: dict[tuple[str, int], int] = {}
        for m in ms:
            for tp, o in m.committed.items():
                done[tp] = max(done.get(tp, 0), o)
        return done == {(topic, p): n // PARTS for p in range(PARTS)}

    wait_until(lambda: sum(len(m.assignment) for m in ms) == PARTS, 30, "group formed")
    produce(bs, topic, PARTS, TOTAL)
    wait_until(lambda: consumed_and_committed(TOTAL), 30, "first records consumed and committed")
    if how == "restart":
        broker.restart()
    else:
        broker.kill9()
        broker.start()
    assert broker.bootstrap == bs
    assert committed_offsets(bs, group) == {(topic, p): TOTAL // PARTS for p in range(PARTS)}
    produce(bs, topic, PARTS, TOTAL, start=TOTAL)
    wait_until(lambda: consumed_and_committed(2 * TOTAL), 60, "records produced after the restart consumed")
    consumed = sorted(r for m in ms for r in m.records)
    assert consumed == sorted((topic, i % PARTS, i // PARTS) for i in range(2 * TOTAL)), \
        "records lost or delivered twice across the broker restart"
    assert all(m.alive for m in ms)
