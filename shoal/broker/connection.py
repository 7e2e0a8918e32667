"""One client connection: framing, in-order request processing, bad input, bounded memory.

Kafka processes one request at a time per connection (it mutes the channel
until the response is sent), which is what keeps responses in request
order. shoal does the same: frames are parsed as bytes arrive and queued;
one task per connection handles them in turn.

Bad input never takes the broker down: a frame over
`socket.request.max.bytes`, a negative size, an undecodable header or body,
an unknown API key or an unsupported version closes *this* connection after
one log line (ApiVersions with a too-new version gets Kafka's v0-format
UNSUPPORTED_VERSION answer instead, so the client can downgrade).

Memory follows the bytes that really arrive, never what a size field claims:
- a connection holds no read buffer while it has nothing unparsed; small
  frames go through a 64 KiB buffer taken on demand and dropped when empty;
- a large frame gets its own buffer, grown as its bytes arrive;
- every byte of a frame being read or queued counts against one budget per
  broker (`queued.max.request.bytes`); when it is spent, connections stop
  reading until handled requests give memory back;
- a frame whose bytes stop arriving is abandoned after
  `request.read.timeout.ms` (shoal), and a connection with no request for
  `connections.max.idle.ms` is closed, as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import traceback
from collections import deque
from typing import TYPE_CHECKING

from shoal.broker.security.authentication import Authenticator
from shoal.broker.security.principal import ANONYMOUS, subject_dn
from shoal.clock import monotonic_ms
from shoal.waits import wait_event

if TYPE_CHECKING:
    from shoal.broker.node import BrokerNode, NodeListener

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Pause reading when this many unprocessed frames are queued (backpressure).
_MAX_QUEUED = 64
# The read buffer for small frames, and the first size of a large frame's own buffer.
_READ_CHUNK = 64 * 1024
_FIRST_FRAME_CHUNK = 256 * 1024


class CloseConnection(Exception):
    """Raised by dispatch: log `reason` and close the connection."""


class RequestMemory:
    """The broker-wide budget for request bytes being read or waiting to be handled
    (Kafka's `queued.max.request.bytes`; a negative limit means none).

    Bytes are counted as they arrive, so a size field alone costs nothing. When the budget is
    spent, a connection that needs more pauses until handled requests give memory back. If
    nothing is being handled (nothing will come back), one connection may go over the budget to
    finish its request, so large requests can never wait for each other forever.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self.handling = 0  # frames queued or being handled: memory that will come back
        self._over: KafkaConnection | None = None
        self._waiting: deque[KafkaConnection] = deque()

    def _spent(self) -> bool:
        return 0 <= self.limit <= self.used

    def take(self, conn: KafkaConnection, n: int) -> bool:
        """Count ``n`` bytes for ``conn``; False when it must pause until memory comes back."""
        self.used += n
        if self.used > self.peak:
            self.peak = self.used
        if self.limit < 0 or self.used <= self.limit or self._over is conn:
            return True
        if self._over is None and self.handling == 0:
            self._over = conn
            return True
        self._waiting.append(conn)
        return False

    def give(self, n: int) -> None:
        self.used -= n
        self._wake()

    def frame_queued(self) -> None:
        self.handling += 1

    def frame_done(self, n: int) -> None:
        self.handling -= 1
        self.give(n)

    def frame_read(self, conn: KafkaConnection) -> None:
        """``conn`` finished reading a frame (or closed): it no longer needs to go over."""
        if self._over is conn:
            self._over = None
            self._wake()

    def forget(self, conn: KafkaConnection) -> None:
        try:
            self._waiting.remove(conn)
        except ValueError:
            pass
        self.frame_read(conn)

    def _wake(self) -> None:
        while self._waiting and (not self._spent() or (self.handling == 0 and self._over is None)):
            conn = self._waiting.popleft()
            if not self._spent():
                conn._resume("memory")
            else:  # nothing will come back: this one may finish its request over the budget
                self._over = conn
                conn._resume("memory")
                return


class ResponseMemory:
    """A broker-wide budget for large response bytes being built or sent (Fetch data).

    shoal copies what it sends (no sendfile), so four clients each fetching 55 MiB at once would
    hold hundreds of MB. A fetch takes what it may send from this budget before reading and
    gives it back once its response has left the socket buffer; when the budget is spent,
    fetches get less (the first batch still comes whole, KIP-74) or wait for some to come back.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self, want: int) -> int:
        """Up to ``want`` bytes (at least 1); waits while nothing is left."""
        while self.used >= self.limit:
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            finally:
                if not fut.done():
                    fut.cancel()
        grant = max(1, min(want, self.limit - self.used))
        self.used += grant
        self.peak = max(self.peak, self.used)
        return grant

    def adjust(self, granted: int, actual: int) -> None:
        """What was read instead of what was granted (more by at most one batch)."""
        self.used += actual - granted
        self.peak = max(self.peak, self.used)
        if actual < granted:
            self._wake()

    def release(self, n: int) -> None:
        self.used -= n
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.used < self.limit:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)


# Flow control of what a connection sends: past this many unsent bytes the next request waits.
_WRITE_HIGH = 256 * 1024
# A response's share of the response budget comes back when it is sent, or after this long.
_RELEASE_AFTER_S = 5.0


class KafkaConnection(asyncio.BufferedProtocol):
    """Frames are read straight into buffers: small frames through a read buffer, a frame too
    big for it into its own bytearray (no further copy), which the produce path then edits in
    place (base offsets) and writes to the log."""

    def __init__(self, node: BrokerNode, listener: NodeListener) -> None:
        self.node = node
        self.listener = listener
        self.auth = Authenticator(listener.security.sasl)
        self._close_after = False
        self.memory: RequestMemory = node.broker.request_memory
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._buf: bytearray | None = None
        self._start = 0  # unparsed bytes are _buf[_start:_end]
        self._end = 0
        self._frame: bytearray | None = None  # a large frame being read directly
        self._frame_size = 0  # its announced size (the buffer grows to it)
        self._frame_pos = 0
        self._partial_since: int | None = None  # when the frame now being read began (monotonic ms)
        self._queue: asyncio.Queue[bytearray | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._pauses: set[str] = set()
        self.last_active = monotonic_ms()
        self.in_flight = False
        self.closed = False
        self._writable = asyncio.Event()
        self._writable.set()
        self._after_sent: list[tuple[ResponseMemory, int]] = []
        self._throttle_ms = 0  # quota throttling: mute this long once the response is written
        self._mute: asyncio.Future[None] | None = None

    # -- asyncio.BufferedProtocol ------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        try:
            self.auth.principal = self._tls_principal(transport)
            refusal = self.node.admit(self)
        except ValueError as e:  # no ssl.principal.mapping.rules rule matches the certificate, as Kafka refuses it
            refusal = f"its certificate's principal: {e}"
        if refusal is not None:
            log.warning("refusing connection from %s: %s", self.peer, refusal)
            self.closed = True
            transport.abort()
            return
        self.node.connections.add(self)
        transport.set_write_buffer_limits(high=_WRITE_HIGH)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def _tls_principal(self, transport: asyncio.Transport) -> str:
        """User:<the client certificate's subject, mapped> on a TLS listener, else User:ANONYMOUS
        (SASL replaces it once the client authenticates)."""
        ssl_object = transport.get_extra_info("ssl_object")
        cert = ssl_object.getpeercert() if ssl_object is not None else None
        if not cert:
            return ANONYMOUS
        return "User:" + self.listener.security.principal_mapper.name(subject_dn(cert))

    def close_after_response(self) -> None:
        """Close once the response now being built has been written (a failed authentication)."""
        self._close_after = True

    def throttle(self, ms: int) -> None:
        """A quota was violated: once the response now being built has been written (at once, as
        Kafka answers KIP-219 clients), read and handle nothing more for ``ms`` (Kafka mutes the channel)."""
        self._throttle_ms = max(self._throttle_ms, ms)

    async def _muted(self) -> None:
        ms, self._throttle_ms = self._throttle_ms, 0
        loop = asyncio.get_running_loop()
        mute = self._mute = loop.create_future()
        unmute = loop.call_later(ms / 1000, _finish, mute)
        self._pause("throttle")
        try:
            await mute
        finally:
            unmute.cancel()
            self._mute = None
            self._resume("throttle")

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def release_when_sent(self, memory: ResponseMemory, n: int) -> None:
        """Give ``n`` bytes back to ``memory`` once the response now being built has been sent."""
        self._after_sent.append((memory, n))

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            if self._frame_pos == len(frame):  # grow with what has arrived, up to the announced size
                grow = min(self._frame_size, max(2 * len(frame), _FIRST_FRAME_CHUNK)) - len(frame)
                frame.extend(_zeros(grow))
                self._take(grow)
            return memoryview(frame)[self._frame_pos:]
        if self._buf is None:
            self._buf = bytearray(_READ_CHUNK)
            self._take(_READ_CHUNK)
        return memoryview(self._buf)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = monotonic_ms()
        frame = self._frame
        if frame is not None:
            self._frame_pos += nbytes
            if self._frame_pos == self._frame_size:
                self._frame = None
                self._partial_since = None
                self._enqueue(frame)
                self.memory.frame_read(self)
            return
        self._end += nbytes
        self._parse()

    def _parse(self) -> None:
        buf, limit = self._buf, self.auth.max_frame(self.node.max_request_bytes)
        assert buf is not None
        start, end = self._start, self._end
        parsed = False
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > limit:
                log.warning("closing connection from %s: request size %d outside [0, %d] (%s)", self.peer, size,
                            limit, "socket.request.max.bytes" if self.auth.authenticated
                            else "sasl.server.max.receive.size, before authentication")
                self.close()
                return
            have = end - start - 4
            if have >= size:
                frame = buf[start + 4:start + 4 + size]
                self._take(size)
                self._enqueue(frame)
                start += 4 + size
                parsed = True
                continue
            if size + 4 > len(buf):
                # Too big for the read buffer: the rest goes straight into its own buffer, which
                # starts with what is here and grows as more arrives.
                self._frame = buf[start + 4:end]
                self._take(have)
                self._frame_size, self._frame_pos = size, have
                start = end = 0
            break
        if start == end:
            # Nothing unparsed: give the read buffer back (idle connections hold none).
            self._buf = None
            self.memory.give(_READ_CHUNK)
            start = end = 0
        elif start and len(buf) - end < 4096:
            # Keep room to receive the rest of a partial frame.
            buf[:end - start] = buf[start:end]
            start, end = 0, end - start
        self._start, self._end = start, end
        if start == end and self._frame is None:
            self._partial_since = None
        elif parsed or self._partial_since is None:
            self._partial_since = monotonic_ms()

    def _take(self, n: int) -> None:
        """Count ``n`` more bytes of this connection in the broker's budget; pause when spent."""
        if "memory" in self._pauses:  # already waiting: count only
            self.memory.used += n
        elif not self.memory.take(self, n):
            self._pause("memory")

    def _enqueue(self, frame: bytearray) -> None:
        self.memory.frame_queued()
        self._queue.put_nowait(frame)
        if self._queue.qsize() >= _MAX_QUEUED:
            self._pause("queue")

    def _pause(self, reason: str) -> None:
        if not self._pauses and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._pauses.add(reason)

    def _resume(self, reason: str) -> None:
        self._pauses.discard(reason)
        if not self._pauses and self.transport is not None and not self.closed:
            self.transport.resume_reading()

    @property
    def reading_frame_since(self) -> int | None:
        """When (monotonic ms) the frame whose bytes are still arriving began (None: no such frame, or reading
        is paused by the broker, which is not the client's delay)."""
        if self._pauses:
            return None
        return self._partial_since

    def _release_sent(self) -> None:
        while self._after_sent:
            memory, n = self._after_sent.pop()
            memory.release(n)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._writable.set()
        self.node.connections.discard(self)
        self.node.broker.share.connection_closed(self)  # its share sessions end
        self.memory.forget(self)
        # Frames queued or being handled give their bytes back in _run; the rest goes now.
        if self._buf is not None:
            self._buf = None
            self.memory.give(_READ_CHUNK)
        if self._frame is not None:
            self.memory.give(len(self._frame))
            self._frame = None
        if self._mute is not None:
            _finish(self._mute)
        self._queue.put_nowait(None)

    # -- processing --------------------------------------------------------
    async def _run(self) -> None:
        queue = self._queue
        try:
            while True:
                frame = await queue.get()
                if frame is None or self.closed:
                    return
                if "queue" in self._pauses and queue.qsize() < _MAX_QUEUED // 2:
                    self._resume("queue")
                size = len(frame)
                self.in_flight = True
                try:
                    response = await self.node.dispatch(frame, self)
                except CloseConnection as e:
                    log.warning("closing connection from %s: %s", self.peer, e)
                    self.close()
                    return
                except Exception as e:  # a handler bug must not take the broker down
                    # One line (where it happened included); the traceback at DEBUG.
                    where = traceback.extract_tb(e.__traceback__)[-1]
                    log.error("closing connection from %s: unexpected %s: %s (at %s:%d in %s)", self.peer,
                              type(e).__name__, e, where.filename.rsplit("/", 1)[-1], where.lineno, where.name,
                              exc_info=log.isEnabledFor(logging.DEBUG))
                    self.close()
                    return
                finally:
                    self.in_flight = False
                    self.last_active = monotonic_ms()
                    del frame  # drop our reference to the request buffer before waiting again
                    self.memory.frame_done(size)
                if response is not None and not self.closed and self.transport is not None:
                    self.transport.write(response)
                    del response
                if self._close_after:
                    self.close()
                    return
                if self._throttle_ms and not self.closed:
                    await self._muted()
                # As Kafka mutes a channel until its response is sent: the next request of this
                # connection waits while the client has not taken what was sent before. Response
                # budget comes back when sent, or after a few seconds whatever the client does, so
                # a client that never reads cannot starve every other fetch.
                if not self._writable.is_set() and not self.closed:
                    await wait_event(self._writable, _RELEASE_AFTER_S)
                self._release_sent()
                if not self._writable.is_set() and not self.closed:
                    await self._writable.wait()
        finally:
            self._release_sent()
            # Whatever is left in the queue will never be handled: its bytes are free.
            while not queue.empty():
                f = queue.get_nowait()
                if f is not None:
                    self.memory.frame_done(len(f))

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()
        if self._mute is not None:
            _finish(self._mute)
        self._queue.put_nowait(None)


def _finish(mute: asyncio.Future[None]) -> None:
    if not mute.done():
        mute.set_result(None)


_ZERO_BLOCK = bytes(1 << 20)


def _zeros(n: int) -> bytes | memoryview:
    """n zero bytes to extend a buffer with, without building a new object for each growth."""
    if n <= len(_ZERO_BLOCK):
        return memoryview(_ZERO_BLOCK)[:n]
    return bytes(n)
