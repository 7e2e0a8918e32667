"""The producer's accumulator, batches and RecordFuture (no broker: batches are completed by hand)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from shoal.client.accumulator import (
    BATCH_OVERHEAD,
    ProducerBatch,
    RecordAccumulator,
    RecordFuture,
)
from shoal.client.errors import KafkaTimeoutError
from shoal.client.record_future import AIORecordFuture
from shoal.client.structs import RecordMetadata, TopicPartition
from shoal.protocol.record_batch import iter_records, parse_header
from shoal.protocol.record_encode import build_batch

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def add(acc: RecordAccumulator, tp: TopicPartition = TP0, value: bytes = b"v" * 10, key: bytes | None = None,
        ts: int = 1000, now: int = 0, **kw: object) -> tuple[ProducerBatch, bool]:
    return acc.append(tp, ts, key, value, None, now=now, **kw)  # type: ignore[arg-type]


def rsize(value: bytes = b"v" * 10, key: bytes | None = None, ts: int = 1000) -> int:
    """A record's encoded size, as the first of a batch."""
    return ProducerBatch(TP0, 0).append(ts, key, value, None, 0)


def test_append_fills_a_batch_then_opens_the_next() -> None:
    one = rsize()
    acc = RecordAccumulator(batch_size=BATCH_OVERHEAD + 3 * one, linger_ms=100, buffer_memory=1 << 20)
    batches = [add(acc) for _ in range(7)]
    assert [new for _b, new in batches] == [True, False, False, True, False, False, True]
    q = acc.batches[TP0]
    assert [b.count for b in q] == [3, 3, 1]
    assert all(b.size == BATCH_OVERHEAD + b.count * one for b in q)
    assert q[0].closed and q[1].closed and not q[2].closed
    assert acc.buffered_bytes == sum(b.size for b in q)


def test_a_record_larger_than_batch_size_gets_a_batch_of_its_own() -> None:
    acc = RecordAccumulator(batch_size=100, linger_ms=0, buffer_memory=1 << 20)
    b, new = add(acc, value=b"x" * 500)
    assert new and b.count == 1
    b2, new2 = add(acc, value=b"y")
    assert new2 and b2 is not b


def test_ready_by_linger_size_flush_and_close() -> None:
    acc = RecordAccumulator(batch_size=1 << 20, linger_ms=50, buffer_memory=1 << 20)
    add(acc, now=1000)
    add(acc, TP1, now=1020)
    assert list(acc.ready(1049, False)) == []
    assert acc.next_deadline(1000) == 1050
    assert list(acc.ready(1050, False)) == [TP0]
    assert list(acc.ready(1070, False)) == [TP0, TP1]
    assert list(acc.ready(1000, True)) == [TP0, TP1]  # closing: everything goes now
    acc.flushing += 1
    assert list(acc.ready(1000, False)) == [TP0, TP1]
    acc.flushing -= 1
    b = acc.pop(TP0)
    assert b.closed and list(acc.ready(1070, False)) == [TP1]
    # A retried batch goes back to the head of its queue and waits out its backoff.
    add(acc, now=1070)
    b.retry_after_ms = 2000
    acc.reenqueue(b)
    assert acc.batches[TP0][0] is b
    assert TP0 not in list(acc.ready(1999, False))
    assert TP0 in list(acc.ready(2000, False))
    assert acc.next_deadline(1070) == 1070  # TP1's linger ran out at 1070


def test_buffer_memory_clears_and_sets_space() -> None:
    acc = RecordAccumulator(batch_size=200, linger_ms=0, buffer_memory=300)
    batches = []
    while acc.space.is_set():
        batches.append(add(acc, value=b"x" * 50)[0])
    assert acc.buffered_bytes >= 300
    for b in {id(b): b for b in batches}.values():
        acc.release(b)
    assert acc.space.is_set() and acc.buffered_bytes == 0


