"""The producer's batch encodings (record_encode.encode_records, and ProducerBatch.append one
record at a time) write what build_batch writes, byte for byte; a batch's completion tells
exactly the records someone waits on."""

from __future__ import annotations

import random

import pytest

from shoal.client.accumulator import ProducerBatch, RecordFuture
from shoal.client.structs import TopicPartition
from shoal.protocol.record_encode import build_batch, build_batch_encoded, encode_records


@pytest.mark.parametrize("codec", [0, 1, 3])
def test_encode_records_is_build_batch_byte_for_byte(codec: int) -> None:
    rng = random.Random(codec)
    for trial in range(100):
        recs = [(rng.randint(0, 2**42), rng.choice([None, b"", b"k" * rng.randint(0, 300)]),
                 rng.choice([None, b"", b"v" * rng.randint(0, 20000)]),
                 rng.choice([None, [], [("h", b"x"), ("é", None)]])) for _ in range(rng.randint(1, 40))]
        txn = bool(trial % 2)
        assert (build_batch_encoded(encode_records(recs), compression=codec, producer_id=5, producer_epoch=1,
                                    base_sequence=trial, is_transactional=txn)
                == build_batch(recs, compression=codec, producer_id=5, producer_epoch=1, base_sequence=trial,
                               is_transactional=txn))
    with pytest.raises(ValueError):
        encode_records([])


@pytest.mark.parametrize("codec", [0, 1, 3])
def test_producer_batch_encodes_its_records_as_build_batch(codec: int) -> None:
    rng = random.Random(100 + codec)
    for trial in range(100):
        recs = [(rng.randint(0, 2**42), rng.choice([None, b"", b"k" * rng.randint(0, 300)]),
                 rng.choice([None, b"", b"v" * rng.randint(0, 20000)]),
                 rng.choice([None, [], [("h", b"x"), ("é", None)]])) for _ in range(rng.randint(1, 40))]
        b = ProducerBatch(TopicPartition("t", 0), 0)
        for ts, k, v, h in recs:
            assert b.append(ts, k, v, h, 1 << 30)
        b.producer_id, b.producer_epoch, b.base_sequence = 7, 0, trial
        want = build_batch(recs, compression=codec, producer_id=7, producer_epoch=0, base_sequence=trial)
        assert b.encode(codec) == want
        b.complete(1000, -1)
        assert [RecordFuture(b, i).result() for i in range(len(recs))] == [
            ("t", 0, 1000 + i, ts, -1 if k is None else len(k), -1 if v is None else len(v))
            for i, (ts, k, v, _h) in enumerate(recs)]


def test_completion_reaches_futures_and_callbacks_only_where_asked() -> None:
    b = ProducerBatch(TopicPartition("t", 2), 0)
    told = []
    b.append(1, None, b"a", None, 1 << 20)  # the sync face's: no future, no callback
    b.append(2, b"k", b"b", None, 1 << 20, callback=lambda e, md: told.append(md))
    b.complete(40, -1)
    assert [md.offset if md else None for md in told] == [41]
    assert RecordFuture(b, 0).result().offset == 40  # read from the batch when asked
