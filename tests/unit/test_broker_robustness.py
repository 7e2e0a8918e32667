"""Requests that used to hurt the broker (wrong closes, unbounded answers), over a real socket."""

from __future__ import annotations

import asyncio
import uuid

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.fetch_request import FetchRequest
from shoal.protocol.generated.metadata_request import MetadataRequest
from shoal.protocol.record_batch import iter_all_records
from tests.unit.broker_harness import RawClient, batch, create_req, port, produce_one, run, running_broker


def test_fetch_without_partitions_waits_and_answers(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            req = FetchRequest(replica_id=-1, max_wait_ms=200, min_bytes=1, max_bytes=1000, isolation_level=0,
                               session_id=0, session_epoch=-1, topics=[])
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            for version in (4, 12, 16):
                f = await c.call(ApiKey.FETCH, version, req)
                assert f.responses == []
            assert loop.time() - t0 >= 0.5  # each waited max_wait_ms, as Kafka
            assert (await c.call(ApiKey.METADATA, 12, MetadataRequest(topics=None))).brokers  # still connected
    run(main())


def test_broker_fetch_max_bytes_bounds_every_response(tmp_path):
    async def main():
        async with running_broker(tmp_path, fetch_max_bytes="40000") as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t", partitions=2))
            for p in (0, 1):
                for _ in range(4):
                    await produce_one(c, "t", p, batch(5, size=3000))  # ~15 KB each
            req = FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=50_000_000, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="t", partitions=[
                    FetchRequest.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=10_000_000)
                    for p in (0, 1)])])
            for version in (4, 12):
                f = await c.call(ApiKey.FETCH, version, req)
                sizes = [len(p.records) for p in f.responses[0].partitions]
                assert 15_000 < sum(sizes) <= 40_000, sizes
            # the first batch still comes back whole when it alone is larger than the cap
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("big"))
            big = batch(4, size=15_000)
            await produce_one(c, "big", 0, big)
            f = await c.call(ApiKey.FETCH, 12, FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=50_000_000, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="big", partitions=[
                    FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=10_000_000)])]))
            records = bytes(f.responses[0].partitions[0].records)
            assert len(records) == len(big) and len(list(iter_all_records(records))) == 4
    run(main())


