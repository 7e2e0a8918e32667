"""Fetched records decoded lazily (shoal/client/records.py) equal what an eager decode of the same
fetch gives: every codec, headers, LogAppendTime, compacted batches, control batches and aborted
transactions; RecordList behaves as the list it stands for; pipelined fetch accounting."""

from __future__ import annotations

import asyncio
import copy
import pickle
import random
from types import SimpleNamespace
from typing import Any

import pytest

from shoal.client.fetcher import CompletedFetch, FetchBuffer, Fetcher
from shoal.client.records import RecordList, decode_records
from shoal.client.structs import ConsumerRecord, TopicPartition
from shoal.client.subscription import SubscriptionState
from shoal.protocol import record_batch as rb
from shoal.protocol.errors import ErrorCode
from shoal.protocol.record_encode import build_batch, build_control_batch, rebuild_batch

TP = TopicPartition("t", 0)


def eager(data: bytes, fetch_offset: int, aborted: list[tuple[int, int]] | None = None) -> list[ConsumerRecord]:
    """What the consumer must return for one fetch: the reference, record by record."""
    pending = sorted(aborted or [])
    aborted_pids: set[int] = set()
    out = []
    for h in rb.iter_batches(data):
        while pending and pending[0][0] <= h.last_offset:
            aborted_pids.add(pending.pop(0)[1])
        if h.last_offset < fetch_offset:
            continue
        if h.is_control:
            if h.producer_id in aborted_pids and rb.control_type(data, h) == rb.CONTROL_ABORT:
                aborted_pids.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborted_pids:
            continue
        out += [ConsumerRecord(TP.topic, TP.partition, r.offset, r.timestamp, h.timestamp_type, r.key, r.value,
                               r.headers) for r in rb.iter_records(data, h) if r.offset >= fetch_offset]
    return out


def rows(rng: random.Random, n: int, start_ts: int = 1_700_000_000_000) -> list[Any]:
    out = []
    for i in range(n):
        key = rng.choice([None, b"", b"k%d" % i, bytes(rng.randrange(256) for _ in range(rng.choice([1, 70, 300])))])
        value = rng.choice([None, b"", b"v" * rng.choice([1, 63, 64, 200, 9000])])
        headers = rng.choice([None, [], [("h", b"x")], [("a", None), ("é", b"y" * 100)]])
        out.append((start_ts + rng.randrange(-100, 20000), key, value, headers))
    return out


def subs_at(position: int, *tps: TopicPartition) -> SubscriptionState:
    s = SubscriptionState("earliest")
    s.assign_from_user(list(tps or [TP]))
    for tp in tps or [TP]:
        s.seek(tp, position)
    return s


def drain(data: bytes, fetch_offset: int, step: int, aborted: list[tuple[int, int]] | None = None,
          touch: bool = True) -> tuple[list[ConsumerRecord], int]:
    s = subs_at(fetch_offset)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP, fetch_offset, data, aborted))
    got: list[ConsumerRecord] = []
    lists = []
    while True:
        polled = buf.collect(s, step)
        if not polled:
            break
        recs = polled[TP]
        assert 0 < len(recs) <= step
        lists.append(recs)
        if touch:
            got.extend(recs)
    if not touch:  # decoded only now, after all the polls
        for recs in lists:
            got.extend(recs)
    pos = s.state(TP).position
    assert pos is not None
    return got, pos


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_decode_records_equals_iter_records(codec: int) -> None:
    rng = random.Random(codec)
    for ts_type in (0, 1):
        data = build_batch(rows(rng, 200), base_offset=1000, compression=codec, timestamp_type=ts_type)
        h = rb.parse_header(data)
        want = [ConsumerRecord("t", 3, r.offset, r.timestamp, ts_type, r.key, r.value, r.headers)
                for r in rb.iter_records(data, h)]
        got = decode_records(bytes(rb.records_payload(data, h)), h, "t", 3)
        assert got == want
        assert all(type(r) is ConsumerRecord for r in got)
        assert all(isinstance(r.key, bytes | None) and isinstance(r.value, bytes | None) for r in got)


