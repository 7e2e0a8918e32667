"""The synchronous faces: the asyncio cores run on a private event loop in a background thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import re
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .consumer import AIOConsumer
from .producer import AIOProducer, DeliveryCallback
from .structs import ConsumerRecord, OffsetAndMetadata, RecordMetadata, TopicPartition

T = TypeVar("T")


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


class Producer:
    """Synchronous producer: ``send`` returns a ``concurrent.futures.Future[RecordMetadata]``.

    Delivery callbacks (``on_delivery(err, metadata)``) run on the producer's I/O thread.
    """

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._lt = _LoopThread("shoal-producer")
        self._core = AIOProducer(config, **kwargs)
        self.config = self._core.config
        self._pending: deque[tuple[tuple, dict, concurrent.futures.Future]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self._sending: set[asyncio.Task] = set()
        try:
            self._lt.run(self._core.start())
        except BaseException:
            self._lt.stop()
            raise

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: list[tuple[str, bytes | None]] | dict[str, bytes | None] | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> concurrent.futures.Future[RecordMetadata]:
        """Enqueue one record; the future resolves when the broker acknowledges it."""
        acc = self._core.accumulator
        if acc is not None and not acc.space.is_set():
            self._lt.run(self._wait_space())
        cf: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
        with self._lock:
            self._pending.append(((topic, value, key, partition, timestamp_ms, headers), {"on_delivery": on_delivery}, cf))
            schedule = not self._scheduled
            self._scheduled = True
        if schedule:
            self._lt.loop.call_soon_threadsafe(self._drain_pending)
        return cf

    async def _wait_space(self) -> None:
        acc = self._core.accumulator
        assert acc is not None
        await asyncio.wait_for(acc.space.wait(), self.config["max.block.ms"] / 1000)

    def _drain_pending(self) -> None:
        # Runs on the loop: hand the queued sends to the core in arrival order.
        with self._lock:
            items = list(self._pending)
            self._pending.clear()
            self._scheduled = False
        if items:
            task = asyncio.get_running_loop().create_task(self._send_all(items))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send_all(self, items: list[tuple[tuple, dict, concurrent.futures.Future]]) -> None:
        for args, kw, cf in items:
            try:
                afut = await self._core.send(*args, **kw)
            except BaseException as e:  # noqa: BLE001 - report on the caller's future
                cf.set_exception(e)
                continue
            afut.add_done_callback(lambda f, cf=cf: _copy_result(f, cf))

    def produce(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> concurrent.futures.Future[RecordMetadata]:
        """Alias of ``send`` for confluent-kafka users."""
        return self.send(topic, value, key, **kw)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every record sent so far is acknowledged (or failed)."""
        self._lt.run(self._flush(None if timeout is None else int(timeout * 1000)))

    async def _flush(self, timeout_ms: int | None) -> None:
        while True:
            with self._lock:
                empty = not self._pending and not self._scheduled
            if empty:
                break
            await asyncio.sleep(0.001)
        if self._sending:  # let queued sends reach the accumulator first
            await asyncio.gather(*self._sending, return_exceptions=True)
        await self._core.flush(timeout_ms)

    def partitions_for(self, topic: str) -> list[int]:
        return self._lt.run(self._core.partitions_for(topic))

    def close(self, timeout: float | None = None) -> None:
        if self._lt.loop.is_closed():
            return
        try:
            self.flush(timeout)
        finally:
            self._lt.run(self._core.close(0))
            self._lt.stop()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _copy_result(f: asyncio.Future, cf: concurrent.futures.Future) -> None:
    if f.cancelled():
        cf.cancel()
    elif f.exception() is not None:
        cf.set_exception(f.exception())
    else:
        cf.set_result(f.result())


