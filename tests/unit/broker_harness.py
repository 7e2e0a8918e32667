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