def test_truncated_records_are_corrupt() -> None:
    data = build_batch([(1, b"k", b"v" * 300, None)] * 3)
    h = rb.parse_header(data)
    payload = rb.records_payload(data, h)
    with pytest.raises(rb.CorruptRecordError):
        decode_records(payload[:-5], h, "t", 0)



def test_records_without_headers_each_get_their_own_list() -> None:
    data = build_batch([(5, None if i % 2 else b"k", b"v", [("h", b"1")] if i == 3 else None) for i in range(6)])
    h = rb.parse_header(data)
    recs = decode_records(bytes(rb.records_payload(data, h)), h, "t", 0)
    assert [r.key for r in recs] == [b"k", None] * 3 and recs[3].headers == [("h", b"1")]
    recs[0].headers.append(("x", None))
    assert [r.headers for r in recs] == [[("x", None)], [], [], [("h", b"1")], [], []]


def test_a_batch_whose_count_says_contiguous_but_offsets_are_not_is_corrupt() -> None:
    data = build_batch([(5, None, b"v", None), (5, None, b"w", None)], base_offset=10)
    h = rb.parse_header(data)
    payload = bytearray(rb.records_payload(data, h))
    assert payload[1:4] == b"\x00\x00\x00"  # attributes, timestamp delta, offset delta of the first record
    payload[3] = 2  # offset delta 1: offsets 11, 11
    with pytest.raises(rb.CorruptRecordError, match="out-of-order"):
        decode_records(bytes(payload), h, "t", 0)


@pytest.mark.parametrize("codec", [0, 1, 3])
def test_crc_checked_batches_are_decoded_from_the_crc_copy(codec: int) -> None:
    rng = random.Random(11)
    data = b"".join(build_batch(rows(rng, n), base_offset=base, compression=codec) for base, n in ((0, 30), (30, 20)))
    checked, unchecked = CompletedFetch(TP, 0, memoryview(data), check_crcs=True), CompletedFetch(TP, 0, data,
                                                                                                  check_crcs=False)
    batches = [b for _, b in checked._segments]
    assert all(b._data is None for b in batches)  # the response's buffer is not kept
    assert checked.take(100) == unchecked.take(100) == eager(data, 0)


@pytest.mark.parametrize("codec", [0, 1, 3])
@pytest.mark.parametrize("touch", [True, False])
def test_lazy_poll_equals_eager_plain_and_compressed(codec: int, touch: bool) -> None:
    rng = random.Random(7)
    data = b"".join(build_batch(rows(rng, n), base_offset=base, compression=codec)
                    for base, n in ((0, 10), (10, 1), (11, 40), (51, 9)))
    for fetch_offset in (0, 5, 10, 11, 30, 59):
        for step in (1, 7, 10, 500):
            got, pos = drain(data, fetch_offset, step, touch=touch)
            assert got == eager(data, fetch_offset)
            assert pos == 60


def test_compacted_batches_with_offset_gaps() -> None:
    rng = random.Random(3)
    full = build_batch(rows(rng, 20), base_offset=100)
    h = rb.parse_header(full)
    kept = [r for r in rb.iter_records(full, h) if r.offset % 3 == 0]  # the cleaner dropped the rest
    data = rebuild_batch(h, kept) + build_batch(rows(rng, 5), base_offset=120)
    for fetch_offset in (100, 101, 104, 118, 119):
        for step in (1, 2, 3, 50):
            got, pos = drain(data, fetch_offset, step)
            assert got == eager(data, fetch_offset)
            assert pos == 125


def test_control_batches_and_aborted_transactions_are_skipped() -> None:
    def txn(base: int, pid: int, n: int) -> bytes:
        return build_batch([(1, None, b"p%d-%d" % (pid, base + i), None) for i in range(n)],
                           base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=0,
                           is_transactional=True)

    def marker(base: int, pid: int, kind: int) -> bytes:
        return build_control_batch(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                   timestamp=1, base_offset=base)

    data = (txn(0, 1, 3) + txn(3, 2, 2) + build_batch([(1, None, b"plain", None)], base_offset=5)
            + marker(6, 1, rb.CONTROL_ABORT) + marker(7, 2, rb.CONTROL_COMMIT) + txn(8, 1, 2)
            + marker(10, 1, rb.CONTROL_COMMIT) + marker(11, 2, rb.CONTROL_COMMIT))
    aborted = [(0, 1)]
    for fetch_offset in (0, 2, 4, 6, 9):
        for step in (1, 2, 100):
            got, pos = drain(data, fetch_offset, step, aborted)
            assert got == eager(data, fetch_offset, aborted)
            assert pos == 12  # past the trailing control batches
    assert [r.value for r in drain(data, 0, 100, aborted)[0]] == [b"p2-3", b"p2-4", b"plain", b"p1-8", b"p1-9"]


