"""Connection limits and request memory: what a client's size field, idleness or slowness costs."""

from __future__ import annotations

import asyncio
import socket
import struct

from shoal.protocol.framing import encode_request
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.api_versions_request import ApiVersionsRequest
from shoal.protocol.generated.metadata_request import MetadataRequest
from shoal.protocol.record_encode import build_batch
from tests.unit.broker_harness import RawClient, create_req, port, produce_req, run, running_broker


async def _still_open(c: RawClient) -> bool:
    try:
        return bool((await c.call(ApiKey.METADATA, 12, MetadataRequest(topics=None), timeout=5)).brokers)
    except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
        return False


def test_an_announced_size_costs_nothing_until_its_bytes_arrive(tmp_path):
    """Ten connections announcing 100 MB frames and sending nothing more hold a few hundred KB,
    not a gigabyte; they are closed after request.read.timeout.ms and give everything back."""
    async def main():
        async with running_broker(tmp_path, request_read_timeout_ms="600") as b:
            conns = [await RawClient.connect(port(b)) for _ in range(10)]
            for c in conns:
                await c.send_raw(bytes.fromhex("05f5e100") + b"\x00\x12")
            await asyncio.sleep(0.2)
            assert b.request_memory.used <= 10 * 256 * 1024, b.request_memory.used
            assert b.request_memory.peak <= 10 * (256 + 64) * 1024
            for c in conns:
                assert await c.is_closed(5)
            await asyncio.sleep(0.05)
            assert b.request_memory.used == 0
            ok = await RawClient.connect(port(b))
            assert await _still_open(ok)
    run(main())


def test_idle_connections_hold_no_buffer_and_are_closed_after_idle_ms(tmp_path):
    async def main():
        async with running_broker(tmp_path, connections_max_idle_ms="800") as b:
            conns = [await RawClient.connect(port(b)) for _ in range(200)]
            for c in conns:
                await c.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
            assert b.request_memory.used == 0  # answered: nothing held
            await asyncio.sleep(1.6)
            closed = [await c.is_closed(3) for c in conns[:5]]
            assert all(closed)
            assert not b.nodes[b.node_ids[0]].connections
    run(main())


def test_budget_pauses_reading_and_large_requests_never_wait_for_each_other(tmp_path):
    """queued.max.request.bytes of 1 MB and four clients each sending a 700 KB produce request
    slowly, in halves: memory stays near the budget (one request over at most), and every
    request is answered (none waits forever for another's memory)."""
    async def main():
        async with running_broker(tmp_path, queued_max_request_bytes="1000000") as b:
            admin = await RawClient.connect(port(b))
            await admin.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            frames = []
            for i in range(4):
                records = build_batch([(1000, b"k", bytes([65 + i]) * 700_000, [])])
                frames.append(encode_request(ApiKey.PRODUCE, 9, 1, "slow", produce_req("t", 0, records).encode(9)))
            conns = [await RawClient.connect(port(b)) for _ in frames]
            for c, f in zip(conns, frames, strict=True):
                await c.send_raw(f[: len(f) // 2])
            await asyncio.sleep(0.3)
            assert b.request_memory.used <= 1_000_000 + 2 * 1024 * 1024
            for c, f in zip(conns, frames, strict=True):
                c.writer.write(f[len(f) // 2:])
            answers = await asyncio.gather(*(c.read_frame(20) for c in conns))
            assert len(answers) == 4
            assert b.partition_log("t", 0).log_end_offset == 4
            assert b.request_memory.peak <= 1_000_000 + 2 * 1024 * 1024, b.request_memory.peak
            await asyncio.sleep(0.05)
            assert b.request_memory.used == 0
    run(main())


def test_max_connections_per_ip(tmp_path):
    async def main():
        async with running_broker(tmp_path, max_connections_per_ip="3") as b:
            conns = [await RawClient.connect(port(b)) for _ in range(3)]
            for c in conns:
                assert await _still_open(c)
            extra = await RawClient.connect(port(b))
            assert await extra.is_closed(5)
            await conns[0].close()
            await asyncio.sleep(0.1)
            again = await RawClient.connect(port(b))
            assert await _still_open(again)
    run(main())


def test_a_frame_header_split_across_reads_and_many_frames_in_one(tmp_path):
    """Framing still holds when bytes arrive one at a time and when many frames come at once."""
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            frame = encode_request(ApiKey.METADATA, 12, 7, "x", MetadataRequest(topics=None).encode(12))
            for i in range(len(frame)):
                await c.send_raw(frame[i:i + 1])
            resp = await c.read_frame()
            assert struct.unpack_from(">i", resp)[0] == 7
            many = b"".join(encode_request(ApiKey.METADATA, 12, 100 + i, "x", MetadataRequest(topics=None).encode(12))
                            for i in range(300))
            await c.send_raw(many)
            ids = [struct.unpack_from(">i", await c.read_frame())[0] for _ in range(300)]
            assert ids == list(range(100, 400))
    run(main())


def test_thousands_of_pipelined_requests_across_read_buffer_boundaries(tmp_path):
    """A client that writes 2,000 produce requests before reading an answer: frames straddle the
    read buffer's end over and over, and reading pauses and resumes with the queue."""
    async def main():
        async with running_broker(tmp_path) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t", partitions=2000))
            records = build_batch([(1000, None, b"x" * 37, [])])
            frames = b"".join(encode_request(ApiKey.PRODUCE, 9, i, "p", produce_req("t", i, records).encode(9))
                              for i in range(2000))
            c.writer.write(frames)
            ids = [struct.unpack_from(">i", await c.read_frame(20))[0] for _ in range(2000)]
            assert ids == list(range(2000))
            assert all(b.partition_log("t", i).log_end_offset == 1 for i in range(2000))
    run(main())


def test_a_client_that_never_reads_cannot_starve_other_fetches(tmp_path):
    """A huge fetch answered to a client that reads nothing holds the response budget only a
    few seconds: then the budget is back for every other consumer."""
    from shoal.protocol.generated.fetch_request import FetchRequest

    def big_fetch() -> FetchRequest:
        return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=64 << 20, isolation_level=0,
                            session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="t", partitions=[
                                FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=64 << 20)])])

    async def main():
        async with running_broker(tmp_path, fetch_memory_max_bytes=str(16 << 20)) as b:
            c = await RawClient.connect(port(b))
            await c.call(ApiKey.CREATE_TOPICS, 5, create_req("t"))
            for i in range(24):
                r = await c.call(ApiKey.PRODUCE, 9, produce_req("t", 0, build_batch([(1000, None, bytes([i]) * 900_000, [])])))
                assert r.responses[0].partition_responses[0].error_code == 0
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window
            sock.connect(("127.0.0.1", port(b)))
            reader, writer = await asyncio.open_connection(sock=sock)
            writer.transport.pause_reading()  # reads nothing: the answer piles up unsent
            writer.write(encode_request(ApiKey.FETCH, 12, 1, "hog", big_fetch().encode(12)))
            await asyncio.sleep(0.5)
            assert b.response_memory.used > 8 << 20  # the unsent answer holds the budget
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 15
            while b.response_memory.used and loop.time() < deadline:
                await asyncio.sleep(0.2)
            assert b.response_memory.used == 0  # given back though the client still reads nothing
            other = await RawClient.connect(port(b))
            r = await other.call(ApiKey.FETCH, 12, big_fetch(), timeout=20)
            assert len(r.responses[0].partitions[0].records) > 8 << 20  # a whole budget's worth
            writer.close()
    run(main())
