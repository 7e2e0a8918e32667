"""Every error path of the broker's data APIs, over a real socket to an in-process broker."""

from __future__ import annotations

import asyncio
import struct

from shoal.protocol.errors import ErrorCode
from shoal.protocol.framing import encode_request
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.api_versions_request import ApiVersionsRequest
from shoal.protocol.generated.create_partitions_request import CreatePartitionsRequest
from shoal.protocol.generated.delete_topics_request import DeleteTopicsRequest
from shoal.protocol.generated.list_offsets_request import ListOffsetsRequest
from shoal.protocol.generated.metadata_request import MetadataRequest
from shoal.protocol.record_batch import iter_all_records
from tests.unit.broker_harness import (
    RawClient,
    batch,
    create_req,
    fetch_req,
    port,
    produce_one,
    produce_req,
    run,
    running_broker,
)


def test_produce_errors(tmp_path):
    async def main():
        async with running_broker(tmp_path, message_max_bytes="2000", auto_create_topics_enable="false") as b:
            c = await RawClient.connect(port(b))
            assert (await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t", 2))).topics[0].error_code == 0
            ok = await produce_one(c, "t", 0, batch(3))
            assert (ok.error_code, ok.base_offset) == (0, 0)
            ok2 = await produce_one(c, "t", 0, batch(2))
            assert (ok2.error_code, ok2.base_offset) == (0, 3)
            corrupt = bytearray(batch(3))
            corrupt[-1] ^= 0xFF
            assert (await produce_one(c, "t", 0, bytes(corrupt))).error_code == ErrorCode.CORRUPT_MESSAGE
            truncated = batch(3)[:-5]
            assert (await produce_one(c, "t", 0, truncated)).error_code == ErrorCode.CORRUPT_MESSAGE
            assert (await produce_one(c, "t", 0, batch(1, 5000))).error_code == ErrorCode.MESSAGE_TOO_LARGE
            assert (await produce_one(c, "nope", 0, batch(1))).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert (await produce_one(c, "t", 7, batch(1))).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            # Kafka takes exactly one v2 batch per partition in a produce request
            two = await produce_one(c, "t", 0, batch(1) + batch(1))
            assert two.error_code == ErrorCode.INVALID_RECORD
            resp = await c.call(ApiKey.PRODUCE, 9, produce_req("t", 0, batch(1), acks=2))
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
            # nothing of the refused batches was appended
            f = await c.call(ApiKey.FETCH, 12, fetch_req("t", 0, 0))
            part = f.responses[0].partitions[0]
            assert part.high_watermark == 5
            assert [r.offset for _, r in iter_all_records(bytes(part.records))] == [0, 1, 2, 3, 4]
            await c.close()
    run(main())


def test_produce_acks0_has_no_response_and_error_closes(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            await c.send_raw(encode_request(ApiKey.PRODUCE, 9, 99, "x", produce_req("t", 0, batch(2), acks=0).encode(9)))
            # the next response on the connection is for the next request, not the acks=0 one
            md = await c.call(ApiKey.METADATA, 12, MetadataRequest(topics=None))
            assert md.controller_id == b.node_ids[0]
            await c.send_raw(encode_request(ApiKey.PRODUCE, 9, 100, "x", produce_req("zz", 0, batch(2), acks=0).encode(9)))
            assert await c.is_closed()
    run(main())


def test_not_leader_on_wrong_node(tmp_path):
    async def main():
        async with running_broker(tmp_path, nodes=3) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t", 6))
            for p in range(6):
                leader = b.metadata.leader("t", p)
                for node_id in b.node_ids:
                    cn = await RawClient.connect(port(b, node_id))
                    r = await produce_one(cn, "t", p, batch(1))
                    expect = ErrorCode.NONE if node_id == leader else ErrorCode.NOT_LEADER_OR_FOLLOWER
                    assert r.error_code == expect
                    f = await cn.call(ApiKey.FETCH, 12, fetch_req("t", p, 0))
                    assert f.responses[0].partitions[0].error_code == expect
                    await cn.close()
            leaders = {b.metadata.leader("t", p) for p in range(6)}
            assert leaders == set(b.node_ids)  # leadership is spread over the nodes
    run(main())


def test_fetch_limits_and_out_of_range(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            big = batch(5, size=3000)  # one batch of ~15 KB
            await produce_one(c, "t", 0, big)
            await produce_one(c, "t", 0, batch(5))
            # a batch larger than every limit still comes back whole
            f = await c.call(ApiKey.FETCH, 12, fetch_req("t", 0, 0, max_bytes=100, partition_max=100))
            recs = bytes(f.responses[0].partitions[0].records)
            assert len(recs) == len(big)
            assert [r.offset for _, r in iter_all_records(recs)] == [0, 1, 2, 3, 4]
            # fetch from the middle of a batch returns that whole batch
            f = await c.call(ApiKey.FETCH, 12, fetch_req("t", 0, 7))
            offsets = [r.offset for _, r in iter_all_records(bytes(f.responses[0].partitions[0].records))]
            assert offsets[0] == 5 and offsets[-1] == 9
            # at the log end: empty; beyond: OFFSET_OUT_OF_RANGE
            f = await c.call(ApiKey.FETCH, 12, fetch_req("t", 0, 10))
            assert f.responses[0].partitions[0].error_code == 0 and len(f.responses[0].partitions[0].records) == 0
            f = await c.call(ApiKey.FETCH, 12, fetch_req("t", 0, 11))
            assert f.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
            f = await c.call(ApiKey.FETCH, 12, fetch_req("t", 0, -5))
            assert f.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    run(main())


def test_fetch_long_poll_wakes_on_append(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            p = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            f = await c.call(ApiKey.FETCH, 12, fetch_req("t", 0, 0, max_wait=300, min_bytes=1))
            assert loop.time() - t0 >= 0.25  # nothing there: waited for max_wait
            assert len(f.responses[0].partitions[0].records) == 0
            pending = asyncio.ensure_future(c.call(ApiKey.FETCH, 12, fetch_req("t", 0, 0, max_wait=20_000, min_bytes=1)))
            await asyncio.sleep(0.2)
            assert not pending.done()
            await produce_one(p, "t", 0, batch(2))
            f = await asyncio.wait_for(pending, 5)  # answered on append, long before 20 s
            assert len(list(iter_all_records(bytes(f.responses[0].partitions[0].records)))) == 2
    run(main())


def test_list_offsets(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            for i in range(3):
                await produce_one(c, "t", 0, batch(2, ts=10_000 * (i + 1)))

            async def lookup(ts: int):
                r = await c.call(ApiKey.LIST_OFFSETS, 7, ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
                    name="t", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=ts)])]))
                p = r.topics[0].partitions[0]
                return p.error_code, p.offset, p.timestamp

            assert (await lookup(-2))[:2] == (0, 0)
            assert (await lookup(-1))[:2] == (0, 6)
            assert await lookup(20_000) == (0, 2, 20_000)
            assert await lookup(20_001) == (0, 3, 20_001)
            assert await lookup(99_999) == (0, -1, -1)
            assert await lookup(-3) == (0, 5, 30_001)
    run(main())