def test_metadata_topic_by_id_and_null_name(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            topic_id = b.metadata.topics["t"].topic_id
            unknown = uuid.uuid4()
            for version in (10, 11):  # name not nullable in the answer: Kafka's INVALID_REQUEST
                m = await c.call(ApiKey.METADATA, version, MetadataRequest(topics=[
                    MetadataRequest.MetadataRequestTopic(topic_id=topic_id, name=None)]))
                assert [(t.error_code, t.name) for t in m.topics] == [(ErrorCode.INVALID_REQUEST, "")]
            m = await c.call(ApiKey.METADATA, 12, MetadataRequest(topics=[
                MetadataRequest.MetadataRequestTopic(topic_id=topic_id, name=None),
                MetadataRequest.MetadataRequestTopic(topic_id=unknown, name=None)]))
            assert [(t.error_code, t.name, t.topic_id) for t in m.topics] == [
                (ErrorCode.NONE, "t", topic_id), (ErrorCode.UNKNOWN_TOPIC_ID, None, unknown)]
            assert (await c.call(ApiKey.METADATA, 12, MetadataRequest(topics=None))).brokers  # still connected
    run(main())


def _batch_with_payload(payload: bytes, count: int, codec: int = 0) -> bytes:
    """A batch whose CRC is right whatever its records section holds."""
    from shoal.protocol.record_encode import _assemble
    return _assemble(payload, count=count, base_offset=0, last_offset_delta=count - 1, base_timestamp=1000,
                     max_timestamp=1000, attributes=codec, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                     partition_leader_epoch=-1)


def _records_section(batch_bytes: bytes) -> bytes:
    from shoal.protocol.record_batch import HEADER_SIZE
    return batch_bytes[HEADER_SIZE:]


def test_corrupt_records_with_a_valid_crc_are_refused(tmp_path):
    """Kafka's LogValidator reads every record at produce time; a batch whose CRC holds but whose
    records do not parse must be refused, or it poisons the partition for every reader."""
    from shoal.protocol import compression
    from shoal.protocol.generated.list_offsets_request import ListOffsetsRequest
    from shoal.protocol.record_encode import build_batch

    good = _records_section(build_batch([(1000, b"k", b"value", [("h", b"x")]), (1001, b"k2", b"v2", [])]))
    one = _records_section(build_batch([(1000, b"k", b"value", [])]))
    null_header_key = bytearray(one)
    # the record's header count 0 -> 1 header with key length -1 (zigzag 1) and null value
    null_header_key[-1:] = b"\x02\x01\x01"
    null_header_key[0] += 4  # the record length grows by 2 bytes (zigzag: +4)
    cases = {
        "garbage compressed payload": _batch_with_payload(b"\x00garbage" * 20, 2, compression.ZSTD),
        "gzip that is not gzip": _batch_with_payload(b"not gzip at all", 1, compression.GZIP),
        "record length varint runs away": _batch_with_payload(b"\xff" * 12 + good, 2),
        "negative record length": _batch_with_payload(b"\x03" + good[1:], 2),
        "truncated records": _batch_with_payload(good[:-5], 2),
        "more records than declared": _batch_with_payload(good + one, 2),
        "fewer records than declared": _batch_with_payload(good, 3),
        "null header key": _batch_with_payload(bytes(null_header_key), 1),
        "compressed, records truncated": _batch_with_payload(compression.compress(compression.LZ4, good[:-3]), 2,
                                                             compression.LZ4),
        "a decompression bomb": _batch_with_payload(compression.compress(compression.ZSTD, bytes(200 << 20)), 1,
                                                    compression.ZSTD),
    }

    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            for name, records in cases.items():
                r = await produce_one(c, "t", 0, records)
                assert r.error_code == ErrorCode.INVALID_RECORD, (name, r)
            ok = await produce_one(c, "t", 0, build_batch([(2000, b"k", b"good", [("h", b"x")])]))
            assert ok.error_code == 0 and ok.base_offset == 0  # nothing bad was stored before it
            # the compressed path accepts what is well formed
            fine = build_batch([(2001, b"k", b"z" * 1000, [])] * 3, compression=compression.ZSTD)
            assert (await produce_one(c, "t", 0, fine)).error_code == 0
            lo = await c.call(ApiKey.LIST_OFFSETS, 7, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=1500)])]))
            assert lo.topics[0].partitions[0].offset == 0
            f = await c.call(ApiKey.FETCH, 12, FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1_000_000, isolation_level=0, session_id=0,
                session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="t", partitions=[
                    FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1_000_000)])]))
            values = [r.value for _, r in iter_all_records(bytes(f.responses[0].partitions[0].records))]
            assert values == [b"good"] + [b"z" * 1000] * 3
    run(main())


