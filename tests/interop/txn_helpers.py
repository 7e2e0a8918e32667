"""Helpers for the transaction interop tests: topics, and reading a topic to its end at an isolation level."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})],
                                   request_timeout=10).values():
        fut.result(15)


def read_all(bootstrap: str, topic: str, partitions: int = 1, isolation: str = "read_committed",
             timeout: float = 30.0) -> list[bytes]:
    """Every value from the start to the end (the LSO at read_committed), partition by partition order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-reader", "enable.auto.commit": False,
                        "isolation.level": isolation, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: reached the end of only {sorted(at_end)} in {timeout} s")
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                raise KafkaException(msg.error())
            at_end.discard(msg.partition())
            got[msg.partition()].append(msg.value())
        return [v for p in range(partitions) for v in got[p]]
    finally:
        consumer.close()


def watermarks(bootstrap: str, topic: str, partition: int = 0, isolation: str = "read_committed"
               ) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-wm", "isolation.level": isolation})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partition: int = 0) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        return consumer.committed([TopicPartition(topic, partition)], timeout=10)[0].offset
    finally:
        consumer.close()


def shoal_client_read(bootstrap: str, topic: str, isolation: str, partitions: int = 1,
                      idle_s: float = 1.5) -> list[bytes]:
    """Every value of a topic from the start, read with shoal's own consumer at an isolation level,
    until nothing more comes for ``idle_s`` (20 s at most)."""
    from shoal.client import Consumer as ShoalConsumer
    from shoal.client import TopicPartition as ShoalTopicPartition

    c = ShoalConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      isolation_level=isolation, auto_offset_reset="earliest")
    try:
        c.assign([ShoalTopicPartition(topic, p) for p in range(partitions)])
        got: list[bytes] = []
        last = time.monotonic()
        deadline = last + 20
        while time.monotonic() - last < idle_s and time.monotonic() < deadline:
            for recs in c.poll(200).values():
                got += [r.value for r in recs]
                last = time.monotonic()
        return got
    finally:
        c.close()