def test_metadata_auto_create_and_controller(tmp_path):
    async def main():
        async with running_broker(tmp_path, nodes=3, num_partitions="4") as b:
            c = await RawClient.connect(port(b, 2))
            md = await c.call(ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto")],
                                                     allow_auto_topic_creation=True))
            assert md.controller_id in b.node_ids
            assert sorted(x.node_id for x in md.brokers) == b.node_ids
            assert md.cluster_id == b.cluster_id
            t = md.topics[0]
            assert (t.error_code, t.name, len(t.partitions)) == (0, "auto", 4)
            md = await c.call(ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="no")],
                                                     allow_auto_topic_creation=False))
            assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            md = await c.call(ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="bad name!")],
                                                     allow_auto_topic_creation=True))
            assert md.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
            md = await c.call(ApiKey.METADATA, 0, MetadataRequest(topics=[]))  # v0: empty list means all topics
            assert [x.name for x in md.topics] == ["auto"]
    run(main())


def test_topic_admin_errors(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))

            async def create(*args, **kw) -> int:
                return (await c.call(ApiKey.CREATE_TOPICS, 7, create_req(*args, **kw))).topics[0].error_code

            assert await create("a", 3) == 0
            assert await create("a", 3) == ErrorCode.TOPIC_ALREADY_EXISTS
            assert await create("b", 0) == ErrorCode.INVALID_PARTITIONS
            assert await create("b", 1, rf=2) == ErrorCode.INVALID_REPLICATION_FACTOR
            assert await create("b", 1, configs={"retention.ms": "abc"}) == ErrorCode.INVALID_CONFIG
            assert await create("b", 1, configs={"no.such.config": "1"}) == ErrorCode.INVALID_CONFIG
            assert await create("x" * 250) == ErrorCode.INVALID_TOPIC_EXCEPTION

            async def grow(name: str, count: int) -> int:
                r = await c.call(ApiKey.CREATE_PARTITIONS, 3, CreatePartitionsRequest(timeout_ms=5000, topics=[
                    CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count, assignments=None)]))
                return r.results[0].error_code

            assert await grow("a", 5) == 0
            assert len(b.metadata.topics["a"].replicas) == 5
            assert await grow("a", 4) == ErrorCode.INVALID_PARTITIONS
            assert await grow("zz", 9) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

            r = await c.call(ApiKey.DELETE_TOPICS, 5, DeleteTopicsRequest(topic_names=["a", "zz"], timeout_ms=5000))
            assert [x.error_code for x in r.responses] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
            assert "a" not in b.metadata.topics
            assert not list(tmp_path.glob("a-*")), "deleting a topic removes its files"
    run(main())


