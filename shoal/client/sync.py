"""The synchronous faces: the asyncio cores run on a private event loop in a background thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import re
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Self, TypeVar

from shoal.protocol.record_batch import EncodedRecords

from .accumulator import DeliveryCallback, ProducerBatch, RecordFuture
from .consumer import AIOConsumer
from .errors import ClosedError
from .producer import AIOProducer
from .structs import ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata, TopicPartition

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


class _SyncFace:
    """A blocking face of an asyncio core that runs on its own _LoopThread; as a context manager, closed on exit."""

    _lt: _LoopThread
    _core: Any

    def _start(self) -> None:
        """Start the core on the loop thread; a failed start stops the thread."""
        try:
            self._lt.run(self._core.start())
        except BaseException:
            self._lt.stop()
            raise

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Producer(_SyncFace):
    """Synchronous producer: ``send`` returns a :class:`RecordFuture` of the ``RecordMetadata``.

    ``send`` serializes, partitions and appends to the accumulator on the caller's thread
    (under the accumulator's lock) and wakes the I/O loop only when a batch opens or fills,
    so a send costs no thread hop.  Delivery callbacks (``on_delivery(err, metadata)``) run
    on the producer's I/O thread.
    """

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._core = AIOProducer(config, **kwargs)  # validates the config before a thread starts
        self._lt = _LoopThread("shoal-producer")
        self.config = self._core.config
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
        if core._closed:
            raise ClosedError("producer is closed")
        if core.txn is not None:
            core.txn.check_can_send()
        rec = core.make_record(key, value, headers, timestamp_ms, on_delivery)
        parts = core.client.cluster.partitions_for(topic)
        if parts is None:  # unknown topic: fetch its metadata on the loop (blocks up to max.block.ms)
            parts = self._lt.run(core.partitions_for(topic))
        core.check_partition(topic, partition, len(parts))
        acc = core.accumulator
        assert acc is not None and core._wakeup is not None
        if not acc.space.is_set():
            self._lt.run(core.wait_for_space())
        batch, index, wake = core.append(topic, partition, len(parts), rec)
        if wake:
            self._lt.loop.call_soon_threadsafe(core._wakeup.set)
        return RecordFuture(batch, index)

    def send_batch(self, topic: str, partition: int,
                   rows: list[tuple[int, bytes | None, bytes | None, Any]] | EncodedRecords) -> ProducerBatch:
        """Queue rows (or an encoded records section) as one record batch (see ``AIOProducer.send_batch``); ``batch.wait()``,
        ``batch.error`` and ``batch.base_offset`` tell how it went."""
        return self._lt.run(self._core.send_batch(topic, partition, rows))

    def produce(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> RecordFuture:
        """Alias of ``send`` for confluent-kafka users."""
        return self.send(topic, value, key, **kw)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every record sent so far is acknowledged (or failed)."""
        self._lt.run(self._core.flush(None if timeout is None else int(timeout * 1000)))

    def partitions_for(self, topic: str) -> list[int]:
        return self._lt.run(self._core.partitions_for(topic))

    # Transactions (transactional.id set): see AIOProducer.
    def init_transactions(self) -> None:
        self._lt.run(self._core.init_transactions())

    def begin_transaction(self) -> None:
        self._lt.run(_as_coro(self._core.begin_transaction))

    def send_offsets_to_transaction(self, offsets: dict[TopicPartition, OffsetAndMetadata | int],
                                    group: str | ConsumerGroupMetadata) -> None:
        self._lt.run(self._core.send_offsets_to_transaction(offsets, group))

    def commit_transaction(self) -> None:
        self._lt.run(self._core.commit_transaction())

    def abort_transaction(self) -> None:
        self._lt.run(self._core.abort_transaction())

    def close(self, timeout: float | None = None) -> None:
        if self._lt.loop.is_closed():
            return
        try:
            self.flush(timeout)
        finally:
            self._lt.run(self._core.close(0))
            self._lt.stop()



def _copy_result(f: asyncio.Future, cf: concurrent.futures.Future) -> None:
    if f.cancelled():
        cf.cancel()
    elif f.exception() is not None:
        cf.set_exception(f.exception())
    else:
        cf.set_result(f.result())


class Consumer(_SyncFace):
    """Synchronous consumer.  Rebalance listener callbacks run on the calling thread inside poll()."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._lt = _LoopThread("shoal-consumer")
        self._core = AIOConsumer(config, **kwargs)
        self.config = self._core.config
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._core.listener_runner = self._run_on_app_thread
        self._start()

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

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self._core.group_metadata()

    consumer_group_metadata = group_metadata  # confluent-kafka's name

    def close(self, autocommit: bool = True) -> None:
        if self._lt.loop.is_closed():
            return
        try:
            self._call(self._core.close(autocommit))
        finally:
            self._lt.stop()



async def _as_coro(fn: Callable[..., T], *args: Any) -> T:
    # Run a synchronous core method on the loop thread, where the core's state lives.
    return fn(*args)
