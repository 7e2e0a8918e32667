"""Client quotas with real clients: kafka-python's AlterClientQuotas/DescribeClientQuotas messages
(neither confluent-kafka's nor kafka-python's AdminClient has a client quota API, so the request
goes through kafka-python's admin connection), and a confluent-kafka producer held to its
producer_byte_rate: measured against the quota, against the same produce without a quota, and seen
by librdkafka as throttling (its throttle_cb)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytest.importorskip("kafka")

from kafka.admin import KafkaAdminClient  # noqa: E402
from kafka.protocol.admin.client_quotas import (  # noqa: E402
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)

QUOTA = 200_000  # bytes/s
TOTAL = 2_000_000  # bytes of values produced in each run
VALUE = 1000


def _send(admin: KafkaAdminClient, request):  # noqa: ANN001, ANN202
    return admin._manager.run(admin._manager.send, request)


def alter_quotas(bootstrap: str, entries: list[tuple[dict[str, str | None], dict[str, float | None]]],
                 validate_only: bool = False) -> list[tuple[int, str | None]]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        E = AlterClientQuotasRequest.EntryData
        request = AlterClientQuotasRequest(validate_only=validate_only, entries=[E(
            entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
            ops=[E.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()])
            for entity, ops in entries])
        response = _send(admin, request)
        return [(e.error_code, e.error_message) for e in response.entries]
    finally:
        admin.close()


def describe_quotas(bootstrap: str, components: list[tuple[str, int, str | None]], strict: bool = False) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        C = DescribeClientQuotasRequest.ComponentData
        response = _send(admin, DescribeClientQuotasRequest(strict=strict, components=[
            C(entity_type=t, match_type=m, match=s) for t, m, s in components]))
        assert response.error_code == 0, response.error_message
        return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
                {v.key: v.value for v in entry.values} for entry in response.entries}
    finally:
        admin.close()


def test_alter_and_describe_with_kafka_python(shoal):
    b = shoal.bootstrap
    assert alter_quotas(b, [({"user": "alice"}, {"producer_byte_rate": 1024.0}),
                            ({"client-id": None}, {"consumer_byte_rate": 2048.0, "request_percentage": 50.0}),
                            ({"user": "bob"}, {"producer_byte_rate": 0.5})]) == [
        (0, None), (0, None), (42, "producer_byte_rate cannot be a fractional value.")]
    assert describe_quotas(b, []) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0},
        (("client-id", None),): {"consumer_byte_rate": 2048.0, "request_percentage": 50.0}}
    assert describe_quotas(b, [("client-id", 1, None)], strict=True) == {
        (("client-id", None),): {"consumer_byte_rate": 2048.0, "request_percentage": 50.0}}
    assert alter_quotas(b, [({"user": "alice"}, {"producer_byte_rate": None})], validate_only=True) == [(0, None)]
    assert (("user", "alice"),) in describe_quotas(b, [("user", 0, "alice")])
    assert alter_quotas(b, [({"user": "alice"}, {"producer_byte_rate": None})]) == [(0, None)]
    assert describe_quotas(b, [("user", 2, None)]) == {}


def _timed_produce(bootstrap: str, topic: str, client_id: str) -> tuple[float, list[int]]:
    """Seconds to produce TOTAL bytes of values and have them acknowledged; librdkafka's throttle reports."""
    throttles: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "1",
                         "linger.ms": 5, "batch.size": 65536,
                         "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000))})
    value = b"x" * VALUE
    failed: list[object] = []
    started = time.monotonic()
    for _ in range(TOTAL // VALUE):
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda err, _m: err and failed.append(err))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    elapsed = time.monotonic() - started
    assert not failed, failed[:3]
    return elapsed, throttles


def test_a_producer_is_held_to_its_byte_rate(shoal_factory):
    # three samples of one second: a new rate is taken over two seconds at least, so a client may
    # burst two seconds' worth before it is throttled (Kafka's default of 11 would allow ten)
    broker = shoal_factory(overrides={"quota.window.num": "3"})
    b = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    for fut in admin.create_topics([NewTopic("quota-t", 1, 1)], request_timeout=10).values():
        fut.result(15)
    assert alter_quotas(b, [({"client-id": "limited"}, {"producer_byte_rate": float(QUOTA)})]) == [(0, None)]

    free_s, free_throttles = _timed_produce(b, "quota-t", "free")
    limited_s, throttles = _timed_produce(b, "quota-t", "limited")
    rate = TOTAL / limited_s
    print(f"unthrottled: {TOTAL / free_s:.0f} B/s in {free_s:.2f} s; "
          f"throttled: {rate:.0f} B/s in {limited_s:.2f} s against {QUOTA} B/s; "
          f"{len(throttles)} throttle reports, max {max(throttles, default=0)} ms")
    assert not free_throttles
    assert throttles and max(throttles) > 0
    assert 0.5 * QUOTA <= rate <= 1.6 * QUOTA
    assert limited_s >= 3 * free_s
