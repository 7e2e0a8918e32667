"""The asyncio producer's per-record future: an asyncio future backed by its record's batch.

``AIOProducer.send`` returns one per record. An ``asyncio.Future`` per record cost more than
the rest of a send together (creating it, then resolving each with its own ``RecordMetadata``
when the batch completes, and the garbage collector's work on the many live futures), so a
record's future is a light object reading its batch, as the sync face's ``RecordFuture`` and
Java's ``FutureRecordMetadata``: nothing happens per record when the batch completes unless
someone waits on that record (``await``, ``add_done_callback``).

It follows asyncio's future protocol (``asyncio.isfuture`` is true, ``_asyncio_future_blocking``,
``get_loop``, ``add_done_callback(fn, context=)``), so a Task awaits it, and ``asyncio.wait``,
``gather``, ``wait_for``, ``shield`` and ``run_until_complete`` take it as they take a Future.
Cancelling it cancels the wait, not the record (which was handed to the producer), as
cancelling the Future the producer returned did before.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .accumulator import ProducerBatch
    from .structs import RecordMetadata


class AIORecordFuture:
    """The future of one record's ``RecordMetadata`` (see the module docstring)."""

    __slots__ = ("_batch", "_index", "_loop", "_callbacks", "_cancelled", "_asyncio_future_blocking")

    def __init__(self, batch: ProducerBatch, index: int, loop: asyncio.AbstractEventLoop) -> None:
        self._batch = batch
        self._index = index
        self._loop = loop
        self._callbacks: list[tuple[Callable[[Any], Any], contextvars.Context | None]] | None = None
        self._cancelled = False
        self._asyncio_future_blocking = False  # asyncio's mark of a future (set by the awaiting Task)

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def done(self) -> bool:
        return self._cancelled or self._batch.done

    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self, msg: Any = None) -> bool:
        """Stop waiting (the record is still sent): False once the record's fate is known."""
        if self.done():
            return False
        self._cancelled = True
        self._schedule_callbacks()
        return True

    def result(self) -> RecordMetadata:
        """The record's metadata; raises its delivery error (as ``asyncio.Future.result``)."""
        self._check_done()
        if self._batch.error is not None:
            raise self._batch.error
        return self._batch.metadata(self._index)

    def exception(self) -> BaseException | None:
        self._check_done()
        return self._batch.error

    def _check_done(self) -> None:
        if self._cancelled:
            raise asyncio.CancelledError()
        if not self._batch.done:
            raise asyncio.InvalidStateError("Result is not ready.")

    def add_done_callback(self, fn: Callable[[Any], Any], *, context: contextvars.Context | None = None) -> None:
        """Call ``fn(self)`` on the loop once the record's fate is known (soon, if it is)."""
        if self.done():
            self._loop.call_soon(fn, self, context=context)
            return
        if self._callbacks is None:
            self._callbacks = []
            # The batch wakes its records' waiters in record order when it completes.
            self._batch.add_record_waiter(self._index, self)
        self._callbacks.append((fn, context))

    def remove_done_callback(self, fn: Callable[[Any], Any]) -> int:
        if not self._callbacks:
            return 0
        kept = [(f, ctx) for f, ctx in self._callbacks if f != fn]
        removed = len(self._callbacks) - len(kept)
        self._callbacks[:] = kept
        return removed

    def _schedule_callbacks(self) -> None:
        """The record's fate is known (or the wait cancelled): run the callbacks on the loop, once."""
        callbacks, self._callbacks = self._callbacks, []
        for fn, context in callbacks or ():
            self._loop.call_soon(fn, self, context=context)

    def batch_done(self) -> None:
        """Called by the batch (on the loop) when it completes or fails."""
        if not self._cancelled:
            self._schedule_callbacks()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        if not self.done():
            self._asyncio_future_blocking = True
            yield self  # the Task waits for it through add_done_callback
        if not self.done():
            raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__

    def __repr__(self) -> str:
        state = ("cancelled" if self._cancelled else "pending" if not self._batch.done
                 else "failed" if self._batch.error else "done")
        return f"<AIORecordFuture {self._batch.tp} #{self._index} {state}>"
