"""RecordBatch v2: round trips, kafka-python cross-checks, validation, control batches."""

from __future__ import annotations

import struct
import types

import cramjam
import pytest
from kafka import codec as kcodec
from kafka.record import default_records as kdr
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from shoal.protocol import compression
from shoal.protocol import record_batch as rb
from shoal.protocol.record_encode import (
    _assemble,
    _encode_record,
    build_batch,
    build_control_batch,
    rebuild_batch,
)

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]


@pytest.fixture
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give kafka-python the snappy/lz4/zstd block codecs it imports optionally.

    The venv has no python-snappy / lz4 / zstandard, so kafka-python would
    refuse those codecs. We plug in cramjam for the raw algorithms only:
    kafka-python's own xerial framing, batch layout, varints and CRC stay in
    play, which is what these tests cross-check.
    """
    snappy_shim = types.SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(bytes(b))),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b))),
    )
    monkeypatch.setattr(kcodec, "snappy", snappy_shim)

    def lz4_encode(payload: bytes) -> bytes:
        c = cramjam.lz4.Compressor(block_linked=False)
        c.compress(bytes(payload))
        return bytes(c.finish())

    monkeypatch.setattr(kdr, "lz4_encode", lz4_encode)
    monkeypatch.setattr(kdr, "lz4_decode", lambda b: bytes(cramjam.lz4.decompress(bytes(b))))
    monkeypatch.setattr(kdr, "zstd_encode", lambda b: bytes(cramjam.zstd.compress(bytes(b))))
    monkeypatch.setattr(kdr, "zstd_decode", lambda b: bytes(cramjam.zstd.decompress(bytes(b))))
    monkeypatch.setattr(kcodec, "has_lz4", lambda: True)
    monkeypatch.setattr(kcodec, "has_zstd", lambda: True)


def sample_records(n: int = 40) -> list[tuple]:
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 3 else (b"v" * (i * 37 % 300))
        headers = [] if i % 3 else [("h1", b"x" * i), ("nullh", None), ("ünï", b"")]
        out.append((1_700_000_000_000 + i * 13 - (5 if i == 2 else 0), key, value, headers))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_build_iter_round_trip(codec: int) -> None:
    recs = sample_records()
    batch = build_batch(
        recs, base_offset=100, compression=codec, producer_id=9, producer_epoch=2, base_sequence=5
    )
    (h,) = rb.validate_batches(batch)
    assert h.compression == codec
    assert h.base_offset == 100 and h.last_offset_delta == len(recs) - 1 and h.records_count == len(recs)
    assert h.producer_id == 9 and h.producer_epoch == 2 and h.base_sequence == 5
    assert h.max_timestamp == max(r[0] for r in recs)
    assert h.base_timestamp == recs[0][0]
    assert h.size == len(batch)
    got = list(rb.iter_records(batch))
    assert [tuple(r) for r in got] == [(100 + i, *rec) for i, rec in enumerate(recs)]


def test_large_values_and_varints() -> None:
    recs = [
        (0, b"k" * 20000, b"v" * 300000, [("h", b"z" * 70000)]),
        (-5, b"", b"", None),
        (1 << 40, None, None, []),
    ]
    batch = build_batch(recs)
    got = list(rb.iter_records(batch))
    assert (
        got[0].key == b"k" * 20000
        and got[0].value == b"v" * 300000
        and got[0].headers == [("h", b"z" * 70000)]
    )
    assert (got[1].timestamp, got[1].key, got[1].value, got[1].headers) == (-5, b"", b"", [])
    assert (got[2].timestamp, got[2].key, got[2].value) == (1 << 40, None, None)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_ours(codec: int, kafka_python_codecs: None) -> None:
    recs = sample_records()
    batch = build_batch(recs, base_offset=7, compression=codec)
    mr = MemoryRecords(batch)
    kb = mr.next_batch()
    assert kb.validate_crc()
    assert kb.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in kb]
    assert got == [(7 + i, ts, k, v, list(h)) for i, (ts, k, v, h) in enumerate(recs)]
    assert mr.next_batch() is None


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_kafka_python(codec: int, kafka_python_codecs: None) -> None:
    builder = MemoryRecordsBuilder(2, codec, 10 * 1024 * 1024, offset=0)
    expected = []
    for i in range(60):
        key = None if i % 4 == 0 else f"k{i}".encode()
        value = None if i == 5 else f"value-{i}".encode() * 30
        headers = [("a", b"1"), ("b", None)] if i % 2 else []
        builder.append(1_600_000_000_000 + i, key, value, headers)
        expected.append((i, 1_600_000_000_000 + i, key, value, headers))
    builder.close()
    buf = bytes(builder.buffer())
    headers = rb.validate_batches(buf)
    assert len(headers) == 1 and headers[0].compression == codec
    assert [tuple(r) for r in rb.iter_records(buf)] == expected


def test_snappy_raw_and_xerial_both_decode() -> None:
    data = b"hello snappy " * 10000
    xerial = compression.compress(compression.SNAPPY, data)
    assert xerial.startswith(compression.XERIAL_MAGIC)
    assert compression.decompress(compression.SNAPPY, xerial) == data
    raw = bytes(cramjam.snappy.compress_raw(data))  # what librdkafka writes
    assert compression.decompress(compression.SNAPPY, raw) == data
    # A raw-snappy batch (librdkafka style) decodes too.
    plain = build_batch([(1, b"k", data, None)])
    payload = raw_snappy = bytes(cramjam.snappy.compress_raw(rb.records_payload(plain)))
    assert payload == raw_snappy
    h = rb.parse_header(plain)
    mutated = _assemble(
        raw_snappy,
        count=1,
        base_offset=0,
        last_offset_delta=0,
        base_timestamp=1,
        max_timestamp=1,
        attributes=compression.SNAPPY,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
    )
    assert [r.value for r in rb.iter_records(mutated)] == [data]


def test_lz4_frame_has_independent_blocks() -> None:
    framed = compression.compress(compression.LZ4, b"x" * 200000)
    assert framed[:4] == b"\x04\x22\x4d\x18"
    assert framed[4] & 0x20, "Java's KafkaLZ4BlockInputStream rejects linked blocks"


def test_multiple_batches_and_offsets_in_place() -> None:
    b1 = build_batch([(1, b"a", b"1", None), (2, b"b", b"2", None)])
    b2 = build_batch([(3, b"c", b"3", None)], compression=compression.GZIP)
    buf = bytearray(b1 + b2)
    hs = rb.validate_batches(buf)
    assert [h.position for h in hs] == [0, len(b1)]
    rb.set_base_offset(buf, hs[0].position, 1000)
    rb.set_base_offset(buf, hs[1].position, 1002)
    hs2 = rb.validate_batches(buf)  # the CRC does not cover the base offset
    assert [h.base_offset for h in hs2] == [1000, 1002]
    assert [r.offset for _, r in rb.iter_all_records(buf)] == [1000, 1001, 1002]


def test_log_append_time_rewrites_crc_and_record_timestamps() -> None:
    buf = bytearray(build_batch([(10, b"a", b"1", None), (20, b"b", b"2", None)]))
    rb.set_log_append_time(buf, 0, 99999)
    (h,) = rb.validate_batches(buf)
    assert h.timestamp_type == rb.LOG_APPEND_TIME and h.max_timestamp == 99999
    assert [r.timestamp for r in rb.iter_records(buf)] == [99999, 99999]
    kb = MemoryRecords(bytes(buf)).next_batch()
    assert kb.validate_crc() and kb.timestamp_type == 1


def test_crc_tamper_is_corrupt() -> None:
    buf = bytearray(build_batch([(1, b"k", b"value", None)]))
    buf[-1] ^= 0xFF
    with pytest.raises(rb.CorruptRecordError, match="CRC"):
        rb.validate_batches(buf)
    buf = bytearray(build_batch([(1, b"k", b"value", None)]))
    buf[rb.ATTRIBUTES_OFFSET + 1] ^= 0x01  # attributes are covered too
    with pytest.raises(rb.CorruptRecordError):
        rb.validate_batches(buf)
    assert rb.CorruptRecordError.error_code == 2


def test_truncated_and_bad_lengths() -> None:
    batch = build_batch([(1, b"k", b"value" * 10, None)])
    for cut in (1, 10, 20, rb.HEADER_SIZE, len(batch) - 1):
        with pytest.raises(rb.CorruptRecordError):
            rb.validate_batches(batch[:cut])
    # trailing garbage after a good batch
    with pytest.raises(rb.CorruptRecordError):
        rb.validate_batches(batch + b"\x00\x01")
    # batch length below the minimum
    bad = bytearray(batch)
    struct.pack_into(">i", bad, 8, 10)
    with pytest.raises(rb.CorruptRecordError):
        rb.validate_batches(bad)
    # readers stop quietly at a partial tail
    two = batch + batch
    assert len(list(rb.iter_batches(two[:-5]))) == 1
    assert [r.value for _, r in rb.iter_all_records(two[: len(batch) + 30])] == [b"value" * 10]
    with pytest.raises(rb.InvalidRecordError):
        rb.validate_batches(b"")


def test_record_too_large_counts_log_overhead() -> None:
    batch = build_batch([(1, b"k", b"v" * 1000, None)])
    rb.validate_batches(batch, max_batch_bytes=len(batch))
    with pytest.raises(rb.RecordTooLargeError) as e:
        rb.validate_batches(batch, max_batch_bytes=len(batch) - 1)
    assert e.value.error_code == 10


def test_legacy_magic_rejected() -> None:
    # A magic 1 message: offset, size, crc, magic=1, attributes, timestamp, key, value.
    body = struct.pack(">bbqi", 1, 0, 123, -1) + struct.pack(">i", 3) + b"abc"
    legacy = struct.pack(">qi", 0, len(body) + 4) + struct.pack(">I", 0) + body
    with pytest.raises(rb.UnsupportedMessageFormatError) as e:
        rb.validate_batches(legacy)
    assert e.value.error_code == 43
    with pytest.raises(rb.UnsupportedMessageFormatError):
        rb.parse_header(legacy)


def test_client_rules() -> None:
    ok = build_batch([(1, b"k", b"v", None)], producer_id=5, producer_epoch=0, base_sequence=0)
    rb.validate_batches(ok)
    no_seq = build_batch([(1, b"k", b"v", None)], producer_id=5, producer_epoch=0, base_sequence=-1)
    with pytest.raises(rb.InvalidRecordError):
        rb.validate_batches(no_seq)
    rb.validate_batches(no_seq, client=False)
    marker = build_control_batch(
        rb.CONTROL_COMMIT, producer_id=5, producer_epoch=0, coordinator_epoch=1, timestamp=5
    )
    with pytest.raises(rb.InvalidRecordError):
        rb.validate_batches(marker)
    # records count must match the offset range for producers
    h = rb.parse_header(ok)
    sparse = rebuild_batch(
        rb.BatchHeader(0, 0, -1, 2, 0, 0, 3, 1, 1, 5, 0, 0, 2),
        [rb.Record(0, 1, b"a", b"1", []), rb.Record(3, 1, b"b", b"2", [])],
    )
    assert h.records_count == 1
    with pytest.raises(rb.InvalidRecordError):
        rb.validate_batches(sparse)
    (sh,) = rb.validate_batches(sparse, client=False)
    assert sh.last_offset_delta == 3 and sh.records_count == 2
    assert [r.offset for r in rb.iter_records(sparse)] == [0, 3]


@pytest.mark.parametrize("ctype", [rb.CONTROL_ABORT, rb.CONTROL_COMMIT])
def test_control_batch(ctype: int) -> None:
    batch = build_control_batch(
        ctype, producer_id=42, producer_epoch=3, coordinator_epoch=17, timestamp=1234, base_offset=50
    )
    (h,) = rb.validate_batches(batch, client=False)
    assert h.is_control and h.is_transactional and h.producer_id == 42 and h.producer_epoch == 3
    assert rb.control_type(batch) == ctype
    (rec,) = rb.iter_records(batch)
    assert rb.parse_control_record(rec.key, rec.value) == rb.ControlRecord(ctype, 0, 17)
    kb = MemoryRecords(batch).next_batch()
    assert kb.is_control_batch
    (krec,) = list(kb)
    assert krec.type == ctype and krec.offset == 50
    assert list(rb.iter_all_records(batch)) == []  # skipped by default


def test_transactional_flag_and_kafka_python_control_parse() -> None:
    batch = build_batch(
        [(1, b"k", b"v", None)], producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    (h,) = rb.validate_batches(batch)
    assert h.is_transactional and not h.is_control
    assert MemoryRecords(batch).next_batch().is_transactional


def test_corrupt_compressed_payload() -> None:
    h = rb.parse_header(build_batch([(1, b"k", b"v", None)]))
    broken = _assemble(
        b"not gzip at all",
        count=1,
        base_offset=0,
        last_offset_delta=0,
        base_timestamp=1,
        max_timestamp=1,
        attributes=compression.GZIP,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=-1,
    )
    rb.validate_batches(broken)  # the CRC is fine: the broker does not decompress
    with pytest.raises(rb.CorruptRecordError):
        list(rb.iter_records(broken))


def test_truncated_record_data() -> None:
    h = rb.parse_header(build_batch([(1, b"k", b"v", None)]))
    payload = bytearray()
    _encode_record(payload, 0, 0, b"key", b"value" * 10, None)
    broken = _assemble(
        bytes(payload[:-4]),
        count=1,
        base_offset=0,
        last_offset_delta=0,
        base_timestamp=1,
        max_timestamp=1,
        attributes=0,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=-1,
    )
    with pytest.raises(rb.CorruptRecordError):
        list(rb.iter_records(broken))


def test_compression_names() -> None:
    assert compression.codec_from_name("ZSTD") == compression.ZSTD
    with pytest.raises(compression.CompressionError):
        compression.codec_from_name("brotli")
    with pytest.raises(ValueError):
        build_batch([(1, None, b"v", None)], compression=9)
    with pytest.raises(ValueError):
        build_batch([])