def test_positions_and_drained_match_the_eager_accounting() -> None:
    # A control batch between two data batches: once the first batch is consumed, the position
    # moves past the marker (as Kafka's client), and a fetch with no records left is drained.
    data = (build_batch([(1, None, b"a%d" % i, None) for i in range(10)], base_offset=0)
            + build_control_batch(1, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=1,
                                  base_offset=10)
            + build_batch([(1, None, b"b%d" % i, None) for i in range(5)], base_offset=11))
    s = subs_at(0)
    buf = FetchBuffer()
    cf = CompletedFetch(TP, 0, data)
    buf.add(cf)
    assert cf.end_offset == 16
    assert len(buf.collect(s, 10)[TP]) == 10 and s.state(TP).position == 11 and not cf.drained
    assert len(buf.collect(s, 5)[TP]) == 5 and s.state(TP).position == 16 and cf.drained
    # Nothing but a control batch: no records, and the position moves past it.
    s = subs_at(10)
    buf = FetchBuffer()
    marker = data[rb.parse_header(data).size:]
    buf.add(CompletedFetch(TP, 10, marker[:rb.parse_header(marker).size]))
    assert buf.collect(s, 10) == {} and s.state(TP).position == 11


def test_record_list_is_list_like() -> None:
    data = build_batch([(5, b"k%d" % i, b"v%d" % i, [("h", b"1")]) for i in range(6)], base_offset=0)
    s = subs_at(0)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP, 0, data))
    recs = buf.collect(s, 4)[TP]
    assert isinstance(recs, RecordList)
    assert len(recs) == 4 and recs._list is None  # counted without decoding
    want = eager(data, 0)[:4]
    assert recs == want and want == recs and not (recs != want)
    assert recs[0] == want[0] and recs[-1].offset == 3 and recs[1:3] == want[1:3]
    assert list(recs) == want and list(reversed(recs)) == want[::-1]
    assert want[2] in recs and recs.index(want[2]) == 2 and recs.count(want[0]) == 1
    assert recs + [] == want and [] + recs == want and recs.copy() == want
    assert pickle.loads(pickle.dumps(recs)) == want and copy.copy(recs) == want
    assert repr(recs) == repr(want) and bool(recs)
    more: list[ConsumerRecord] = []
    more.extend(recs)
    more += recs
    assert more == want * 2
    recs.append(want[0])
    assert len(recs) == 5 and recs.pop() == want[0]
    recs.sort(key=lambda r: -r.offset)
    assert [r.offset for r in recs] == [3, 2, 1, 0]
    assert RecordList() == [] and not RecordList()
    with pytest.raises(TypeError):
        hash(recs)


def test_rest_of_a_batch_split_over_polls_is_decoded_once() -> None:
    data = build_batch([(5, None, b"v%d" % i, None) for i in range(10)], base_offset=0)
    s = subs_at(0)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP, 0, data))
    first, second = buf.collect(s, 6)[TP], buf.collect(s, 6)[TP]
    batch = first._pieces[0][0]
    assert batch is second._pieces[0][0] and not batch.decoded()
    assert [r.offset for r in first] == list(range(6)) and batch.decoded()
    assert [r.offset for r in second] == list(range(6, 10))  # from the records decoded for the first


# -- pipelined fetches ------------------------------------------------------------------


class _Cluster:
    def leader_for(self, topic: str, partition: int) -> int:
        return 0


def _fetcher(subs: SubscriptionState) -> Fetcher:
    cfg = {"isolation.level": "read_uncommitted", "fetch.max.wait.ms": 500}
    return Fetcher(SimpleNamespace(cluster=_Cluster()), subs, cfg)


