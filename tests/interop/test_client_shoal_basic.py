"""The shoal client against a real `shoal serve` broker: data path, partitioner, admin, resets.

One broker subprocess serves the whole module (each test uses its own topics and groups).
Every wait polls with a deadline; every client is closed.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest

from shoal.client import (
    AdminClient,
    Consumer,
    KafkaError,
    NewPartitions,
    NewTopic,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)
from shoal.client.partitioner import partition_for_key
from shoal.protocol.errors import ErrorCode
from tests.interop.shoal_process import ShoalProcess

pytestmark = pytest.mark.timeout(60)

GROUP_CONF = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShoalProcess]:
    root: Path = tmp_path_factory.mktemp("shoal-basic")
    proc = ShoalProcess(root / "data", 1, {"num.partitions": "3"})
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def admin(broker: ShoalProcess) -> Iterator[AdminClient]:
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        yield a
    finally:
        a.close()


def new_topic(admin: AdminClient, partitions: int, prefix: str = "t") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    assert admin.create_topics([NewTopic(name, partitions, 1)]) == {name: None}
    return name


def drain(consumer: Consumer, want: int, timeout: float = 20.0) -> list[Any]:
    """Poll until ``want`` records arrived (or fail at the deadline)."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < want:
        assert time.monotonic() < deadline, f"only {len(got)} of {want} records within {timeout}s"
        for recs in consumer.poll(200).values():
            got.extend(recs)
    return got


