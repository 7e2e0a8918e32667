"""aiokafka producer + assign consumer against shoal, every codec."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.interop.dataset import CODECS, Rec, assert_same, make_records


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, recs: list[Rec], codec: str, acks) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=5,
                                compression_type=None if codec == "none" else codec)
    await producer.start()
    try:
        futures = [await producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                       timestamp_ms=r.timestamp, headers=list(r.headers)) for r in recs]
        await producer.flush()
        for f in futures:
            await f
    finally:
        await producer.stop()


async def consume(bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 30) -> list[Rec]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                                max_partition_fetch_bytes=65536, fetch_max_wait_ms=100)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got: list[Rec] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(got) < count and loop.time() < deadline:
            for tp, msgs in (await consumer.getmany(timeout_ms=500)).items():
                for m in msgs:
                    got.append(Rec(tp.partition, m.key, m.value, tuple(m.headers), m.timestamp))
        return got
    finally:
        await consumer.stop()


async def round_trip(bootstrap: str, topic: str, codec: str, acks) -> None:
    await create_topic(bootstrap, topic, 3)
    recs = make_records(null_header_values=False)
    await produce(bootstrap, topic, recs, codec, acks)
    assert_same(recs, await consume(bootstrap, topic, 3, len(recs)))


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_round_trip(shoal_cluster, codec):
    asyncio.run(asyncio.wait_for(round_trip(shoal_cluster.bootstrap, f"aio-{codec}", codec, 1), 90))


def test_aiokafka_data_survives_restart(shoal):
    recs = make_records(null_header_values=False)

    async def first() -> None:
        await create_topic(shoal.bootstrap, "aio-restart", 3)
        await produce(shoal.bootstrap, "aio-restart", recs, "gzip", "all")

    asyncio.run(asyncio.wait_for(first(), 60))
    shoal.restart()
    got = asyncio.run(asyncio.wait_for(consume(shoal.bootstrap, "aio-restart", 3, len(recs)), 60))
    assert_same(recs, got)
