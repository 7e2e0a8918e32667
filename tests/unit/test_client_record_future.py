"""The asyncio producer's per-record future (AIORecordFuture) behaves as an asyncio future for
the ways applications wait on one: await, callbacks (in record order), gather, wait, wait_for,
shield, cancellation, errors (no broker: batches are completed by hand)."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from shoal.client.accumulator import ProducerBatch, RecordAccumulator
from shoal.client.record_future import AIORecordFuture
from shoal.client.structs import RecordMetadata, TopicPartition

TP = TopicPartition("t", 1)


def batch_of(loop: asyncio.AbstractEventLoop, n: int) -> tuple[ProducerBatch, list[AIORecordFuture]]:
    acc = RecordAccumulator(batch_size=1 << 20, linger_ms=0, buffer_memory=1 << 20)
    futs = []
    for i in range(n):
        b, _ = acc.append(TP, 100 + i, b"k" if i % 2 else None, b"v" * i, now=0)
        futs.append(AIORecordFuture(b, b.count - 1, loop))
    return b, futs


def test_await_result_and_the_future_protocol() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        b, futs = batch_of(loop, 3)
        assert all(asyncio.isfuture(f) for f in futs) and futs[0].get_loop() is loop
        assert not futs[0].done()
        with pytest.raises(asyncio.InvalidStateError):
            futs[0].result()
        loop.call_later(0.01, b.complete, 40, -1)
        assert await futs[2] == RecordMetadata("t", 1, 42, 102, -1, 2)
        assert [f.result() for f in futs] == [RecordMetadata("t", 1, 40 + i, 100 + i, 1 if i % 2 else -1, i)
                                               for i in range(3)]
        assert futs[0].exception() is None and not futs[0].cancel() and not futs[0].cancelled()
        assert "done" in repr(futs[0])

    asyncio.run(main())


def test_callbacks_run_on_the_loop_in_record_order_with_their_context() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        b, futs = batch_of(loop, 4)
        seen: list[tuple[int, str]] = []
        var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="-")
        ctx = contextvars.copy_context()
        ctx.run(var.set, "ctx")
        futs[3].add_done_callback(lambda f: seen.append((3, var.get())))
        futs[1].add_done_callback(lambda f: seen.append((1, var.get())), context=ctx)
        futs[2].add_done_callback(print)
        assert futs[2].remove_done_callback(print) == 1
        b.complete(0, -1)
        assert seen == []  # scheduled, not called from complete()
        await asyncio.sleep(0)
        assert seen == [(1, "ctx"), (3, "-")]
        futs[0].add_done_callback(lambda f: seen.append((0, f.result().offset)))  # already done
        await asyncio.sleep(0)
        assert seen[-1] == (0, 0)

    asyncio.run(main())


def test_failure_reaches_await_gather_and_exception() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        b, futs = batch_of(loop, 2)
        boom = RuntimeError("boom")
        loop.call_later(0.01, b.fail, boom)
        got = await asyncio.gather(*futs, return_exceptions=True)
        assert got == [boom, boom] and futs[1].exception() is boom
        with pytest.raises(RuntimeError):
            await futs[0]

    asyncio.run(main())


def test_wait_wait_for_shield_and_cancel() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        b, futs = batch_of(loop, 3)
        done, pending = await asyncio.wait(futs, timeout=0.01)
        assert not done and len(pending) == 3
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(futs[0], 0.01)
        assert futs[0].cancelled()  # wait_for cancels what it waited on: the wait, not the record
        with pytest.raises(asyncio.CancelledError):
            futs[0].result()
        task = asyncio.ensure_future(asyncio.shield(futs[1]))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        waiter = asyncio.ensure_future(futs[2])  # a Task awaiting the future, cancelled while it waits
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        b.complete(7, -1)
        assert not futs[1].cancelled() and (await futs[1]).offset == 8
        assert b.count == 3  # cancelling a wait took no record back

    asyncio.run(main())


def test_run_until_complete_takes_it() -> None:
    loop = asyncio.new_event_loop()
    try:
        b, futs = batch_of(loop, 1)
        loop.call_later(0.01, b.complete, 3, -1)
        assert loop.run_until_complete(futs[0]).offset == 3
    finally:
        loop.close()
