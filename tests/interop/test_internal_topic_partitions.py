"""A restart with another offsets.topic.num.partitions or transaction.state.log.num.partitions loses nothing.

As Kafka, the settings count only when the internal topics are created; after that the topics as they
exist say which partition holds a group's offsets or a transactional id's state.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.interop.txn_helpers import create_topic

pytestmark = pytest.mark.timeout(240)
GROUPS = [f"restart-group-{i}" for i in range(20)]
TXN_IDS = [f"restart-txn-{i}" for i in range(4)]


def committed(bootstrap: str, group: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return c.committed([TopicPartition("restart-t", 0)], timeout=20)[0].offset
    finally:
        c.close()


@pytest.mark.parametrize("nodes", [1, 3], ids=["1node", "3nodes"])
def test_committed_offsets_survive_a_changed_partition_setting(shoal_factory, nodes):
    broker = shoal_factory(nodes=nodes, overrides={"offsets.topic.num.partitions": "50"})
    create_topic(broker.bootstrap, "restart-t", 1)
    for group in GROUPS:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("restart-t", 0, 42)], asynchronous=False)
        c.close()
    broker.overrides["offsets.topic.num.partitions"] = "10"
    broker.restart()
    assert {g: committed(broker.bootstrap, g) for g in GROUPS} == dict.fromkeys(GROUPS, 42)


def read_committed_values(bootstrap: str, topic: str, want: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    for _ in range(30):
        for m in c.consume(100, 0.5):
            if m.error() is None:
                got.append(m.value())
        if len(got) >= want:
            break
    c.close()
    return got


@pytest.mark.parametrize("nodes", [1, 3], ids=["1node", "3nodes"])
def test_open_transactions_are_found_after_a_changed_partition_setting(shoal_factory, nodes):
    """Transactions left open by a crash: after the restart each id's next producer aborts its old
    transaction (its state is found), so read_committed readers are not held behind it."""
    broker = shoal_factory(nodes=nodes, overrides={"transaction.state.log.num.partitions": "50"})
    create_topic(broker.bootstrap, "restart-tx", 1)
    for tid in TXN_IDS:
        p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid,
                      "transaction.timeout.ms": 120_000})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("restart-tx", b"left-open-" + tid.encode(), partition=0)
        assert p.flush(30) == 0
    broker.overrides["transaction.state.log.num.partitions"] = "5"
    broker.restart(hard=True)
    for tid in TXN_IDS:
        p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("restart-tx", b"committed-" + tid.encode(), partition=0)
        p.commit_transaction(30)
    got = read_committed_values(broker.bootstrap, "restart-tx", len(TXN_IDS))
    assert sorted(got) == sorted(b"committed-" + t.encode() for t in TXN_IDS)
