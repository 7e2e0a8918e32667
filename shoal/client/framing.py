"""The socket side of a broker connection: size-prefixed frames received into their own buffers.

A ``BufferedProtocol`` rather than a StreamReader: a StreamReader copies every chunk into its
buffer, copies each frame out again (``readexactly``), and reads at most 256 KiB per event-loop
turn; a fetch response of several MiB then costs three copies and a few dozen loop turns.  Here
small frames are cut out of one read-ahead buffer, and a large frame's body is allocated at its
full size and the socket reads straight into it (``recv_into``), as much as is there each time.
Fewer loop turns also matter to the synchronous faces: each turn gives up the GIL and must win
it back from the application's thread.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

_SIZE = struct.Struct(">i")
_READ_AHEAD = 256 * 1024


class FrameProtocol(asyncio.BufferedProtocol):
    """Calls ``on_frame(body)`` for each frame (without its size prefix; a read-only memoryview)
    and ``on_lost(exc)`` once when the connection ends; ``drain`` waits out write back-pressure."""

    def __init__(self, on_frame: Callable[[memoryview], None], on_lost: Callable[[BaseException | None], None]) -> None:
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._scratch = bytearray(_READ_AHEAD)
        self._scratch_mv = memoryview(self._scratch)
        self._have = 0  # bytes in the read-ahead buffer
        self._body: bytearray | None = None  # the large frame being read, and how much of it is in
        self._body_mv: memoryview | None = None
        self._filled = 0
        self.transport: asyncio.Transport | None = None
        self._paused = False
        # Every writer waiting out back-pressure (several produce tasks may wait at once).
        self._drain_waiters: list[asyncio.Future[None]] = []
        self.lost = False

    # -- asyncio.BufferedProtocol ---------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._body_mv is not None:
            return self._body_mv[self._filled:]
        return self._scratch_mv[self._have:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._body is not None:
            self._filled += nbytes
            if self._filled == len(self._body):
                body = self._body
                self._body = self._body_mv = None
                self._deliver(memoryview(body).toreadonly())
            return
        self._have += nbytes
        self._split()

    def _split(self) -> None:
        """Deliver the whole frames in the read-ahead buffer; start reading a large one in place."""
        scratch = self._scratch
        pos, have = 0, self._have
        while have - pos >= 4 and not self.lost:
            (size,) = _SIZE.unpack_from(scratch, pos)
            if size < 0:
                self._fail(ConnectionError(f"negative frame size {size}"))
                return
            start = pos + 4
            if have - start >= size:
                # Copied out: the read-ahead buffer is reused (keys/values must not change under us).
                self._deliver(memoryview(bytes(self._scratch_mv[start:start + size])))
                pos = start + size
                continue
            if 4 + size > len(scratch):
                # Larger than the read-ahead buffer: give the frame its own, the socket reads into it.
                body = bytearray(size)
                got = have - start
                body[:got] = self._scratch_mv[start:have]
                self._body, self._body_mv, self._filled = body, memoryview(body), got
                pos = have
            break
        if pos:
            rest = have - pos
            if rest:
                scratch[:rest] = self._scratch_mv[pos:have]
            self._have = rest

    def _deliver(self, body: memoryview) -> None:
        if not self.lost:
            self._on_frame(body)

    def _fail(self, exc: BaseException) -> None:
        if self.transport is not None:
            self.transport.close()
        self.connection_lost(exc)

    def eof_received(self) -> bool | None:
        return None  # close the transport: connection_lost follows

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.lost:
            return
        self.lost = True
        self._wake_writers()
        self._on_lost(exc)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_writers()

    def _wake_writers(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark; raises
        ConnectionResetError once the connection is lost (as StreamWriter.drain does)."""
        while self._paused and not self.lost:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter
        if self.lost:
            raise ConnectionResetError("connection lost")