def test_bad_frames_close_only_that_connection(tmp_path):
    async def main():
        async with running_broker(tmp_path, socket_request_max_bytes="1000") as b:
            good = await RawClient.connect(port(b))

            async def expect_closed(frame: bytes, eof: bool = False) -> None:
                bad = await RawClient.connect(port(b))
                await bad.send_raw(frame)
                if eof:
                    bad.writer.write_eof()
                assert await bad.is_closed(), frame[:16]
                # everyone else is still served
                md = await good.call(ApiKey.METADATA, 12, MetadataRequest(topics=None))
                assert md.brokers

            await expect_closed(struct.pack(">i", 5000) + b"x" * 100)  # over socket.request.max.bytes
            await expect_closed(struct.pack(">i", -1))  # negative size
            await expect_closed(struct.pack(">i", 3) + b"abc")  # too short for a header
            await expect_closed(encode_request(999, 0, 1, "x", b""))  # unknown API key
            await expect_closed(encode_request(ApiKey.METADATA, 99, 1, "x", b""))  # unsupported version
            await expect_closed(encode_request(ApiKey.METADATA, 12, 1, "x", b"\x07garbage"))  # undecodable body
            await expect_closed(struct.pack(">i", 50) + b"\x00" * 10, eof=True)  # truncated frame, then EOF
    run(main())


def test_api_versions_unsupported_version_answers_v0(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.send_raw(encode_request(ApiKey.API_VERSIONS, 42, 7, "future-client", b"\x00\x00"))
            frame = await c.read_frame()
            # kafka-python parses this as v0: correlation id, int16 error, int32-counted (key, min, max)
            corr, err, n = struct.unpack_from(">ihi", frame, 0)
            assert (corr, err) == (7, ErrorCode.UNSUPPORTED_VERSION)
            keys = [struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(n)]
            assert (18, 0, 4) in keys
            assert len(frame) == 10 + 6 * n
            # and the connection stays usable
            r = await c.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
            assert r.error_code == 0
            advertised = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
            # the union of what Kafka 3.9 and 4.x answer: the old versions too
            assert advertised[ApiKey.PRODUCE] == (0, 11) and advertised[ApiKey.FETCH] == (0, 17) and advertised[ApiKey.METADATA] == (0, 12)
            assert advertised[ApiKey.LIST_OFFSETS] == (0, 10)
    run(main())


def test_fetch_and_produce_at_every_version(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            topic_id = b.metadata.topics["t"].topic_id
            for v in range(3, 12):
                r = await c.call(ApiKey.PRODUCE, v, produce_req("t", 0, batch(2)))
                assert r.responses[0].partition_responses[0].error_code == 0, v
            for v in range(4, 18):
                req = fetch_req("t", 0, 0)
                req.topics[0].topic_id = topic_id  # v13+ name topics by id
                r = await c.call(ApiKey.FETCH, v, req)
                part = r.responses[0].partitions[0]
                assert part.error_code == 0, v
                assert [x.offset for _, x in iter_all_records(bytes(part.records))] == list(range(18)), v
                if v >= 13:
                    assert r.responses[0].topic_id == topic_id
                else:
                    assert r.responses[0].topic == "t"
    run(main())