def test_partition_counts_are_bounded_and_creation_opens_no_files(tmp_path):
    """Kafka's controller refuses a request that would write more than 10,000 metadata records
    (POLICY_VIOLATION); a count of 2^31-1 costs nothing. What is allowed opens no file until
    a partition is used, so 100,000 partitions do not mean 100,000 file descriptors."""
    import os

    from shoal.protocol.generated.create_partitions_request import CreatePartitionsRequest

    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            for n in (10_000, 0x7FFFFFFF):
                r = await c.call(ApiKey.CREATE_TOPICS, 5, create_req(f"huge{n}", partitions=n))
                assert r.topics[0].error_code == ErrorCode.POLICY_VIOLATION, n
                assert r.topics[0].error_message == "Unable to perform excessively large batch operation."
            assert not any(t.startswith("huge") for t in b.metadata.topics)
            fds = len(os.listdir("/proc/self/fd"))
            for i in range(10):
                r = await c.call(ApiKey.CREATE_TOPICS, 5, create_req(f"many{i}", partitions=9_999))
                assert r.topics[0].error_code == 0
            assert len(os.listdir("/proc/self/fd")) - fds < 20  # not one per partition
            r = await c.call(ApiKey.CREATE_PARTITIONS, 3, CreatePartitionsRequest(timeout_ms=5000, validate_only=False, topics=[
                CreatePartitionsRequest.CreatePartitionsTopic(name="many0", count=0x7FFFFFFF, assignments=None)]))
            assert r.results[0].error_code == ErrorCode.POLICY_VIOLATION
            r = await c.call(ApiKey.CREATE_PARTITIONS, 3, CreatePartitionsRequest(timeout_ms=5000, validate_only=False, topics=[
                CreatePartitionsRequest.CreatePartitionsTopic(name="many0", count=10_100, assignments=None)]))
            assert r.results[0].error_code == 0 and b.metadata.topics["many0"].num_partitions == 10_100
            # a partition made on first use is there for produce and fetch
            assert (await produce_one(c, "many9", 9_998, batch(1))).error_code == 0
            m = await c.call(ApiKey.METADATA, 12, MetadataRequest(topics=None))
            assert sum(len(t.partitions) for t in m.topics) == 9 * 9_999 + 10_100
    run(main())


def test_records_refused_one_by_one_are_named_in_the_response(tmp_path):
    """KIP-467, as Kafka's LogValidator: a compacted topic refuses a batch with records without a
    key, naming each such record; timestamps outside message.timestamp.before/after.max.ms are
    refused with INVALID_TIMESTAMP. Nothing of a refused batch is stored."""
    from shoal.clock import now_ms
    from shoal.protocol.compression import LZ4
    from shoal.protocol.record_encode import build_batch

    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("compacted", configs={"cleanup.policy": "compact"}))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("bounded", configs={"message.timestamp.before.max.ms": "60000",
                                                                "message.timestamp.after.max.ms": "1000"}))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("old", configs={"message.timestamp.difference.max.ms": "60000",
                                                            "message.format.version": "0.10.0.0"}))
            mixed = [(1000, None if i % 3 == 0 else b"k%d" % i, b"v", []) for i in range(7)]
            for codec in (0, LZ4):
                r = await produce_one(c, "compacted", 0, build_batch(mixed, compression=codec))
                assert r.error_code == ErrorCode.INVALID_RECORD, r
                assert [e.batch_index for e in r.record_errors] == [0, 3, 6]
                assert "without key in topic partition compacted-0" in r.record_errors[0].batch_index_error_message
                assert r.error_message.startswith("One or more records have been rejected due to 3 record errors")
            ok = await produce_one(c, "compacted", 0, build_batch([(1000, b"k", b"v", [])]))
            assert (ok.error_code, ok.base_offset, ok.record_errors) == (0, 0, [])

            now = now_ms()
            for topic in ("bounded", "old"):
                stale = build_batch([(now, b"a", b"v", []), (now - 3_600_000, b"b", b"v", [])])
                r = await produce_one(c, topic, 0, stale)
                assert r.error_code == ErrorCode.INVALID_TIMESTAMP, r
                assert [e.batch_index for e in r.record_errors] == [1]
                assert (await produce_one(c, topic, 0, build_batch([(now, b"a", b"v", [])]))).error_code == 0
            future = build_batch([(now + 30_000, b"a", b"v", [])])
            assert (await produce_one(c, "bounded", 0, future)).error_code == ErrorCode.INVALID_TIMESTAMP
            assert (await produce_one(c, "old", 0, future)).error_code == 0  # within difference.max.ms

            bad = await c.call(ApiKey.CREATE_TOPICS, 5, create_req("nope", configs={"message.format.version": "0.7"}))
            assert bad.topics[0].error_code == ErrorCode.INVALID_CONFIG
    run(main())
