"""A structured fuzzer for a Kafka broker: every API and version it advertises, over real sockets.

    python -m shoal.testing.fuzzer --frames 1000000            # a shoal broker of its own
    python -m shoal.testing.fuzzer --bootstrap-server H:P ...   # any running broker

Requests are built from the generated codecs and Kafka's JSON schemas (`../shared/kafka-schemas`):
every field filled (existing and made-up topic names, extreme integers, nulls where a version
allows them, record batches: valid, corrupt, compressed), encoded at a version the broker
advertises, then mutated as a frame: bit flips, truncation, bytes inserted or removed, 16/32-bit
windows set to extremes, runaway varints, a wrong API version or key, garbage tagged fields,
corrupt record batches and compressed payloads. Several connections send at once; each frame
must be answered or its connection closed within ``--answer-timeout`` (requests that may wait
by design, such as a Fetch's max_wait or a JoinGroup, are counted apart, not as failures).

Meanwhile a control client produces a record and reads it back, again and again, on its own
connection: the broker must keep serving it (a failure is a frozen or crashed broker). The run
ends with a summary: frames, answers, closes, the broker's tracebacks and crashes (from its log
and process, when the fuzzer started it), the control client's failures and latency, and the
broker's RSS at start, peak and end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import struct
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.protocol import compression
from shoal.protocol.codegen import FieldSpec, MessageSpec, StructSpec, load_all
from shoal.protocol.framing import encode_request
from shoal.protocol.generated import API_BY_KEY
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.api_versions_request import ApiVersionsRequest
from shoal.protocol.generated.api_versions_response import ApiVersionsResponse
from shoal.protocol.record_batch import HEADER_SIZE
from shoal.protocol.record_encode import _assemble, build_batch
from shoal.testing import sasl_fuzz
from shoal.waits import within

CONTROL_TOPIC = "fuzz-control"
TOPICS = ["fuzz-a", "fuzz-b", "__consumer_offsets", "__transaction_state", "", "fuzz-" + "x" * 250]
# Config names the fuzzer may set: none the control client depends on.
CONFIG_NAMES = ["fuzz.config", "retention.bytes", "cleanup.policy", "min.insync.replicas", "compression.type"]
INTS = {
    "int8": [0, 1, -1, 127, -128],
    "int16": [0, 1, -1, 2, 32767, -32768],
    "uint16": [0, 1, 65535],
    "int32": [0, 1, -1, 2, 3, 100, 2**31 - 1, -(2**31)],
    "int64": [0, 1, -1, 1000, 2**63 - 1, -(2**63)],
}
# APIs whose requests may legitimately wait (long polls, rebalances, timeouts) or go unanswered
# (Produce with acks=0).
MAY_WAIT = {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.INIT_PRODUCER_ID,
            ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT,
            ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.CONSUMER_GROUP_HEARTBEAT}


# ---------------------------------------------------------------------------
# building requests


class RequestBuilder:
    """Fills a request's fields with plausible and extreme values, from the JSON schema."""

    def __init__(self, rng: random.Random, schemas_dir: Path | None = None) -> None:
        self.rng = rng
        self.specs: dict[int, MessageSpec] = {
            s.api_key: s for s in load_all(schemas_dir) if s.type == "request" and s.api_key is not None}

    def build(self, api_key: int, version: int) -> Any:
        spec = self.specs[api_key]
        cls = API_BY_KEY[api_key].request
        return self._struct(cls, cls, spec.root, spec, version, depth=0)

    def _struct(self, root_cls: Any, cls: Any, st: StructSpec, spec: MessageSpec, version: int, depth: int) -> Any:
        obj = cls()
        for f in st.fields:
            if version not in f.versions:
                continue
            try:
                setattr(obj, f.attr, self._value(root_cls, f, spec, version, depth))
            except (AttributeError, TypeError):
                pass
        return obj

    def _value(self, root_cls: Any, f: FieldSpec, spec: MessageSpec, version: int, depth: int) -> Any:
        rng = self.rng
        nullable = version in f.nullable
        if nullable and rng.random() < 0.08:
            return None
        if f.is_array:
            n = 0 if depth > 2 else rng.choice([0, 1, 1, 2, 3])
            return [self._elem(root_cls, f, spec, version, depth) for _ in range(n)]
        return self._elem(root_cls, f, spec, version, depth)

    def _elem(self, root_cls: Any, f: FieldSpec, spec: MessageSpec, version: int, depth: int) -> Any:
        rng = self.rng
        t = f.elem
        if f.is_struct:
            sub = spec.structs.get(t)
            cls = getattr(root_cls, t, None)
            if sub is None or cls is None:
                return None
            return self._struct(root_cls, cls, sub, spec, version, depth + 1)
        if t in INTS:
            if "partition" in f.name.lower() and rng.random() < 0.6:
                return rng.choice([0, 1, 2])
            if f.name.lower().endswith(("timeoutms", "maxwaitms", "waitms")) and rng.random() < 0.9:
                return rng.choice([0, 10, 100])
            return rng.choice(INTS[t]) if rng.random() < 0.7 else rng.randint(-3, 100)
        if t == "bool":
            return rng.random() < 0.5
        if t == "float64":
            return rng.choice([0.0, 1.5, -1.0, float("inf")])
        if t == "string":
            name = f.name.lower()
            if "topic" in name or name == "name":
                return rng.choice(TOPICS) if rng.random() < 0.8 else f"fuzz-{rng.randrange(1000)}"
            if "config" in name or name in ("key",):
                return rng.choice(CONFIG_NAMES)
            return rng.choice(["", "fuzz", "x" * rng.choice([1, 300, 5000]), "\u00e9\u4e2d", "consumer", "range"])
        if t == "bytes":
            return rng.choice([b"", b"\x00\x01", os.urandom(rng.choice([1, 16, 200]))])
        if t == "records":
            return record_payload(rng)
        if t == "uuid":
            return rng.choice([uuid.UUID(int=0), uuid.uuid4()])
        return None


