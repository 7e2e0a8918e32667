"""One client connection: framing, in-order request processing, bad input.

Kafka processes one request at a time per connection (it mutes the channel
until the response is sent), which is what keeps responses in request
order. shoal does the same: frames are parsed as bytes arrive and queued;
one task per connection handles them in turn.

Bad input never takes the broker down: a frame over
`socket.request.max.bytes`, a negative size, an undecodable header or body,
an unknown API key or an unsupported version closes *this* connection after
one log line (ApiVersions with a too-new version gets Kafka's v0-format
UNSUPPORTED_VERSION answer instead, so the client can downgrade).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shoal.broker.node import BrokerNode

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Pause reading when this many unprocessed frames are queued (backpressure).
_MAX_QUEUED = 64


class CloseConnection(Exception):
    """Raised by dispatch: log `reason` and close the connection."""


class KafkaConnection(asyncio.Protocol):
    def __init__(self, node: BrokerNode) -> None:
        self.node = node
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._buf = bytearray()
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._paused = False
        self.closed = False

    # -- asyncio.Protocol --------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.node.connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        limit = self.node.max_request_bytes
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > limit:
                log.warning("closing connection from %s: request size %d outside [0, %d] "
                            "(socket.request.max.bytes)", self.peer, size, limit)
                self.close()
                return
            if end - pos - 4 < size:
                break
            self._queue.put_nowait(bytes(buf[pos + 4:pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        if self._queue.qsize() >= _MAX_QUEUED and not self._paused and self.transport:
            self._paused = True
            self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.node.connections.discard(self)
        self._queue.put_nowait(None)

    # -- processing --------------------------------------------------------
    async def _run(self) -> None:
        queue = self._queue
        while True:
            frame = await queue.get()
            if frame is None or self.closed:
                return
            if self._paused and queue.qsize() < _MAX_QUEUED // 2 and self.transport:
                self._paused = False
                self.transport.resume_reading()
            try:
                response = await self.node.dispatch(frame, self)
            except CloseConnection as e:
                log.warning("closing connection from %s: %s", self.peer, e)
                self.close()
                return
            except Exception:  # a handler bug must not take the broker down
                log.exception("closing connection from %s: unexpected error", self.peer)
                self.close()
                return
            if response is not None and not self.closed and self.transport is not None:
                self.transport.write(response)

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()
        self._queue.put_nowait(None)
