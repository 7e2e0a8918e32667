"""Fetch buffer and poll accounting, with no network: max.poll.records, positions, skips."""

from shoal.client.fetcher import CompletedFetch, FetchBuffer
from shoal.client.structs import TopicPartition
from shoal.client.subscription import SubscriptionState
from shoal.protocol.record_encode import build_batch, build_control_batch

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def batches(base: int, count: int, per_batch: int = 10, compression: int = 0) -> bytes:
    out = b""
    for start in range(base, base + count, per_batch):
        n = min(per_batch, base + count - start)
        recs = [(1000 + i, b"k%d" % i, b"v%d" % i, [("h", b"x")]) for i in range(start, start + n)]
        out += build_batch(recs, base_offset=start, compression=compression)
    return out


def subs_for(*tps: TopicPartition, position: int = 0) -> SubscriptionState:
    s = SubscriptionState("earliest")
    s.assign_from_user(list(tps))
    for tp in tps:
        s.seek(tp, position)
    return s


def test_max_poll_records_splits_100_records_into_6x15_and_10() -> None:
    s = subs_for(TP0)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP0, 0, batches(0, 100)))
    sizes = []
    offsets = []
    while True:
        got = buf.collect(s, 15)
        if not got:
            break
        sizes.append(len(got[TP0]))
        offsets += [r.offset for r in got[TP0]]
        assert s.state(TP0).position == offsets[-1] + 1
    assert sizes == [15] * 6 + [10]
    assert offsets == list(range(100))
    assert len(buf) == 0


def test_records_across_partitions_share_the_cap() -> None:
    s = subs_for(TP0, TP1)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP0, 0, batches(0, 10)))
    buf.add(CompletedFetch(TP1, 0, batches(0, 10, compression=1)))
    got = buf.collect(s, 15)
    assert len(got[TP0]) == 10 and len(got[TP1]) == 5
    assert s.state(TP0).position == 10 and s.state(TP1).position == 5
    got = buf.collect(s, 15)
    assert list(got) == [TP1] and [r.offset for r in got[TP1]] == [5, 6, 7, 8, 9]
    assert buf.buffered_partitions() == set()


def test_records_before_the_fetch_position_are_skipped() -> None:
    # A fetch at offset 13 returns the whole batch 10..19.
    s = subs_for(TP0, position=13)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP0, 13, batches(0, 30)))
    got = buf.collect(s, 100)
    assert [r.offset for r in got[TP0]] == list(range(13, 30))
    r = got[TP0][0]
    assert (r.key, r.value, r.headers, r.timestamp, r.timestamp_type) == (b"k13", b"v13", [("h", b"x")], 1013, 0)


def test_control_batches_are_skipped_but_advance_the_position() -> None:
    s = subs_for(TP0)
    data = batches(0, 5) + build_control_batch(base_offset=5, producer_id=1, producer_epoch=0, control_type=1,
                                               timestamp=0, coordinator_epoch=0)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP0, 0, data))
    got = buf.collect(s, 100)
    assert [r.offset for r in got[TP0]] == [0, 1, 2, 3, 4]
    assert s.state(TP0).position == 6


def test_paused_data_is_kept_and_seek_drops_stale_data() -> None:
    s = subs_for(TP0, TP1)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP0, 0, batches(0, 5)))
    buf.add(CompletedFetch(TP1, 0, batches(0, 5)))
    s.state(TP0).paused = True
    got = buf.collect(s, 100)
    assert list(got) == [TP1]
    s.state(TP0).paused = False
    s.seek(TP1, 0)  # nothing buffered for TP1 any more: no effect
    got = buf.collect(s, 100)
    assert list(got) == [TP0]
    buf.add(CompletedFetch(TP0, 5, batches(5, 5)))
    s.seek(TP0, 2)  # the buffered data starts at 5, the position is now 2: stale
    assert buf.collect(s, 100) == {}
    assert s.state(TP0).position == 2


def test_unassigned_partition_data_is_dropped() -> None:
    s = subs_for(TP0)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP1, 0, batches(0, 5)))
    assert buf.collect(s, 100) == {}
    assert len(buf) == 0


def test_partial_trailing_batch_is_ignored() -> None:
    s = subs_for(TP0)
    data = batches(0, 20)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP0, 0, data[:-7]))  # fetch.max.bytes cut the second batch
    got = buf.collect(s, 100)
    assert [r.offset for r in got[TP0]] == list(range(10))
    assert s.state(TP0).position == 10


def _corrupt_second_batch(data: bytes) -> bytes:
    """Flip one byte inside the second batch's records (its CRC no longer matches)."""
    from shoal.protocol.record_batch import iter_batches

    second = list(iter_batches(data))[1]
    out = bytearray(data)
    out[second.position + second.size - 2] ^= 0xFF
    return bytes(out)


def test_a_batch_failing_its_crc_is_raised_at_its_offset_until_seeked_past() -> None:
    import pytest

    from shoal.client import KafkaError

    s = subs_for(TP0)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP0, 0, _corrupt_second_batch(batches(0, 30))))
    got = buf.collect(s, 100)  # the records before the corrupt batch first
    assert [r.offset for r in got[TP0]] == list(range(10))
    for _ in range(2):  # then poll raises, and again, with the position at the batch
        with pytest.raises(KafkaError, match="offset 10 fails its CRC"):
            buf.collect(s, 100)
        assert s.state(TP0).position == 10
    s.seek(TP0, 20)  # past it: the fetch is stale and goes
    assert buf.collect(s, 100) == {}
    assert len(buf) == 0


def test_a_corrupt_partition_does_not_hold_back_another_partitions_records() -> None:
    import pytest

    from shoal.client import KafkaError

    s = subs_for(TP0, TP1)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP0, 0, _corrupt_second_batch(batches(0, 20))))
    buf.add(CompletedFetch(TP1, 0, batches(0, 20)))
    got = buf.collect(s, 100)  # TP0 stops before its corrupt batch; TP1's records come all the same
    assert [r.offset for r in got[TP0]] == list(range(10))
    assert [r.offset for r in got[TP1]] == list(range(20))
    with pytest.raises(KafkaError):
        buf.collect(s, 100)
    assert s.state(TP0).position == 10 and s.state(TP1).position == 20


def test_check_crcs_false_hands_the_records_out() -> None:
    s = subs_for(TP0)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP0, 0, _corrupt_second_batch(batches(0, 30)), check_crcs=False))
    got = buf.collect(s, 100)
    assert len(got[TP0]) == 30 and s.state(TP0).position == 30


def test_an_unreadable_batch_header_ends_the_data_where_it_is() -> None:
    import pytest

    from shoal.client import KafkaError
    from shoal.protocol.record_batch import MAGIC_OFFSET

    data = bytearray(batches(0, 20))
    data[len(batches(0, 10)) + MAGIC_OFFSET] = 7  # the second batch's magic byte
    s = subs_for(TP0)
    buf = FetchBuffer()
    buf.add(CompletedFetch(TP0, 0, bytes(data)))  # building the fetch does not raise
    assert [r.offset for r in buf.collect(s, 100)[TP0]] == list(range(10))
    with pytest.raises(KafkaError):
        buf.collect(s, 100)
    assert s.state(TP0).position == 10