def record_payload(rng: random.Random) -> bytes:
    """A record batch: valid, compressed, or corrupt in one of the ways that matter."""
    recs = [(1000 + i, b"k%d" % i if rng.random() < 0.8 else None, os.urandom(rng.choice([0, 10, 300])),
             [("h", b"v")] if rng.random() < 0.3 else []) for i in range(rng.choice([1, 2, 5]))]
    codec = rng.choice([0, 0, 1, 2, 3, 4])
    good = build_batch(recs, compression=codec)
    kind = rng.randrange(8)
    if kind < 3:
        return good
    payload = bytearray(good[HEADER_SIZE:])
    count = len(recs)
    if kind == 3:  # garbage payload, valid CRC
        payload = bytearray(os.urandom(len(payload) or 8))
    elif kind == 4 and payload:  # one flipped byte in the records, valid CRC
        i = rng.randrange(len(payload))
        payload[i] ^= 1 << rng.randrange(8)
    elif kind == 5:  # truncated records
        payload = payload[: max(0, len(payload) - rng.randint(1, 10))]
    elif kind == 6:  # a count that lies
        count = rng.choice([0, count + 1, 2**31 - 1, -1])
    else:  # a decompression bomb
        codec = rng.choice([1, 3, 4])
        payload = bytearray(compression.compress(codec, bytes(rng.choice([1 << 20, 80 << 20]))))
    return _assemble(bytes(payload), count=count, base_offset=0, last_offset_delta=max(count - 1, 0),
                     base_timestamp=1000, max_timestamp=1000, attributes=codec, producer_id=-1,
                     producer_epoch=-1, base_sequence=-1, partition_leader_epoch=-1)


# ---------------------------------------------------------------------------
# mutating frames

