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


class KafkaConnection(asyncio.BufferedProtocol):
    """Frames are read straight into buffers: small frames through a shared read
    buffer, a frame too big for it into its own bytearray (no further copy), which
    the produce path then edits in place (base offsets) and writes to the log."""

    _READ_BUFFER = 256 * 1024

    def __init__(self, node: BrokerNode) -> None:
        self.node = node
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._buf = bytearray(self._READ_BUFFER)
        self._start = 0  # unparsed bytes are _buf[_start:_end]
        self._end = 0
        self._frame: bytearray | None = None  # a large frame being read directly
        self._frame_pos = 0
        self._queue: asyncio.Queue[bytearray | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._paused = False
        self.closed = False

    # -- asyncio.BufferedProtocol ------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.node.connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_pos:]
        return memoryview(self._buf)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._frame_pos += nbytes
            if self._frame_pos == len(self._frame):
                self._enqueue(self._frame)
                self._frame = None
            return
        self._end += nbytes
        self._parse()

    def _parse(self) -> None:
        buf, limit = self._buf, self.node.max_request_bytes
        start, end = self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > limit:
                log.warning("closing connection from %s: request size %d outside [0, %d] "
                            "(socket.request.max.bytes)", self.peer, size, limit)
                self.close()
                return
            have = end - start - 4
            if have >= size:
                self._enqueue(buf[start + 4:start + 4 + size])
                start += 4 + size
                continue
            if size + 4 > len(buf):
                # Too big for the read buffer: read the rest straight into its own buffer.
                frame = bytearray(size)
                frame[:have] = buf[start + 4:end]
                self._frame, self._frame_pos = frame, have
                start = end = 0
            break
        if start == end:
            start = end = 0
        elif start and len(buf) - end < 4096:
            # Keep room to receive the rest of a partial frame.
            buf[:end - start] = buf[start:end]
            start, end = 0, end - start
        self._start, self._end = start, end

    def _enqueue(self, frame: bytearray) -> None:
        self._queue.put_nowait(frame)
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
            del frame  # drop our reference to the request buffer before waiting again
            if response is not None and not self.closed and self.transport is not None:
                self.transport.write(response)

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()
        self._queue.put_nowait(None)