def test_batch_encodes_its_records_once() -> None:
    acc = RecordAccumulator(batch_size=1 << 20, linger_ms=0, buffer_memory=1 << 20)
    for i in range(5):
        acc.append(TP0, 100 + i, b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], now=0)
    b = acc.pop(TP0)
    payload = b.encode(compression=4)
    assert b.encode(compression=0) is payload  # retries resend identical bytes
    h = parse_header(payload)
    assert h.records_count == 5 and h.compression == 4
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(payload)]
    assert got == [(i, 100 + i, b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(5)]


def test_records_encoded_as_they_come_are_build_batchs_bytes() -> None:
    """Each record is encoded into its batch as it is appended: the batch must be the one
    build_batch makes of the same records (timestamps out of order, null and empty keys and
    values, headers, a large value whose lengths take several varint bytes)."""
    rows = [(5000, None, b"a", None), (4990, b"", None, [("h", None), ("k", b"v")]),
            (5300, b"key", b"x" * 20000, None), (5001, None, None, [("only", b"")])]
    acc = RecordAccumulator(batch_size=1 << 20, linger_ms=0, buffer_memory=1 << 20)
    for ts, k, v, h in rows:
        acc.append(TP0, ts, k, v, h, now=0)
    b = acc.pop(TP0)
    b.producer_id, b.producer_epoch, b.base_sequence = 7, 1, 40
    assert b.encode(0) == build_batch(rows, producer_id=7, producer_epoch=1, base_sequence=40)
    assert b.size == len(b.encode(0))  # batch.size counts encoded bytes
    b.complete(base_offset=10, log_append_time=-1)
    assert [RecordFuture(b, i).result() for i in range(4)] == [
        RecordMetadata("t", 0, 10, 5000, -1, 1), RecordMetadata("t", 0, 11, 4990, 0, -1),
        RecordMetadata("t", 0, 12, 5300, 3, 20000), RecordMetadata("t", 0, 13, 5001, -1, -1)]


def test_record_futures_complete_from_their_batch() -> None:
    acc = RecordAccumulator(batch_size=1 << 20, linger_ms=0, buffer_memory=1 << 20)
    delivered: list[tuple] = []
    done_cb: list[RecordMetadata] = []
    futs = []
    for i in range(3):
        b, _ = add(acc, value=b"v%d" % i, key=b"k" if i else None, ts=500 + i,
                   callback=lambda err, md: delivered.append((err, md)))
        futs.append(RecordFuture(b, b.count - 1))
    futs[1].add_done_callback(lambda f: done_cb.append(f.result()))
    assert not any(f.done() for f in futs)
    with pytest.raises(KafkaTimeoutError):
        futs[0].result(timeout=0.01)
    b.complete(base_offset=40, log_append_time=-1)
    assert [f.result(0) for f in futs] == [
        RecordMetadata("t", 0, 40, 500, -1, 2), RecordMetadata("t", 0, 41, 501, 1, 2),
        RecordMetadata("t", 0, 42, 502, 1, 2)]
    assert [md for _e, md in delivered] == [f.result() for f in futs] and all(e is None for e, _ in delivered)
    assert done_cb == [futs[1].result()]
    late: list[RecordFuture] = []
    futs[2].add_done_callback(late.append)  # already done: called at once
    assert late == [futs[2]]
    b.fail(RuntimeError("too late"))  # a batch is finished once
    assert futs[0].exception() is None


def test_log_append_time_and_failure() -> None:
    acc = RecordAccumulator(batch_size=1 << 20, linger_ms=0, buffer_memory=1 << 20)
    b, _ = add(acc, ts=1)
    b.complete(base_offset=7, log_append_time=99)
    assert RecordFuture(b, 0).result().timestamp == 99
    errs: list = []
    b2, _ = add(acc, TP1, callback=lambda err, md: errs.append((err, md)))
    boom = ValueError("boom")
    b2.fail(boom)
    f = RecordFuture(b2, 0)
    assert f.done() and f.exception() is boom
    with pytest.raises(ValueError):
        f.result()
    assert errs == [(boom, None)]


def test_a_failing_callback_does_not_stop_the_others() -> None:
    acc = RecordAccumulator(batch_size=1 << 20, linger_ms=0, buffer_memory=1 << 20)
    seen: list[int] = []

    def bad(err: object, md: object) -> None:
        raise RuntimeError("user bug")

    b, _ = add(acc, callback=bad)
    add(acc, callback=lambda e, md: seen.append(md.offset))
    b.complete(0, -1)
    assert seen == [1]


def test_result_waits_across_threads() -> None:
    acc = RecordAccumulator(batch_size=1 << 20, linger_ms=0, buffer_memory=1 << 20)
    b, _ = add(acc)
    f = RecordFuture(b, 0)
    threading.Timer(0.05, b.complete, (3, -1)).start()
    t = time.monotonic()
    assert f.result(timeout=5).offset == 3
    assert time.monotonic() - t >= 0.04


def test_asyncio_futures_and_waiter() -> None:
    async def main() -> None:
        acc = RecordAccumulator(batch_size=1 << 20, linger_ms=0, buffer_memory=1 << 20)
        loop = asyncio.get_running_loop()
        b, _ = add(acc)
        fut = AIORecordFuture(b, 0, loop)
        w = b.waiter()
        loop.call_later(0.01, b.complete, 5, -1)
        await asyncio.wait_for(w, 2)
        assert (await fut).offset == 5
        assert b.waiter().done()

    asyncio.run(main())
