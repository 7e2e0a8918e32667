"""Fetched RecordBatch bytes to Arrow columns (no Spark needed): values, nulls, headers, codecs,
offset ranges, LogAppendTime, control batches and aborted transactions."""

from __future__ import annotations

import pyarrow as pa

from shoal.protocol import record_batch as rb
from shoal.spark.arrow_records import arrow_schema, decode_fetch


def batch(base: int, rows, **kw) -> bytes:
    return rb.build_batch(rows, base_offset=base, **kw)


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
        rb.build_control_batch(rb.CONTROL_ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
                               timestamp=1, base_offset=2),
        batch(3, [(1, None, b"c3", None)], base_sequence=1, **txn),       # committed
        rb.build_control_batch(rb.CONTROL_COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
                               timestamp=1, base_offset=4),
    ])
    d = decode_fetch(buf, "t", 0, 0, 5, aborted=[(0, 7)])
    assert d.batch.to_pydict()["value"] == [b"plain", b"c3"] and d.next_offset == 5
    # Only markers in range: no rows, but the position moves past them.
    d = decode_fetch(buf, "t", 0, 4, 5)
    assert d.batch is None and d.next_offset == 5
