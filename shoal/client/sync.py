"""The synchronous faces: the asyncio cores run on a private event loop in a background thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

from .accumulator import DeliveryCallback, RecordFuture
from .consumer import AIOConsumer
from .producer import AIOProducer
from .structs import OffsetAndMetadata, TopicPartition

T = TypeVar("T")
P = ParamSpec("P")


class _LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.submit(coro).result()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


class _SyncFace:
    """A blocking face of an asyncio core that runs on its own _LoopThread; as a context manager, closed on exit."""

    def __init__(self, core: Any, thread_name: str) -> None:
        self._core = core  # built first: an invalid config raises before a thread starts
        self.config: dict[str, Any] = core.config
        self._lt = _LoopThread(thread_name)

    def _start(self) -> None:
        """Start the core on the loop thread; a failed start stops the thread."""
        try:
            self._lt.run(self._core.start())
        except BaseException:
            self._lt.stop()
            raise

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of the core on the loop thread and wait for it."""
        return self._lt.run(coro)

    def _task_future(self, start: Callable[[], asyncio.Task]) -> concurrent.futures.Future:
        """Call ``start`` (which starts a task of the core) on the loop; a future of the task's result."""
        task = self._run(_as_coro(start))
        cf: concurrent.futures.Future = concurrent.futures.Future()
        self._lt.loop.call_soon_threadsafe(lambda: task.add_done_callback(lambda t: _copy_result(t, cf)))
        return cf

    def _shutdown(self, close: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run ``close()`` on the loop, then stop the thread (once)."""
        if self._lt.loop.is_closed():
            return
        try:
            self._run(close())
        finally:
            self._lt.stop()

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# Methods that only hand a call to the core, made from the core's: run here, on the loop, or awaited there.

def _delegate(method: Callable[Concatenate[Any, P], T]) -> Callable[Concatenate[_SyncFace, P], T]:
    @functools.wraps(method)
    def call(self: _SyncFace, *args: P.args, **kwargs: P.kwargs) -> T:
        return method(self._core, *args, **kwargs)
    return call


def _on_loop(method: Callable[Concatenate[Any, P], T]) -> Callable[Concatenate[_SyncFace, P], T]:
    @functools.wraps(method)
    def call(self: _SyncFace, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._lt.run(_as_coro(method, self._core, *args, **kwargs))
    return call


def _blocking(method: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]
              ) -> Callable[Concatenate[_SyncFace, P], T]:
    @functools.wraps(method)
    def call(self: _SyncFace, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(method(self._core, *args, **kwargs))
    return call


class Producer(_SyncFace):
    """Synchronous producer: ``send`` returns a :class:`RecordFuture` of the ``RecordMetadata``.

    ``send`` serializes, partitions and appends to the accumulator on the caller's thread
    (under the accumulator's lock) and wakes the I/O loop only when a batch opens or fills,
    so a send costs no thread hop.  Delivery callbacks (``on_delivery(err, metadata)``) run
    on the producer's I/O thread.
    """

    _core: AIOProducer

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(AIOProducer(config, **kwargs), "shoal-producer")
        self._start()

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: list[tuple[str, bytes | None]] | dict[str, bytes | None] | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Enqueue one record; the future resolves when the broker acknowledges it."""
        core = self._core
        if core._closed or core.txn is not None:
            core.check_can_send()
        ts, kb, vb, hdrs = core.serialize(key, value, headers, timestamp_ms)
        queued = core.enqueue(topic, partition, ts, kb, vb, hdrs, on_delivery)
        while queued is None:  # unknown topic or buffer.memory used up: wait on the loop (max.block.ms)
            self._lt.run(core._wait_to_append(topic, partition))
            queued = core.enqueue(topic, partition, ts, kb, vb, hdrs, on_delivery)
        batch, index, wake, _full = queued
        if wake:
            assert core._wakeup is not None
            self._lt.loop.call_soon_threadsafe(core._wakeup.set)
        return RecordFuture(batch, index)

    # ``batch.wait()``, ``batch.error`` and ``batch.base_offset`` tell how a send_batch went.
    send_batch = _blocking(AIOProducer.send_batch)

    produce = send  # confluent-kafka's name

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every record sent so far is acknowledged (or failed)."""
        self._lt.run(self._core.flush(None if timeout is None else int(timeout * 1000)))

    partitions_for = _blocking(AIOProducer.partitions_for)
    # Transactions (transactional.id set): see AIOProducer.
    init_transactions = _blocking(AIOProducer.init_transactions)
    begin_transaction = _on_loop(AIOProducer.begin_transaction)
    send_offsets_to_transaction = _blocking(AIOProducer.send_offsets_to_transaction)
    commit_transaction = _blocking(AIOProducer.commit_transaction)
    abort_transaction = _blocking(AIOProducer.abort_transaction)

    def close(self, timeout: float | None = None) -> None:
        if self._lt.loop.is_closed():
            return
        try:
            self.flush(timeout)
        finally:
            self._shutdown(lambda: self._core.close(0))


def _copy_result(f: asyncio.Future, cf: concurrent.futures.Future) -> None:
    if f.cancelled():
        cf.cancel()
    elif f.exception() is not None:
        cf.set_exception(f.exception())
    else:
        cf.set_result(f.result())


class Consumer(_SyncFace):
    """Synchronous consumer.  Rebalance listener callbacks run on the calling thread inside poll()."""

    _core: AIOConsumer

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(AIOConsumer(config, **kwargs), "shoal-consumer")
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._core.listener_runner = self._run_on_app_thread
        self._start()

    # Listener calls are queued to whichever thread is waiting in _run (the application's).
    async def _run_on_app_thread(self, fn: Callable[[list[TopicPartition]], Any], partitions: list[TopicPartition]) -> None:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._calls.put((fn, partitions, done))
        await asyncio.wrap_future(done)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        fut = self._lt.submit(coro)
        fut.add_done_callback(lambda _f: self._calls.put(None))
        while not fut.done():
            item = self._calls.get()
            if item is None:
                continue
            fn, partitions, done = item
            if not done.set_running_or_notify_cancel():
                continue  # the core stopped waiting (its task was cancelled, e.g. by close): not run
            try:
                fn(partitions)
            except BaseException as e:  # noqa: BLE001 - reported on the core side
                done.set_exception(e)
            else:
                done.set_result(None)
        return fut.result()

    subscribe = _delegate(AIOConsumer.subscribe)
    assign = _delegate(AIOConsumer.assign)
    unsubscribe = _blocking(AIOConsumer.unsubscribe)
    assignment = _delegate(AIOConsumer.assignment)
    subscription = _delegate(AIOConsumer.subscription)
    poll = _blocking(AIOConsumer.poll)
    commit_sync = _blocking(AIOConsumer.commit_sync)

    def commit_async(self, offsets: dict[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: Callable[[dict, BaseException | None], None] | None = None) -> concurrent.futures.Future[None]:
        """Start a commit; the callback runs on the consumer's I/O thread."""
        return self._task_future(lambda: self._core.commit_async(offsets, callback))

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata | int] | None = None, asynchronous: bool = False) -> Any:
        return self.commit_async(offsets) if asynchronous else self.commit_sync(offsets)

    committed = _blocking(AIOConsumer.committed)
    position = _blocking(AIOConsumer.position)
    seek = _on_loop(AIOConsumer.seek)
    seek_to_beginning = _on_loop(AIOConsumer.seek_to_beginning)
    seek_to_end = _on_loop(AIOConsumer.seek_to_end)
    pause = _on_loop(AIOConsumer.pause)
    resume = _on_loop(AIOConsumer.resume)
    paused = _delegate(AIOConsumer.paused)
    beginning_offsets = _blocking(AIOConsumer.beginning_offsets)
    end_offsets = _blocking(AIOConsumer.end_offsets)
    offsets_for_times = _blocking(AIOConsumer.offsets_for_times)
    topics = _blocking(AIOConsumer.topics)

    @property
    def group_generation(self) -> tuple[int, str]:
        return self._core.group_generation

    group_metadata = _delegate(AIOConsumer.group_metadata)
    consumer_group_metadata = group_metadata  # confluent-kafka's name

    def close(self, autocommit: bool = True) -> None:
        self._shutdown(lambda: self._core.close(autocommit))


async def _as_coro(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    # Run a synchronous core method on the loop thread, where the core's state lives.
    return fn(*args, **kwargs)