def poll_until(consumer: Consumer, check: Any, timeout: float, what: str) -> list[Any]:
    """Poll (keeping the member alive) until ``check()`` is truthy; return the records seen."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        for recs in consumer.poll(100).values():
            got.extend(recs)
    return got


def sample_records(n: int, base_ts: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]:
    """Keys, values (incl. None and empty), headers (incl. None values and repeats), timestamps."""
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else b"" if i % 11 == 0 else b"k\x00%d" % i
        value = None if i % 13 == 0 else bytes((i * 31 + j) & 0xFF for j in range(i % 300))
        headers: list[tuple[str, bytes | None]] = [("i", b"%d" % i)]
        if i % 3 == 0:
            headers += [("dup", b"a"), ("dup", b"b"), ("none", None), ("ü", b"\xff\x00")]
        out.append((key, value, headers, base_ts + i * 17))
    return out


# ------------------------------------------------------------------------------- data path


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_every_codec_and_acks_then_read_back_identical(broker: ShoalProcess, admin: AdminClient,
                                                              compression: str) -> None:
    topic = new_topic(admin, 2)
    recs = sample_records(300, 1_600_000_000_000)
    sent: dict[int, list[tuple]] = {0: [], 1: []}
    for acks_i, acks in enumerate(("0", "1", "all")):
        p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": compression, "acks": acks,
                      "linger.ms": 10, "batch.size": 8192})
        try:
            futs = []
            for i, (k, v, h, ts) in enumerate(recs[acks_i * 100:(acks_i + 1) * 100]):
                part = i % 2
                futs.append(p.send(topic, v, key=k, partition=part, headers=h, timestamp_ms=ts))
                sent[part].append((k, v, h, ts))
            p.flush(20)
            mds = [f.result(0) for f in futs]
        finally:
            p.close()
        if acks == "0":
            assert all(md.offset == -1 for md in mds)  # no response, no offsets
        else:
            for part in (0, 1):
                offs = [md.offset for md in mds if md.partition == part]
                assert offs == sorted(offs) and len(set(offs)) == len(offs)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "max.poll.records": 37})
    try:
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        got = drain(c, 300)
    finally:
        c.close()
    assert len(got) == 300
    for part in (0, 1):
        mine = [r for r in got if r.partition == part]
        assert [r.offset for r in mine] == list(range(150))
        assert [(r.key, r.value, r.headers, r.timestamp) for r in mine] == [
            (k, v, list(h), ts) for k, v, h, ts in sent[part]]
        assert all(r.timestamp_type == 0 for r in mine)


def test_shoal_and_confluent_read_each_others_records(broker: ShoalProcess, admin: AdminClient) -> None:
    topic = new_topic(admin, 3)
    recs = sample_records(120, 1_650_000_000_000)
    # shoal writes, librdkafka reads.
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4"})
    try:
        for i, (k, v, h, ts) in enumerate(recs):
            p.send(topic, v, key=k, partition=i % 3, headers=h, timestamp_ms=ts)
        p.flush(20)
    finally:
        p.close()
    ck = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-" + topic,
                                   "enable.auto.commit": False, "log_level": 0})
    ck.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(3)])
    got: list[Any] = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < len(recs) and time.monotonic() < deadline:
            for m in ck.consume(100, 0.5):
                assert m.error() is None, m.error()
                got.append(m)
    finally:
        ck.close()
    assert len(got) == len(recs)
    for part in range(3):
        mine = [m for m in got if m.partition() == part]
        assert [m.offset() for m in mine] == list(range(40))
        want = recs[part::3]
        assert [(m.key(), m.value(), m.headers() or [], m.timestamp()[1]) for m in mine] == [
            (k, v, h, ts) for k, v, h, ts in want]

    # librdkafka writes (zstd), shoal reads.
    topic2 = new_topic(admin, 3)
    ckp = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd",
                                    "linger.ms": 5, "log_level": 0})
    for i, (k, v, h, ts) in enumerate(recs):
        ckp.produce(topic2, value=v, key=k, partition=i % 3, headers=h, timestamp=ts)
    assert ckp.flush(20) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic2, p) for p in range(3)])
        mine_all = drain(c, len(recs))
    finally:
        c.close()
    for part in range(3):
        mine = [r for r in mine_all if r.partition == part]
        assert [r.offset for r in mine] == list(range(40))
        assert [(r.key, r.value, r.headers, r.timestamp) for r in mine] == [
            (k, v, h, ts) for k, v, h, ts in recs[part::3]]


def test_keyed_records_land_where_librdkafka_murmur2_puts_them(broker: ShoalProcess, admin: AdminClient) -> None:
    topic = new_topic(admin, 7)
    keys = [b"key-%d" % i for i in range(200)] + [b"", b"\x00", "ünïcode".encode(), b"x" * 1000]
    ckp = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random",
                                    "log_level": 0})
    ck_parts: dict[bytes, int] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        ck_parts[msg.key()] = msg.partition()

    for k in keys:
        ckp.produce(topic, value=b"ck", key=k, on_delivery=on_delivery)
    assert ckp.flush(20) == 0
    p = Producer({"bootstrap.servers": broker.bootstrap})
    try:
        futs = {k: p.send(topic, b"shoal", key=k) for k in keys}
        p.flush(20)
        shoal_parts = {k: f.result(0).partition for k, f in futs.items()}
    finally:
        p.close()
    assert shoal_parts == ck_parts
    assert shoal_parts == {k: partition_for_key(k, 7) for k in keys}
    assert len(set(shoal_parts.values())) == 7  # the keys really spread


# ----------------------------------------------------------------------------------- admin


def test_admin_topics_partitions_and_group_offsets(broker: ShoalProcess, admin: AdminClient) -> None:
    t1 = f"adm-{uuid.uuid4().hex[:8]}"
    t2 = f"adm-{uuid.uuid4().hex[:8]}"
    res = admin.create_topics([NewTopic(t1, 2, 1), NewTopic(t2, 1, 1, config={"cleanup.policy": "compact"})])
    assert res == {t1: None, t2: None}
    again = admin.create_topics([NewTopic(t1, 2, 1)])
    assert isinstance(again[t1], KafkaError) and again[t1].code == ErrorCode.TOPIC_ALREADY_EXISTS
    topics = admin.list_topics()
    assert topics[t1] == [0, 1] and topics[t2] == [0]

    assert admin.create_partitions({t1: NewPartitions(4)}) == {t1: None}
    assert admin.list_topics()[t1] == [0, 1, 2, 3]
    bad = admin.create_partitions({t1: 2})  # fewer than now: INVALID_PARTITIONS
    assert isinstance(bad[t1], KafkaError) and bad[t1].code == ErrorCode.INVALID_PARTITIONS
    # librdkafka sees the new partitions too.
    md = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(t1, timeout=10)
    assert sorted(md.topics[t1].partitions) == [0, 1, 2, 3]

    # A group with a member: listed, described, offsets listed.
    p = Producer({"bootstrap.servers": broker.bootstrap})
    try:
        for i in range(40):
            p.send(t1, b"v%d" % i, partition=i % 4)
        p.flush(20)
    finally:
        p.close()
    group = "g-" + uuid.uuid4().hex[:8]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "adm-member",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, **GROUP_CONF})
    try:
        c.subscribe([t1])
        drain(c, 40)
        c.commit_sync()
        listed = {g.group_id: g for g in admin.list_groups()}
        assert listed[group].protocol_type == "consumer"
        desc = admin.describe_groups([group])[group]
        assert desc.error is None and desc.state == "Stable" and desc.protocol in ("range", "cooperative-sticky")
        assert [m.client_id for m in desc.members] == ["adm-member"]
        assert sorted(desc.members[0].assignment) == [TopicPartition(t1, q) for q in range(4)]
        assert admin.list_group_offsets(group) == {TopicPartition(t1, q): OffsetAndMetadata(10) for q in range(4)}
        # Altering offsets of a group with live members is refused.
        busy = admin.alter_group_offsets(group, {TopicPartition(t1, 0): 1})
        assert isinstance(busy[TopicPartition(t1, 0)], KafkaError)
        assert busy[TopicPartition(t1, 0)].code == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        c.close()

    desc = admin.describe_groups([group])[group]
    assert desc.state == "Empty" and desc.members == []
    alt = admin.alter_group_offsets(group, {TopicPartition(t1, 0): OffsetAndMetadata(3, "meta"), TopicPartition(t1, 1): 5})
    assert alt == {TopicPartition(t1, 0): None, TopicPartition(t1, 1): None}
    offs = admin.list_group_offsets(group, [TopicPartition(t1, 0), TopicPartition(t1, 1)])
    assert offs == {TopicPartition(t1, 0): OffsetAndMetadata(3, "meta"), TopicPartition(t1, 1): OffsetAndMetadata(5)}
    deleted = admin.delete_group_offsets(group, [TopicPartition(t1, 2), TopicPartition(t1, 3)])
    assert deleted == {TopicPartition(t1, 2): None, TopicPartition(t1, 3): None}
    assert set(admin.list_group_offsets(group)) == {TopicPartition(t1, 0), TopicPartition(t1, 1)}
    # A consumer of the group starts where the altered offsets say.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "latest",
                  "enable.auto.commit": False})
    try:
        assert c.committed([TopicPartition(t1, 0)])[TopicPartition(t1, 0)] == OffsetAndMetadata(3, "meta")
    finally:
        c.close()

    assert admin.delete_groups([group]) == {group: None}
    assert group not in {g.group_id for g in admin.list_groups()}
    assert admin.delete_topics([t1, t2]) == {t1: None, t2: None}
    deadline = time.monotonic() + 10
    while t1 in admin.list_topics() or t2 in admin.list_topics():
        assert time.monotonic() < deadline, "deleted topics still listed"
        time.sleep(0.1)
    gone = admin.delete_topics([t1])
    assert isinstance(gone[t1], KafkaError) and gone[t1].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    cluster = admin.describe_cluster()
    assert [b.port for b in cluster.brokers] == list(broker.ports.values())


# --------------------------------------------------------------------- subscription, reset


def test_subscribe_by_pattern_picks_up_new_topics(broker: ShoalProcess, admin: AdminClient) -> None:
    prefix = "pat" + uuid.uuid4().hex[:6]
    a = new_topic(admin, 2, prefix)
    b = new_topic(admin, 1, prefix)
    other = new_topic(admin, 1, "other" + prefix)  # does not match the pattern
    p = Producer({"bootstrap.servers": broker.bootstrap})
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-" + prefix,
                  "auto.offset.reset": "earliest", "metadata.max.age.ms": 500, **GROUP_CONF})
    try:
        for t in (a, b, other):
            p.send(t, b"in-" + t.encode())
        p.flush(20)
        c.subscribe(pattern=prefix + r"-.*")
        got = poll_until(c, lambda: {tp.topic for tp in c.assignment()} == {a, b}, 20, "pattern assignment")
        got += drain(c, 2 - len(got))
        assert sorted(r.value for r in got) == sorted([b"in-" + a.encode(), b"in-" + b.encode()])
        assert c.subscription() == {a, b}
        # A topic created later that matches joins the subscription at the next metadata refresh.
        late = new_topic(admin, 1, prefix)
        p.send(late, b"late")
        p.flush(20)
        got = poll_until(c, lambda: TopicPartition(late, 0) in c.assignment(), 20, "late topic assigned")
        got += drain(c, 1 - len(got))
        assert [r.value for r in got] == [b"late"]
        assert {tp.topic for tp in c.assignment()} == {a, b, late}
    finally:
        c.close()
        p.close()


def test_auto_offset_reset_earliest_latest_none(broker: ShoalProcess, admin: AdminClient) -> None:
    topic = new_topic(admin, 1)
    tp = TopicPartition(topic, 0)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    try:
        for i in range(5):
            p.send(topic, b"old-%d" % i)
        p.flush(20)

        def consumer(reset: str, group: str | None = None) -> Consumer:
            conf: dict[str, Any] = {"bootstrap.servers": broker.bootstrap, "auto.offset.reset": reset, **GROUP_CONF}
            if group:
                conf["group.id"] = group
            return Consumer(conf)

        early = consumer("earliest")
        late = consumer("latest")
        try:
            early.assign([tp])
            late.assign([tp])
            assert early.position(tp) == 0
            assert late.position(tp) == 5
            p.send(topic, b"new")
            p.flush(20)
            assert [r.value for r in drain(early, 6)] == [b"old-%d" % i for i in range(5)] + [b"new"]
            assert [r.value for r in drain(late, 1)] == [b"new"]
        finally:
            early.close()
            late.close()

        # none: no committed offset -> NoOffsetForPartitionError; with one -> starts there.
        group = "g-" + uuid.uuid4().hex[:8]
        strict = consumer("none", group)
        try:
            strict.assign([tp])
            with pytest.raises(NoOffsetForPartitionError) as ei:
                strict.poll(500)
            assert ei.value.partitions == [tp]
            strict.commit_sync({tp: 2})
            assert [r.value for r in drain(strict, 4)] == [b"old-2", b"old-3", b"old-4", b"new"]
            strict.commit_sync({tp: 3})
        finally:
            strict.close(autocommit=False)
        # A subscribed member with reset=none and a committed offset starts from it.
        sub = consumer("none", group)
        try:
            sub.subscribe([topic])
            got = drain(sub, 3)
            assert [r.value for r in got] == [b"old-3", b"old-4", b"new"]
        finally:
            sub.close(autocommit=False)
    finally:
        p.close()


# ------------------------------------------------------------ the sync producer's fast path


def test_sync_send_from_many_threads_with_small_buffer(broker: ShoalProcess, admin: AdminClient) -> None:
    """send() appends on the caller's thread: concurrent senders, buffer.memory back-pressure."""
    topic = new_topic(admin, 3)
    per_thread, threads = 2000, 4
    delivered: list[Any] = []
    lock = threading.Lock()

    def on_delivery(err: BaseException | None, md: Any) -> None:
        with lock:
            delivered.append((err, md))

    # buffer.memory far below what is sent: senders must block for space, not fail or lose records.
    p = Producer({"bootstrap.servers": broker.bootstrap, "buffer.memory": 64 * 1024, "batch.size": 16384,
                  "linger.ms": 2, "max.block.ms": 20000})
    futs: dict[int, list[Any]] = {}
    errors: list[BaseException] = []

    def sender(t: int) -> None:
        try:
            futs[t] = [p.send(topic, b"%d-%d-" % (t, i) + b"x" * 200, key=b"thread-%d" % t, on_delivery=on_delivery)
                       for i in range(per_thread)]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    try:
        workers = [threading.Thread(target=sender, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(40)
        assert not errors and not any(w.is_alive() for w in workers)
        p.flush(20)
    finally:
        p.close()
    assert len(delivered) == threads * per_thread and all(e is None for e, _ in delivered)
    for t in range(threads):
        mds = [f.result(0) for f in futs[t]]
        # One key per thread: one partition, offsets increasing in send order.
        assert {md.partition for md in mds} == {partition_for_key(b"thread-%d" % t, 3)}
        bad = [(i, a.offset, b.offset) for i, (a, b) in enumerate(zip(mds, mds[1:], strict=False)) if a.offset >= b.offset]
        assert not bad, f"thread {t}: offsets out of send order at {bad[:5]}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest", "max.poll.records": 2000})
    try:
        c.assign([TopicPartition(topic, q) for q in range(3)])
        got = drain(c, threads * per_thread)
    finally:
        c.close()
    for t in range(threads):
        mine = [r.value.split(b"-")[1] for r in got if r.key == b"thread-%d" % t]
        assert mine == [b"%d" % i for i in range(per_thread)]


