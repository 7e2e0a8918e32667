"""A classic group upgraded online to a KIP-848 consumer group and back, with real clients.

Two confluent-kafka consumers on the classic protocol (range, eager) share a 6-partition
topic; a third joins with `group.protocol=consumer`, which converts the group in place
(group.consumer.migration.policy=bidirectional, Kafka's default): the classic members stay, as
classic members of a consumer group. When the consumer-protocol member leaves, the group goes back
to classic. Throughout, each partition has one owner and no record is consumed twice.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.interop.group_helpers import (
    FAST_CONSUMER_GROUP_TIMERS,
    create_topic,
    members,  # noqa: F401 - fixture
    produce,
    wait_settled,
    wait_until,
)

PARTS = 6
# range, not cooperative-sticky: librdkafka's cooperative-sticky carries assignor user data in its
# subscription, and Kafka (and shoal) refuse to upgrade such a group (test_consumer_protocol_clients.py).
CLASSIC = {"group.protocol": "classic", "partition.assignment.strategy": "range",
           "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
CONSUMER = {"group.protocol": "consumer", "max.poll.interval.ms": 15000}


def _group_type(bootstrap: str, group: str) -> str:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups(request_timeout=10).result(15)
    return {g.group_id: g.type.name for g in listed.valid}.get(group, "?")


@pytest.mark.parametrize("nodes", [1, 3], ids=["1node", "3nodes"])
def test_classic_group_upgraded_online_and_downgraded(shoal_factory, members, nodes):  # noqa: F811
    shoal = shoal_factory(nodes=nodes, overrides=FAST_CONSUMER_GROUP_TIMERS)
    bs, topic, group = shoal.bootstrap, "mig848", "gmig"
    create_topic(bs, topic, PARTS)
    everything = {(topic, p) for p in range(PARTS)}
    classic = [members.start(f"c{i}", "confluent", bs, group, [topic], CLASSIC, commit=True) for i in range(2)]
    wait_settled(classic, everything, 45)
    produce(bs, topic, PARTS, 60)
    wait_until(lambda: sum(len(m.records) for m in classic) >= 60, 30, "the classic members consumed 60")
    assert _group_type(bs, group) == "CLASSIC"

    # A consumer-protocol member joins: the group becomes a consumer group with mixed members.
    new = members.start("k0", "confluent", bs, group, [topic], CONSUMER, commit=True)
    mixed = [*classic, new]
    wait_settled(mixed, everything, 60)
    assert _group_type(bs, group) == "CONSUMER"
    produce(bs, topic, PARTS, 60, start=60)
    wait_until(lambda: sum(len(m.records) for m in mixed) >= 120, 45, "the mixed group consumed 120")

    # The last consumer-protocol member leaves: back to a classic group of the two.
    new.close()
    wait_settled(classic, everything, 60)
    wait_until(lambda: _group_type(bs, group) == "CLASSIC", 30, "the group back to classic")
    produce(bs, topic, PARTS, 60, start=120)
    wait_until(lambda: sum(len(m.records) for m in mixed) >= 180, 45, "180 records consumed")
    consumed = Counter(r for m in mixed for r in m.records)
    assert len(consumed) == 180 and set(consumed.values()) == {1}, "a record consumed twice"
