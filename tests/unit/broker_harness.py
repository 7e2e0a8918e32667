"""An in-process broker on an ephemeral loopback port, and a raw protocol client.

Tests drive the broker with shoal's own codec over real sockets, so they can
send exactly the bytes an error path needs (bad CRCs, garbage frames, odd
versions) and read exactly what came back.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from shoal.broker.broker import Broker
from shoal.broker.config import BrokerConfig
from shoal.protocol.framing import decode_response_header, encode_request, response_header_version
from shoal.protocol.generated import API_BY_KEY
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.create_topics_request import CreateTopicsRequest
from shoal.protocol.generated.fetch_request import FetchRequest
from shoal.protocol.generated.produce_request import ProduceRequest
from shoal.protocol.record_encode import build_batch


@asynccontextmanager
async def running_broker(tmp: Path, nodes: int = 1, **props: str) -> AsyncIterator[Broker]:
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp),
                           "group.initial.rebalance.delay.ms": "0",
                           **{k.replace("_", "."): v for k, v in props.items()}})
    broker = Broker(config, nodes)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.close()


class RawClient:
    """One connection; `call` sends a request object and decodes the response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0

    @classmethod
    async def connect(cls, port: int) -> RawClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def send_raw(self, frame: bytes) -> None:
        self.writer.write(frame)
        await self.writer.drain()

    async def read_frame(self, timeout: float = 10) -> bytes:
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), timeout))[0]
        return await asyncio.wait_for(self.reader.readexactly(size), timeout)

    async def call(self, api_key: int, version: int, request: Any, timeout: float = 10) -> Any:
        self.correlation += 1
        await self.send_raw(encode_request(api_key, version, self.correlation, "raw-test",
                                           request.encode(version)))
        frame = await self.read_frame(timeout)
        correlation, offset = decode_response_header(frame, response_header_version(api_key, version))
        assert correlation == self.correlation
        return API_BY_KEY[api_key].response.decode(frame[offset:], version)

    async def is_closed(self, timeout: float = 5) -> bool:
        """True when the broker closed this connection (EOF) within `timeout`."""
        try:
            data = await asyncio.wait_for(self.reader.read(1), timeout)
        except (ConnectionResetError, BrokenPipeError):
            return True
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionResetError, BrokenPipeError):
            pass


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def produce_req(topic: str, partition: int, records: bytes | None, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)])])


def fetch_req(topic: str, partition: int, offset: int, *, max_wait: int = 0, min_bytes: int = 0,
              max_bytes: int = 10_000_000, partition_max: int = 1_000_000) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                            topic=topic, partitions=[FetchRequest.FetchPartition(
                                partition=partition, fetch_offset=offset, partition_max_bytes=partition_max)])])


def create_req(name: str, partitions: int = 1, rf: int = 1, configs: dict | None = None) -> CreateTopicsRequest:
    return CreateTopicsRequest(timeout_ms=5000, topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])])


def batch(n: int, size: int = 10, ts: int = 1000) -> bytes:
    return build_batch([(ts + i, f"k{i}".encode(), b"v" * size, []) for i in range(n)])


def port(broker, node_id: int | None = None) -> int:
    return broker.nodes[node_id if node_id is not None else broker.node_ids[0]].port


async def produce_one(client: RawClient, topic: str, partition: int, records: bytes, acks: int = 1):
    resp = await client.call(ApiKey.PRODUCE, 9, produce_req(topic, partition, records, acks))
    return resp.responses[0].partition_responses[0]
