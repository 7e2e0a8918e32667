"""Transactions diffed: the same producer scripts against shoal and Apache Kafka 4.x.

Each scenario returns what a client observes (the records each isolation level reads,
the watermarks and last stable offset, the error a fenced producer gets, the offsets a
transaction committed for a group); the two brokers' observations must be equal.
Real clients (confluent-kafka / librdkafka) drive them: the outcomes are end to end.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.interop.txn_helpers import committed, create_topic, read_all, watermarks
from tests.reference.scenarios import diff
from tests.reference.txn_wire import wire_transaction

pytestmark = pytest.mark.timeout(180)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _producer(bootstrap: str, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
                  "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    return p


def _marks(bootstrap: str, topic: str, partitions: int) -> dict[str, list[tuple[int, int]]]:
    return {iso: [watermarks(bootstrap, topic, p, iso) for p in range(partitions)]
            for iso in ("read_committed", "read_uncommitted")}


def _error(e: KafkaException) -> dict[str, Any]:
    err = e.args[0]
    return {"code": err.name(), "fatal": err.fatal(), "abortable": err.txn_requires_abort()}


def commit_and_abort(bootstrap: str) -> dict[str, Any]:
    """An aborted then a committed transaction over two partitions, and plain records between."""
    topic = _name("tx-ca")
    create_topic(bootstrap, topic, 2)
    p = _producer(bootstrap, _name("tid"))
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=b"aborted-%d" % i, partition=i % 2)
    p.flush(10)
    p.abort_transaction(30)
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    plain.produce(topic, value=b"plain", partition=0)
    plain.flush(10)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=b"committed-%d" % i, partition=i % 2)
    p.commit_transaction(30)
    return {"read_committed": read_all(bootstrap, topic, 2),
            "read_uncommitted": read_all(bootstrap, topic, 2, isolation="read_uncommitted"),
            "watermarks": _marks(bootstrap, topic, 2)}


def open_transaction_holds_the_lso(bootstrap: str) -> dict[str, Any]:
    """Records after an undecided transaction wait at the last stable offset for read_committed."""
    topic = _name("tx-lso")
    create_topic(bootstrap, topic)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"before")
    plain.flush(10)
    p = _producer(bootstrap, _name("tid"))
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"open-%d" % i)
    p.flush(10)
    plain.produce(topic, value=b"after")
    plain.flush(10)
    out: dict[str, Any] = {"open": {"read_committed": read_all(bootstrap, topic),
                                    "read_uncommitted": read_all(bootstrap, topic, isolation="read_uncommitted"),
                                    "watermarks": _marks(bootstrap, topic, 1)}}
    p.commit_transaction(30)
    out["committed"] = {"read_committed": read_all(bootstrap, topic), "watermarks": _marks(bootstrap, topic, 1)}
    return out


def zombie_is_fenced(bootstrap: str) -> dict[str, Any]:
    """A second producer with the same transactional id fences the first; the first's open
    transaction is aborted, and the zombie's commit fails with a fatal error."""
    topic = _name("tx-zombie")
    create_topic(bootstrap, topic)
    tid = _name("tid")
    zombie = _producer(bootstrap, tid)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(10)
    successor = _producer(bootstrap, tid)  # bumps the epoch and aborts the zombie's transaction
    out: dict[str, Any] = {}
    try:
        zombie.produce(topic, value=b"zombie-2")
        zombie.commit_transaction(30)
        out["zombie commit"] = "succeeded"
    except KafkaException as e:
        out["zombie commit"] = _error(e)
    successor.begin_transaction()
    successor.produce(topic, value=b"successor")
    successor.commit_transaction(30)
    out["read_committed"] = read_all(bootstrap, topic)
    out["read_uncommitted"] = sorted(read_all(bootstrap, topic, isolation="read_uncommitted"))
    out["watermarks"] = _marks(bootstrap, topic, 1)
    return out


def offsets_in_transactions(bootstrap: str) -> dict[str, Any]:
    """Consume-transform-produce: offsets sent in an aborted transaction are not committed;
    in a committed one they are, together with the produced records."""
    src, dst, group = _name("tx-src"), _name("tx-dst"), _name("tx-group")
    create_topic(bootstrap, src)
    create_topic(bootstrap, dst)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        plain.produce(src, value=b"in-%d" % i)
    plain.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    out: dict[str, Any] = {}
    try:
        p = _producer(bootstrap, _name("tid"))
        meta = consumer.consumer_group_metadata()
        for verdict, offset in (("aborted", 2), ("committed", 4)):
            p.begin_transaction()
            p.produce(dst, value=f"{verdict}-out".encode())
            p.send_offsets_to_transaction([TopicPartition(src, 0, offset)], meta, 30)
            if verdict == "aborted":
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
            out[f"committed offset after {verdict}"] = committed(bootstrap, group, src)
    finally:
        consumer.close()
    out["read_committed"] = read_all(bootstrap, dst)
    return out


SCENARIOS: dict[str, Callable[[str], dict[str, Any]]] = {
    "commit_and_abort": commit_and_abort,
    "open_transaction_holds_the_lso": open_transaction_holds_the_lso,
    "zombie_is_fenced": zombie_is_fenced,
    "offsets_in_transactions": offsets_in_transactions,
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_transaction_outcomes_agree(kafka_broker: Any, shoal_reference: Any, scenario: str) -> None:
    kafka = SCENARIOS[scenario](kafka_broker.bootstrap_servers)
    shoal = SCENARIOS[scenario](shoal_reference.bootstrap_servers)
    assert shoal == kafka


def _wire(bootstrap: str) -> dict[str, Any]:
    topic = _name("tx-wire")
    create_topic(bootstrap, topic)
    out = wire_transaction(bootstrap, _name("tid"), topic, _name("tx-wire-group"))
    # The topic name is random per run: read it as "T".
    return json.loads(json.dumps(out, default=repr).replace(topic, "T"))


def test_wire_transaction_error_codes_agree(kafka_broker: Any, shoal_reference: Any) -> None:
    """INVALID_TXN_STATE, PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH,
    OUT_OF_ORDER_SEQUENCE_NUMBER, duplicates, ILLEGAL_GENERATION, retried EndTxn: the codes agree."""
    kafka = _wire(kafka_broker.bootstrap_servers)
    shoal = _wire(shoal_reference.bootstrap_servers)
    assert not diff(shoal, kafka), "shoal and Kafka disagree:\n" + "\n".join(diff(shoal, kafka))
