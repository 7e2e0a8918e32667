"""Message formats v0/v1: parsing (wrappers, CRCs, Kafka's old LZ4 framing), Produce v0-v2
up-conversion and Fetch v0-v3 down-conversion over a real socket."""

from __future__ import annotations

import struct
import zlib

import pytest

from shoal.protocol import compression
from shoal.protocol.compression import _xxh32_short
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.legacy_records import LegacyMessage, encode_message, encode_message_set, parse_message_set
from shoal.protocol.record_batch import CorruptRecordError, InvalidRecordError, iter_all_records
from shoal.protocol.record_encode import build_batch
from tests.unit.broker_harness import RawClient, create_req, fetch_req, port, produce_req, run, running_broker


def wrapper(inner: bytes, codec: int, magic: int, offset: int, timestamp: int = 5000) -> bytes:
    """A compressed message holding ``inner`` (a message set), as old producers build them."""
    value = compression.compress(codec, inner)
    body = struct.pack(">bb", magic, codec) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def msgs(n: int, magic: int, relative: bool = True) -> list[LegacyMessage]:
    return [LegacyMessage(i if relative else 100 + i, magic, 1000 + i if magic else -1, 0, b"k%d" % i, b"v%d" % i)
            for i in range(n)]


@pytest.mark.parametrize("magic", [0, 1])
def test_round_trip_plain_and_compressed(magic):
    plain = encode_message_set(msgs(3, magic), magic)
    out, codec = parse_message_set(plain)
    assert codec == 0 and [(m.key, m.value, m.timestamp) for m in out] == [
        (b"k0", b"v0", 1000 if magic else -1), (b"k1", b"v1", 1001 if magic else -1),
        (b"k2", b"v2", 1002 if magic else -1)]
    for codec in (compression.GZIP, compression.SNAPPY, compression.LZ4):
        out, seen = parse_message_set(wrapper(plain, codec, magic, offset=41))
        assert seen == codec and [m.value for m in out] == [b"v0", b"v1", b"v2"]
        if magic == 1:  # relative inner offsets: the wrapper carries the last one
            assert [m.offset for m in out] == [39, 40, 41]


def test_magic0_lz4_with_kafkas_old_header_checksum():
    """Kafka before 0.10 computed the LZ4 frame descriptor checksum over the magic number too."""
    plain = encode_message_set(msgs(2, 0), 0)
    frame = bytearray(compression.compress(compression.LZ4, plain))
    end = 6 + (8 if frame[4] & 0x08 else 0)
    frame[end] = (_xxh32_short(bytes(frame[0:end])) >> 8) & 0xFF  # the old, wrong checksum
    body = struct.pack(">bb", 0, compression.LZ4) + struct.pack(">i", -1) + struct.pack(">i", len(frame)) + frame
    entry = struct.pack(">qiI", 1, len(body) + 4, zlib.crc32(body)) + body
    out, _ = parse_message_set(entry)
    assert [m.value for m in out] == [b"v0", b"v1"]


def test_refused_message_sets():
    good = encode_message(0, 1, 1000, 0, b"k", b"v")
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        parse_message_set(bytes(bad_crc))
    with pytest.raises(CorruptRecordError):
        parse_message_set(good[:-3])
    assert parse_message_set(good + good[:5], allow_partial=True)[0][0].value == b"v"
    magic2 = bytearray(good)
    magic2[16] = 2
    magic2[12:16] = struct.pack(">I", zlib.crc32(bytes(magic2[16:])))
    with pytest.raises(InvalidRecordError):
        parse_message_set(bytes(magic2))
    with pytest.raises(InvalidRecordError):  # zstd never existed in message format 0/1
        parse_message_set(wrapper(good, compression.ZSTD, 1, 0))
    with pytest.raises(InvalidRecordError):  # a bomb is refused, not built
        parse_message_set(wrapper(encode_message(0, 1, 0, 0, None, bytes(50 << 20)), compression.GZIP, 1, 0),
                          max_decompressed=1 << 20)


def test_produce_v0_to_v2_and_fetch_v0_to_v3(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("z"))
            r = await c.call(ApiKey.PRODUCE, 0, produce_req("t", 0, encode_message_set(msgs(2, 0), 0)))
            assert r.responses[0].partition_responses[0].error_code == 0
            inner = encode_message_set(msgs(3, 1), 1)
            r = await c.call(ApiKey.PRODUCE, 2, produce_req("t", 0, wrapper(inner, compression.GZIP, 1, offset=2)))
            part = r.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, 2)
            # stored as v2 batches: a v2 fetch sees the records with their timestamps
            f = await c.call(ApiKey.FETCH, 12, fetch_req("t", 0, 0))
            stored = [(r.offset, r.key, r.value, r.timestamp) for _, r in
                      iter_all_records(bytes(f.responses[0].partitions[0].records))]
            assert stored == [(0, b"k0", b"v0", -1), (1, b"k1", b"v1", -1), (2, b"k0", b"v0", 1000),
                              (3, b"k1", b"v1", 1001), (4, b"k2", b"v2", 1002)]
            for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
                f = await c.call(ApiKey.FETCH, version, fetch_req("t", 0, 1))
                got, _ = parse_message_set(bytes(f.responses[0].partitions[0].records))
                assert {m.magic for m in got} == {magic}
                assert [(m.offset, m.value) for m in got] == [(1, b"v1"), (2, b"v0"), (3, b"v1"), (4, b"v2")]
                if magic == 1:
                    assert [m.timestamp for m in got] == [-1, 1000, 1001, 1002]
                # a limit smaller than one message still returns the first one
                f = await c.call(ApiKey.FETCH, version, fetch_req("t", 0, 3, max_bytes=10, partition_max=10))
                got, _ = parse_message_set(bytes(f.responses[0].partitions[0].records))
                assert [m.offset for m in got] == [3]
            # a bad CRC in Produce v1: CORRUPT_MESSAGE, nothing stored
            broken = bytearray(encode_message_set(msgs(1, 1), 1))
            broken[-1] ^= 1
            r = await c.call(ApiKey.PRODUCE, 1, produce_req("t", 0, bytes(broken)))
            assert r.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
            assert b.partition_log("t", 0).log_end_offset == 5
            # zstd data cannot be expressed as a message set: Kafka's error for old fetches
            await c.call(ApiKey.PRODUCE, 7, produce_req("z", 0, build_batch([(1, b"k", b"v", [])], compression=compression.ZSTD)))
            f = await c.call(ApiKey.FETCH, 3, fetch_req("z", 0, 0))
            assert f.responses[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    run(main())