_EXTREMES_32 = [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x00\x00\x00"]
_EXTREMES_16 = [b"\x7f\xff", b"\xff\xff", b"\x80\x00", b"\x00\x00"]


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """One to three structural mutations of a whole frame; the size prefix is fixed after."""
    body = bytearray(frame[4:])
    for _ in range(rng.choice([1, 1, 2, 3])):
        n = len(body)
        op = rng.randrange(10)
        if op == 0 and n:  # bit flips
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(n)
                body[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # truncate
            del body[rng.randrange(n):]
        elif op == 2:  # insert bytes
            i = rng.randrange(n + 1)
            body[i:i] = os.urandom(rng.choice([1, 2, 4, 64]))
        elif op == 3 and n > 1:  # remove bytes
            i = rng.randrange(n)
            del body[i:i + rng.choice([1, 2, 4])]
        elif op == 4 and n >= 4:  # a 32-bit window to an extreme (lengths, counts)
            i = rng.randrange(n - 3)
            body[i:i + 4] = rng.choice(_EXTREMES_32)
        elif op == 5 and n >= 2:  # a 16-bit window to an extreme (string lengths)
            i = rng.randrange(n - 1)
            body[i:i + 2] = rng.choice(_EXTREMES_16)
        elif op == 6 and n:  # a runaway or huge unsigned varint (compact lengths, tags)
            i = rng.randrange(n)
            body[i:i + 1] = rng.choice([b"\xff\xff\xff\xff\x0f", b"\xff" * 12, b"\x80\x80\x80\x80\x08"])
        elif op == 7 and n >= 4:  # another API version (in range or not)
            struct.pack_into(">h", body, 2, rng.choice([-1, 0, 1, 3, 9, 12, 16, 100, 32767]))
        elif op == 8 and n >= 2:  # another API key
            struct.pack_into(">h", body, 0, rng.choice([-1, 0, 1, 3, 8, 18, 67, 1000]))
        else:  # garbage tagged fields at the end
            body += bytes([rng.randrange(1, 5)]) + os.urandom(rng.randrange(1, 20))
    return sasl_fuzz.SIZE.pack(len(body)) + bytes(body)


# ---------------------------------------------------------------------------
# running


@dataclass
class Stats:
    frames: int = 0
    answered: int = 0
    closed: int = 0
    waited: int = 0  # no answer in time from an API that may wait by design
    unanswered: list[str] = field(default_factory=list)  # no answer, no close: a failure
    control_ok: int = 0
    control_failures: list[str] = field(default_factory=list)
    control_ms: list[float] = field(default_factory=list)
    rss_kb: list[int] = field(default_factory=list)


async def _ask(host: str, port: int, api_key: int, version: int, request: Any) -> bytes:
    """One request on a connection of its own; the answer frame (without its size)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(encode_request(api_key, version, 1, "fuzzer", request.encode(version)))
        await writer.drain()
        return await within(sasl_fuzz.read_frame(reader), 10)
    finally:
        writer.close()


async def advertised_versions(host: str, port: int) -> dict[int, tuple[int, int]]:
    frame = await _ask(host, port, ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="shoal-fuzzer", client_software_version="1"))
    resp = ApiVersionsResponse.decode(frame[4:], 3)
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


async def fuzz_connection(host: str, port: int, frames: Any, stats: Stats, answer_timeout: float,
                          stop: asyncio.Event) -> None:
    """Send frames from the shared iterator one at a time; reconnect after every close."""
    reader = writer = None
    for api_key, frame in frames:
        if stop.is_set():
            break
        if writer is None:
            try:
                reader, writer = await asyncio.open_connection(host, port)
            except OSError as e:
                stats.unanswered.append(f"connect failed: {e}")
                await asyncio.sleep(0.1)
                continue
        stats.frames += 1
        try:
            writer.write(frame)
            await writer.drain()
            await within(sasl_fuzz.read_frame(reader), answer_timeout)
            stats.answered += 1
            continue
        except (asyncio.IncompleteReadError, ConnectionError):
            stats.closed += 1
        except TimeoutError:
            declared = sasl_fuzz.SIZE.unpack_from(frame)[0]
            if api_key in MAY_WAIT or declared != len(frame) - 4:
                stats.waited += 1
            else:
                stats.unanswered.append(f"api {api_key}: no answer in {answer_timeout} s: {frame[:64].hex()}")
        writer.close()
        writer = reader = None
    if writer is not None:
        writer.close()


async def control_client(host: str, port: int, stats: Stats, stop: asyncio.Event, interval: float) -> None:
    """Produce one record and fetch it back, again and again; any failure is the broker's."""
    from shoal.protocol.generated.fetch_request import FetchRequest
    from shoal.protocol.generated.fetch_response import FetchResponse
    from shoal.protocol.generated.produce_request import ProduceRequest
    from shoal.protocol.generated.produce_response import ProduceResponse

    corr = 0
    reader, writer = await asyncio.open_connection(host, port)

    async def call(key: int, version: int, req: Any, resp_cls: Any) -> Any:
        nonlocal corr
        corr += 1
        writer.write(encode_request(key, version, corr, "control", req.encode(version)))
        await writer.drain()
        frame = await within(sasl_fuzz.read_frame(reader), 5)
        return sasl_fuzz.decode_answer(frame, key, version, resp_cls)

    try:
        while not stop.is_set():
            t0 = time.perf_counter()
            value = b"control-%d" % corr
            try:
                p = await call(ApiKey.PRODUCE, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
                    ProduceRequest.TopicProduceData(name=CONTROL_TOPIC, partition_data=[
                        ProduceRequest.PartitionProduceData(index=0, records=build_batch([(0, None, value, [])]))])]),
                    ProduceResponse)
                pr = p.responses[0].partition_responses[0]
                if pr.error_code:
                    raise RuntimeError(f"produce error {pr.error_code}")
                f = await call(ApiKey.FETCH, 12, FetchRequest(
                    replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                    session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=CONTROL_TOPIC, partitions=[
                        FetchRequest.FetchPartition(partition=0, fetch_offset=pr.base_offset,
                                                    partition_max_bytes=1 << 20)])]), FetchResponse)
                records = f.responses[0].partitions[0].records
                if not records or value not in bytes(records):
                    raise RuntimeError("the produced record did not come back")
                stats.control_ok += 1
                stats.control_ms.append((time.perf_counter() - t0) * 1000)
            except Exception as e:  # noqa: BLE001 - every failure is a finding
                stats.control_failures.append(f"{type(e).__name__}: {e}")
                writer.close()
                await asyncio.sleep(0.2)
                try:
                    reader, writer = await asyncio.open_connection(host, port)
                except OSError:
                    pass
            await asyncio.sleep(interval)
    finally:
        writer.close()


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def make_frames(rng: random.Random, builder: RequestBuilder, versions: dict[int, tuple[int, int]],
                n: int) -> Any:
    """``n`` (api key, frame) pairs, made as they are taken."""
    keys = sorted(k for k in versions if k in builder.specs)
    for i in range(n):
        key = rng.choice(keys)
        lo, hi = versions[key]
        version = rng.randint(lo, hi)
        try:
            body = builder.build(key, version).encode(version)
        except Exception:  # noqa: BLE001 - a value the codec refuses: the defaults
            body = API_BY_KEY[key].request().encode(version)
        frame = encode_request(key, version, i & 0x7FFFFFFF, rng.choice(["fuzz", None, "c" * 300]), body)
        if rng.random() < 0.85:
            frame = mutate(frame, rng)
            if len(frame) >= 6:  # a mutation may have changed the API key
                key = struct.unpack_from(">h", frame, 4)[0]
        yield key, frame