def test_a_corrupted_batch_on_disk_is_raised_at_its_offset_and_can_be_seeked_past(
        broker: ShoalProcess, admin: AdminClient) -> None:
    """A byte flipped in a stored batch (the broker serves its log as it is): poll hands out the records
    before it, then raises CORRUPT_MESSAGE with the position left at the batch, as Kafka's client does
    (check.crcs); a seek past it goes on."""
    from shoal.protocol.record_batch import iter_batches

    topic = new_topic(admin, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    try:
        for b in range(3):  # three batches of 5 records
            for i in range(5):
                p.send(topic, b"v%d" % (b * 5 + i), partition=0)
            p.flush(20)
    finally:
        p.close()
    log = broker.data_dir / f"{topic}-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    heads = list(iter_batches(bytes(data)))
    assert len(heads) >= 3 and sum(h.records_count for h in heads) == 15  # (the producer's batching decides)
    bad = heads[1]
    start, after = bad.base_offset, bad.base_offset + bad.last_offset_delta + 1
    data[bad.position + bad.size - 1] ^= 0xFF  # the second batch's last value byte
    log.write_bytes(bytes(data))
    tp = TopicPartition(topic, 0)
    c = Consumer({"bootstrap.servers": broker.bootstrap})
    try:
        c.assign([tp])
        c.seek(tp, 0)
        got = drain(c, start)
        assert [r.offset for r in got] == list(range(start))
        with pytest.raises(KafkaError, match=f"offset {start} fails its CRC") as e:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                assert not c.poll(200), "records past the corrupt batch"
        assert e.value.code == ErrorCode.CORRUPT_MESSAGE
        assert c.position(tp) == start
        c.seek(tp, after)
        assert [r.value for r in drain(c, 15 - after)] == [b"v%d" % i for i in range(after, 15)]
    finally:
        c.close()


# ------------------------------------------------------------------------------- listener calls


def test_a_listener_call_the_core_stopped_waiting_for_is_not_run(broker: ShoalProcess) -> None:
    """A rebalance-listener call queued for the application's thread, whose waiting task is then
    cancelled (close cancels a rebalance in progress), is skipped, not run into a cancelled future:
    CI once saw close() raise InvalidStateError from exactly this."""
    ran: list[str] = []
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-" + uuid.uuid4().hex[:8]})
    try:
        async def queue_then_cancel() -> None:
            task = asyncio.ensure_future(c._run_on_app_thread(lambda _tps: ran.append("cancelled"), []))
            await asyncio.sleep(0)  # the call is queued
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        c._lt.run(queue_then_cancel())  # the plain loop runner: nobody drains the queue yet

        async def then_another() -> None:
            # Queued behind the stale call, so the application's thread meets the stale one first.
            await c._run_on_app_thread(lambda _tps: ran.append("live"), [])

        c._run(then_another())
        assert ran == ["live"]
    finally:
        c.close()
