"""Fetched RecordBatch bytes to Arrow columns (no Spark needed): values, nulls, headers, codecs,
offset ranges, LogAppendTime, control batches and aborted transactions; and Arrow columns back to
records, byte for byte what the per-record encoder writes."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from shoal.protocol import record_batch as rb
from shoal.protocol.record_encode import build_batch, build_batch_encoded, build_control_batch, encode_headers
from shoal.spark.arrow_records import arrow_schema, decode_fetch, encode_records


def batch(base: int, rows, **kw) -> bytes:
    return build_batch(rows, base_offset=base, **kw)


def test_values_keys_nulls_and_offsets_across_batches_and_codecs() -> None:
    buf = b"".join([
        batch(0, [(1000, b"k0", b"v0", None), (1001, None, b"v1" * 100, None)]),
        batch(2, [(2000, b"k2", None, None)], compression=1),
        batch(3, [(3000 + i, b"k%d" % i, b"x" * 300, None) for i in range(4)], compression=4),
    ])
    d = decode_fetch(buf, "t", 3, 0, 100)
    t = d.batch.to_pydict()
    assert d.next_offset == 7 and d.batch.schema == arrow_schema(False)
    assert t["offset"] == list(range(7)) and t["key"][:3] == [b"k0", None, b"k2"]
    assert t["value"][:3] == [b"v0", b"v1" * 100, None] and t["value"][3] == b"x" * 300
    assert t["topic"] == ["t"] * 7 and t["partition"] == [3] * 7 and t["timestampType"] == [0] * 7
    assert d.batch.column("timestamp").cast(pa.int64()).to_pylist()[:3] == [1_000_000, 1_001_000, 2_000_000]
    # A range cuts inside batches; the next fetch goes on after the last batch looked at.
    d = decode_fetch(buf, "t", 3, 1, 5)
    assert d.batch.to_pydict()["offset"] == [1, 2, 3, 4] and d.next_offset == 7


def test_headers_and_log_append_time() -> None:
    buf = batch(0, [(5, b"k", b"v", [("h1", b"a"), ("h2", None)]), (6, b"k", b"w", None)])
    t = decode_fetch(buf, "t", 0, 0, 10, include_headers=True).batch.to_pydict()
    assert t["headers"] == [[{"key": "h1", "value": b"a"}, {"key": "h2", "value": None}], []]
    appended = bytearray(batch(0, [(5, None, b"v", None)]))
    rb.set_log_append_time(appended, 0, 99_000)
    t = decode_fetch(bytes(appended), "t", 0, 0, 10, include_headers=True).batch.to_pydict()
    assert t["timestampType"] == [1] and t["timestamp"][0].timestamp() == 99 and t["headers"] == [[]]


def test_read_committed_drops_aborted_batches_and_markers() -> None:
    txn = dict(producer_id=7, producer_epoch=0, is_transactional=True)
    buf = b"".join([
        batch(0, [(1, None, b"a0", None)], base_sequence=0, **txn),       # aborted
        batch(1, [(1, None, b"plain", None)]),
        build_control_batch(rb.CONTROL_ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
                            timestamp=1, base_offset=2),
        batch(3, [(1, None, b"c3", None)], base_sequence=1, **txn),       # committed
        build_control_batch(rb.CONTROL_COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
                            timestamp=1, base_offset=4),
    ])
    d = decode_fetch(buf, "t", 0, 0, 5, aborted=[(0, 7)])
    assert d.batch.to_pydict()["value"] == [b"plain", b"c3"] and d.next_offset == 5
    # Only markers in range: no rows, but the position moves past them.
    d = decode_fetch(buf, "t", 0, 4, 5)
    assert d.batch is None and d.next_offset == 5


def test_encode_records_matches_the_per_record_encoder() -> None:
    rng = random.Random(7)
    rows = []
    for i in range(2000):  # lengths across the 1-, 2- and 3-byte varint sizes, nulls, headers
        key = None if i % 7 == 0 else rng.randbytes(rng.choice([0, 3, 200]))
        value = None if i % 11 == 0 else rng.randbytes(rng.choice([0, 5, 100, 20_000]))
        rows.append((1234, key, value, [("h", b"x"), ("n", None)] if i % 5 == 0 else None))
    enc = encode_records(pa.array([r[1] for r in rows], pa.binary()), pa.array([r[2] for r in rows], pa.binary()),
                         1234, [encode_headers(r[3]) for r in rows])
    assert enc.count == 2000
    for codec in (0, 3):
        assert build_batch_encoded(enc, compression=codec, producer_id=5, producer_epoch=1, base_sequence=9,
                                   is_transactional=True) == build_batch(
            rows, compression=codec, producer_id=5, producer_epoch=1, base_sequence=9, is_transactional=True)


@pytest.mark.parametrize("large", [False, True])
def test_encode_records_strings_slices_and_no_keys(large: bool) -> None:
    typ = pa.large_string() if large else pa.string()
    keys = pa.array([f"k{i}" if i % 3 else None for i in range(100)], typ).slice(10, 50)
    values = pa.array(["é" * i for i in range(100)], typ).slice(10, 50)
    expect = [(5, f"k{i}".encode() if i % 3 else None, ("é" * i).encode(), None) for i in range(10, 60)]
    assert build_batch_encoded(encode_records(keys, values, 5)) == build_batch(expect)
    no_keys = [(5, None, v, None) for _, _, v, _ in expect]
    assert build_batch_encoded(encode_records(None, values, 5)) == build_batch(no_keys)
    # The bytes decode back to the same rows.
    t = decode_fetch(build_batch_encoded(encode_records(keys, values, 5)), "t", 0, 0, 100).batch.to_pydict()
    assert t["key"] == [k for _, k, _, _ in expect] and t["value"] == [v for _, _, v, _ in expect]


def test_encode_records_null_slots_owning_bytes_are_left_out() -> None:
    # Arrow allows a null slot a non-empty offset range; its bytes must not leak into the record.
    offsets = pa.array([0, 2, 5, 7], pa.int32())
    data = pa.py_buffer(b"aaXXXbb")
    validity = pa.array([True, False, True]).buffers()[1]
    values = pa.Array.from_buffers(pa.binary(), 3, [validity, offsets.buffers()[1], data], null_count=1)
    assert build_batch_encoded(encode_records(None, values, 1)) == build_batch(
        [(1, None, b"aa", None), (1, None, None, None), (1, None, b"bb", None)])