class Consumer:
    """Synchronous consumer.  Rebalance listener callbacks run on the calling thread inside poll()."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._lt = _LoopThread("shoal-consumer")
        self._core = AIOConsumer(config, **kwargs)
        self.config = self._core.config
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._core.listener_runner = self._run_on_app_thread
        try:
            self._lt.run(self._core.start())
        except BaseException:
            self._lt.stop()
            raise

    # Listener calls are queued to whichever thread is waiting in _call (the application's).
    async def _run_on_app_thread(self, fn: Callable[[list[TopicPartition]], Any], partitions: list[TopicPartition]) -> None:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._calls.put((fn, partitions, done))
        await asyncio.wrap_future(done)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        fut = self._lt.submit(coro)
        fut.add_done_callback(lambda _f: self._calls.put(None))
        while not fut.done():
            item = self._calls.get()
            if item is None:
                continue
            fn, partitions, done = item
            try:
                fn(partitions)
            except BaseException as e:  # noqa: BLE001 - reported on the core side
                done.set_exception(e)
            else:
                done.set_result(None)
        return fut.result()

    def subscribe(self, topics: list[str] | None = None, pattern: str | re.Pattern[str] | None = None,
                  listener: Any = None) -> None:
        self._core.subscribe(topics, pattern=pattern, listener=listener)

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._core.assign(partitions)

    def unsubscribe(self) -> None:
        self._call(self._core.unsubscribe())

    def assignment(self) -> set[TopicPartition]:
        return self._core.assignment()

    def subscription(self) -> set[str]:
        return self._core.subscription()

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records by partition, at most ``max.poll.records`` in all; {} when none within the timeout."""
        return self._call(self._core.poll(timeout_ms, max_records))

    def commit_sync(self, offsets: dict[TopicPartition, OffsetAndMetadata | int] | None = None,
                    timeout_ms: int | None = None) -> None:
        self._call(self._core.commit_sync(offsets, timeout_ms))

    def commit_async(self, offsets: dict[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: Callable[[dict, BaseException | None], None] | None = None) -> concurrent.futures.Future[None]:
        """Start a commit; the callback runs on the consumer's I/O thread."""
        async def start() -> asyncio.Task:
            return self._core.commit_async(offsets, callback)

        task = self._call(start())
        cf: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._lt.loop.call_soon_threadsafe(lambda: task.add_done_callback(lambda t: _copy_result(t, cf)))
        return cf

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata | int] | None = None, asynchronous: bool = False) -> Any:
        return self.commit_async(offsets) if asynchronous else self.commit_sync(offsets)

    def committed(self, partitions: list[TopicPartition], timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._call(self._core.committed(partitions, timeout_ms))

    def position(self, tp: TopicPartition) -> int:
        return self._call(self._core.position(tp))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._lt.run(_as_coro(self._core.seek, tp, offset))

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._lt.run(_as_coro(self._core.seek_to_beginning, *partitions))

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._lt.run(_as_coro(self._core.seek_to_end, *partitions))

    def pause(self, *partitions: TopicPartition) -> None:
        self._lt.run(_as_coro(self._core.pause, *partitions))

    def resume(self, *partitions: TopicPartition) -> None:
        self._lt.run(_as_coro(self._core.resume, *partitions))

    def paused(self) -> set[TopicPartition]:
        return self._core.paused()

    def beginning_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return self._call(self._core.beginning_offsets(partitions))

    def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return self._call(self._core.end_offsets(partitions))

    def offsets_for_times(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int] | None]:
        return self._call(self._core.offsets_for_times(timestamps))

    def topics(self) -> dict[str, list[int]]:
        return self._call(self._core.topics())

    @property
    def group_generation(self) -> tuple[int, str]:
        return self._core.group_generation

    def close(self, autocommit: bool = True) -> None:
        if self._lt.loop.is_closed():
            return
        try:
            self._call(self._core.close(autocommit))
        finally:
            self._lt.stop()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


async def _as_coro(fn: Callable[..., T], *args: Any) -> T:
    # Run a synchronous core method on the loop thread, where the core's state lives.
    return fn(*args)