def _response(offset_data: dict[int, bytes], hw: int, error: int = 0) -> Any:
    parts = [SimpleNamespace(partition_index=p, error_code=error, records=d, aborted_transactions=[],
                             high_watermark=hw, last_stable_offset=-1) for p, d in offset_data.items()]
    return SimpleNamespace(error_code=0, responses=[SimpleNamespace(topic="t", partitions=parts)])


def test_pipelined_fetch_follows_the_buffered_data() -> None:
    s = subs_at(0)
    f = _fetcher(s)
    first = build_batch([(1, None, b"a", None)] * 10, base_offset=0)
    assert f.fetchable_by_node() == {0: [(TP, 0)]}
    assert f._handle(_response({0: first}, hw=100), {TP: 0})
    # Data buffered, not consumed: the next fetch starts where it ends.
    assert f.fetchable_by_node() == {0: [(TP, 10)]}
    assert f._handle(_response({0: build_batch([(1, None, b"b", None)] * 5, base_offset=10)}, hw=100), {TP: 10})
    assert f.fetchable_by_node() == {}  # two fetches buffered: enough
    got = f.buffer.collect(s, 100)[TP]
    assert [r.offset for r in got] == list(range(15)) and s.state(TP).position == 15
    assert f.fetchable_by_node() == {0: [(TP, 15)]}


def test_no_pipelined_fetch_past_the_end_of_the_log() -> None:
    s = subs_at(0)
    f = _fetcher(s)
    f._handle(_response({0: build_batch([(1, None, b"a", None)] * 10, base_offset=0)}, hw=10), {TP: 0})
    assert f.fetchable_by_node() == {}  # it would only wait at the broker


def test_stale_pipelined_response_is_dropped_and_its_errors_ignored() -> None:
    s = subs_at(0)
    f = _fetcher(s)
    f._handle(_response({0: build_batch([(1, None, b"a", None)] * 10, base_offset=0)}, hw=100), {TP: 0})
    # A pipelined fetch from 10 fails: the position is still 0, nothing is reset or raised.
    f._handle(_response({0: b""}, hw=100, error=ErrorCode.OFFSET_OUT_OF_RANGE), {TP: 10})
    assert f.reset_requests == [] and f.errors == []
    s.seek(TP, 3)  # the application seeks away: what was buffered, and what follows it, is stale
    assert f.buffer.collect(s, 100) == {}
    assert not f._handle(_response({0: build_batch([(1, None, b"b", None)] * 5, base_offset=10)}, hw=100),
                         {TP: 10})
    assert f.fetchable_by_node() == {0: [(TP, 3)]}


def test_fetch_does_not_park_while_records_wait() -> None:
    s = subs_at(0)
    f = _fetcher(s)
    started: list[int] = []

    async def fake_fetch(node: int, tps: list[tuple[TopicPartition, int]], max_wait_ms: int) -> None:
        started.append(max_wait_ms)

    f._fetch = fake_fetch  # type: ignore[method-assign]

    async def go() -> None:
        f.send_fetches()
        f._in_flight.clear()
        f._handle(_response({0: build_batch([(1, None, b"a", None)] * 10, base_offset=0)}, hw=100), {TP: 0})
        f.send_fetches()
        await asyncio.sleep(0)

    asyncio.run(go())
    assert started == [500, 0]


def test_every_writer_waiting_out_back_pressure_is_woken() -> None:
    """Several produce tasks may drain one connection at once (acks=0): each must wake on resume,
    and fail once the connection is lost."""
    import asyncio

    from shoal.client.framing import FrameProtocol

    async def main() -> None:
        proto = FrameProtocol(lambda _body: None, lambda _exc: None)
        proto.pause_writing()
        waiting = [asyncio.ensure_future(proto.drain()) for _ in range(3)]
        await asyncio.sleep(0)
        assert not any(t.done() for t in waiting)
        proto.resume_writing()
        await asyncio.wait_for(asyncio.gather(*waiting), 1)
        proto.pause_writing()
        lost = [asyncio.ensure_future(proto.drain()) for _ in range(2)]
        await asyncio.sleep(0)
        proto.connection_lost(None)
        for t in lost:
            try:
                await asyncio.wait_for(t, 1)
            except ConnectionResetError:
                continue
            raise AssertionError("drain returned after the connection was lost")

    asyncio.run(main())