async def run(host: str, port: int, frames: int, seed: int, connections: int, answer_timeout: float,
              pid: int | None, progress: bool, sasl_port: int | None = None) -> Stats:
    rng = random.Random(seed)
    builder = RequestBuilder(rng)
    versions = await advertised_versions(host, port)
    stats = Stats()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    control = loop.create_task(control_client(host, port, stats, stop, 0.05))
    started = time.monotonic()

    async def watch() -> None:
        while not stop.is_set():
            if pid is not None:
                stats.rss_kb.append(_rss_kb(pid))
                if not Path(f"/proc/{pid}").exists():
                    stop.set()  # the broker is gone: nothing more to learn
            if progress:
                rate = stats.frames / max(time.monotonic() - started, 1e-9)
                print(f"  {stats.frames:,} frames ({rate:,.0f}/s), control ok {stats.control_ok}, "
                      f"failures {len(stats.control_failures)}, rss {stats.rss_kb[-1:] or '?'} kB",
                      file=sys.stderr, flush=True)
            await asyncio.sleep(5)

    watcher = loop.create_task(watch())
    shared = make_frames(rng, builder, versions, frames)
    try:
        if sasl_port is None:
            await asyncio.gather(*(fuzz_connection(host, port, shared, stats, answer_timeout, stop)
                                   for _ in range(connections)))
        else:  # unauthenticated sessions on the SASL listener (shoal.testing.sasl_fuzz)
            sessions = (sasl_fuzz.session_frames(rng, shared) for _ in range(frames // 3))
            await asyncio.gather(*(sasl_fuzz.fuzz_sessions(host, sasl_port, sessions, stats, answer_timeout)
                                   for _ in range(connections)))
            stats.control_failures += [f"topic {t!r} exists: a frame sent before authentication changed the broker"
                                       for t in await topic_names(host, port) if t != CONTROL_TOPIC]
    finally:
        stop.set()
        await control
        watcher.cancel()
        if pid is not None:
            stats.rss_kb.append(_rss_kb(pid))
    return stats


async def topic_names(host: str, port: int) -> list[str]:
    """Every topic the broker has (a Metadata request for all)."""
    from shoal.protocol.generated.metadata_request import MetadataRequest
    from shoal.protocol.generated.metadata_response import MetadataResponse

    frame = await _ask(host, port, ApiKey.METADATA, 12, MetadataRequest(topics=None))
    return [t.name for t in sasl_fuzz.decode_answer(frame, ApiKey.METADATA, 12, MetadataResponse).topics]


def report(stats: Stats, seconds: float, tracebacks: int | None, crashed: bool | None) -> str:
    lat = sorted(stats.control_ms)
    p99 = lat[int(0.99 * (len(lat) - 1))] if lat else float("nan")
    lines = [
        f"frames sent        {stats.frames:,} in {seconds:.0f} s ({stats.frames / max(seconds, 1e-9):,.0f}/s)",
        f"answered / closed  {stats.answered:,} / {stats.closed:,}",
        f"waited by design   {stats.waited:,}",
        f"unanswered         {len(stats.unanswered)}",
        f"control client     {stats.control_ok:,} round trips, {len(stats.control_failures)} failures, "
        f"median {statistics.median(lat) if lat else float('nan'):.1f} ms, p99 {p99:.1f} ms",
    ]
    if stats.rss_kb:
        rss = [r for r in stats.rss_kb if r > 0]
        if rss:
            lines.append(f"broker RSS         start {rss[0] / 1024:.0f} MB, peak {max(rss) / 1024:.0f} MB, "
                         f"end {rss[-1] / 1024:.0f} MB")
    if tracebacks is not None:
        lines.append(f"broker tracebacks  {tracebacks}")
    if crashed is not None:
        lines.append(f"broker crashed     {'yes' if crashed else 'no'}")
    for what in stats.unanswered[:5] + stats.control_failures[:5]:
        lines.append(f"  ! {what}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shoal.testing.fuzzer", description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--answer-timeout", type=float, default=5.0)
    ap.add_argument("--bootstrap-server", help="fuzz this broker (default: start a shoal broker)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--sasl", action="store_true",
                    help="fuzz a SASL listener before authentication (starts its own broker)")
    args = ap.parse_args(argv)
    proc = None
    log_path = None
    sasl_port = None
    if args.bootstrap_server:
        if args.sasl:
            ap.error("--sasl starts a broker of its own: leave out --bootstrap-server")
        host, _, port_s = args.bootstrap_server.rpartition(":")
        port = int(port_s)
    else:
        from shoal.testing.process import BrokerProcess

        data = Path(tempfile.mkdtemp(prefix="shoal-fuzz-")) / "data"
        overrides = {"request.read.timeout.ms": "3000", "log.retention.check.interval.ms": "600000",
                     **(sasl_fuzz.SASL_OVERRIDES if args.sasl else {})}
        proc = BrokerProcess(data, overrides=overrides).start()
        host, port = "127.0.0.1", next(iter(proc.ports.values()))
        sasl_port = next(iter(proc.listener_ports.values()))["SASL_PLAINTEXT"] if args.sasl else None
        log_path = proc.log_path
    t0 = time.monotonic()
    try:
        _ensure_control_topic(host, port)
        stats = asyncio.run(run(host, port, args.frames, args.seed, args.connections, args.answer_timeout,
                                proc.proc.pid if proc and proc.proc else None, not args.quiet, sasl_port))
    finally:
        crashed = None
        if proc is not None:
            crashed = proc.proc is None or proc.proc.poll() is not None
            proc.stop()
    tracebacks = None
    if log_path is not None:
        tracebacks = len(re.findall(r"^Traceback", log_path.read_text(errors="replace"), re.M))
    print(report(stats, time.monotonic() - t0, tracebacks, crashed))
    failed = stats.unanswered or stats.control_failures or tracebacks or crashed
    return 1 if failed else 0


def _ensure_control_topic(host: str, port: int) -> None:
    from shoal.protocol.generated.create_topics_request import CreateTopicsRequest

    req = CreateTopicsRequest(timeout_ms=5000, topics=[CreateTopicsRequest.CreatableTopic(
        name=CONTROL_TOPIC, num_partitions=1, replication_factor=1)])
    asyncio.run(_ask(host, port, ApiKey.CREATE_TOPICS, 5, req))


if __name__ == "__main__":
    sys.exit(main())

