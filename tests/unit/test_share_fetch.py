"""ShareFetch and ShareAcknowledge over a socket: share sessions, acquisition, locks, acknowledgements.

Each member is a raw client speaking ShareFetch v1/v2 and ShareAcknowledge v1/v2 as a share
consumer does; records are produced with Produce. Group configs set the group's start
(`share.auto.offset.reset`), lock duration and delivery limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import uuid
from collections.abc import Callable

import pytest

from shoal import fileio
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from shoal.protocol.generated.share_acknowledge_request import ShareAcknowledgeRequest
from shoal.protocol.generated.share_fetch_request import ShareFetchRequest
from shoal.protocol.record_batch import iter_batches, iter_records
from shoal.storage import StorageError
from tests.unit.broker_harness import RawClient, batch, create_req, port, produce_one, run, running_broker

ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
GROUP_RESOURCE = 32


async def group_configs(c: RawClient, group: str, **configs: str) -> None:
    r = IncrementalAlterConfigsRequest
    resp = await c.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, r(resources=[r.AlterConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=group, configs=[
            r.AlterableConfig(name=k.replace("_", "."), config_operation=0, value=v) for k, v in configs.items()])]))
    assert resp.responses[0].error_code == 0, resp


class Member:
    """One share consumer's session on one partition."""

    def __init__(self, client: RawClient, group: str, topic_id: uuid.UUID, member_id: str | None = None) -> None:
        self.c, self.group, self.topic_id = client, group, topic_id
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = 0

    def _topics(self, acks: list[tuple[int, int, list[int]]] | None, partition: int = 0) -> list:
        f = ShareFetchRequest
        return [f.FetchTopic(topic_id=self.topic_id, partitions=[f.FetchPartition(
            partition_index=partition, acknowledgement_batches=[
                f.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=t) for a, b, t in acks or []])])]

    async def fetch(self, acks: list[tuple[int, int, list[int]]] | None = None, *, max_records: int = 500,
                    max_wait: int = 0, version: int = 1, epoch: int | None = None, mode: int = 0):  # noqa: ANN201
        req = ShareFetchRequest(group_id=self.group, member_id=self.member_id, share_acquire_mode=mode,
                                share_session_epoch=self.epoch if epoch is None else epoch,
                                max_wait_ms=max_wait, min_bytes=1, max_bytes=1 << 20, max_records=max_records,
                                batch_size=max_records, topics=self._topics(acks))
        resp = await self.c.call(ApiKey.SHARE_FETCH, version, req)
        if resp.error_code == 0 and epoch is None:
            self.epoch = -1 if self.epoch == -1 else self.epoch + 1
        return resp

    async def ack(self, acks: list[tuple[int, int, list[int]]], *, version: int = 1, final: bool = False):  # noqa: ANN201
        a = ShareAcknowledgeRequest
        req = a(group_id=self.group, member_id=self.member_id, share_session_epoch=-1 if final else self.epoch,
                is_renew_ack=version >= 2 and any(RENEW in t for _, _, t in acks),
                topics=[a.AcknowledgeTopic(topic_id=self.topic_id, partitions=[a.AcknowledgePartition(
                    partition_index=0, acknowledgement_batches=[
                        a.AcknowledgementBatch(first_offset=x, last_offset=y, acknowledge_types=t)
                        for x, y, t in acks])])])
        resp = await self.c.call(ApiKey.SHARE_ACKNOWLEDGE, version, req)
        if resp.error_code == 0 and not final:
            self.epoch += 1
        return resp


def acquired(resp) -> list[tuple[int, int, int]]:  # noqa: ANN001
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]


def ack_errors(resp) -> list[int]:  # noqa: ANN001
    return [p.acknowledge_error_code for t in resp.responses for p in t.partitions]


def offsets_in(resp) -> list[int]:  # noqa: ANN001
    out = []
    for t in resp.responses:
        for p in t.partitions:
            data = bytes(p.records or b"")
            for h in iter_batches(data):
                out.extend(r.offset for r in iter_records(data, h))
    return out


async def setup(broker, group: str = "sg", records: int = 10, **configs: str):  # noqa: ANN001, ANN201
    c = await RawClient.connect(port(broker))
    resp = await c.call(ApiKey.CREATE_TOPICS, 7, create_req("q"))
    assert resp.topics[0].error_code == 0
    topic_id = broker.metadata.topics["q"].topic_id
    await group_configs(c, group, share_auto_offset_reset="earliest", **configs)
    for i in range(records):
        await produce_one(c, "q", 0, batch(1, ts=1000 + i))
    return c, topic_id


async def setup_replicated(broker, records: int):  # noqa: ANN001, ANN201
    """On three nodes: topic q replicated on all, group sg starting at the earliest, ``records`` records
    produced on the leader. A client of the first node, the topic id, the leader, and a client of it."""
    c = await RawClient.connect(port(broker))
    resp = await c.call(ApiKey.CREATE_TOPICS, 7, create_req("q", rf=3))
    assert resp.topics[0].error_code == 0
    tid = broker.metadata.topics["q"].topic_id
    await group_configs(c, "sg", share_auto_offset_reset="earliest")
    leader = broker.metadata.leader("q", 0)
    lc = await RawClient.connect(port(broker, leader))
    for i in range(records):
        await produce_one(lc, "q", 0, batch(1, ts=1000 + i))
    return c, tid, leader, lc


async def until(check: Callable[[], bool], tries: int = 250) -> None:
    """Wait (20 ms at a time, ``tries`` times at most) for ``check``; the caller asserts what it needs."""
    for _ in range(tries):
        if check():
            return
        await asyncio.sleep(0.02)


def test_two_members_share_a_partition_and_no_record_goes_twice(tmp_path):
    async def go():
        async with running_broker(tmp_path) as broker:
            c, tid = await setup(broker, records=10)
            c2 = await RawClient.connect(port(broker))
            a, b = Member(c, "sg", tid), Member(c2, "sg", tid)
            ra = await a.fetch(max_records=4)
            assert ra.error_code == 0 and ra.acquisition_lock_timeout_ms == 30000
            assert acquired(ra) == [(0, 3, 1)]
            assert set(range(4)) <= set(offsets_in(ra))
            rb = await b.fetch(max_records=100)
            assert acquired(rb) == [(4, 9, 1)]
            # a acknowledges its records with its next fetch; nothing is left to acquire
            ra = await a.fetch([(0, 3, [ACCEPT])])
            assert ack_errors(ra) == [0] and acquired(ra) == [], ra
            # a partition with nothing to deliver has an empty record set, never a null one (librdkafka
            # refuses a null one: "invalid MessageSetSize -1")
            assert [p.records for t in ra.responses for p in t.partitions] == [b""]
            # b may not acknowledge a's records, nor offsets it does not hold: nothing changes
            rb = await b.ack([(0, 1, [ACCEPT])])
            assert [p.error_code for t in rb.responses for p in t.partitions] == [ErrorCode.INVALID_RECORD_STATE]
            sp = broker.share.partition("sg", "q", 0)
            assert sp.start_offset == 4 and sp.in_flight_count() == 6
            await c.close()
            await c2.close()
    run(go())


def test_release_redelivers_reject_archives_and_the_limit_archives_a_poison_record(tmp_path):
    async def go():
        async with running_broker(tmp_path) as broker:
            c, tid = await setup(broker, records=3, share_delivery_count_limit="2")
            m = Member(c, "sg", tid)
            assert acquired(await m.fetch()) == [(0, 2, 1)]
            # accept 0, release 1, reject 2
            r = await m.ack([(0, 2, [ACCEPT, RELEASE, REJECT])])
            assert r.error_code == 0
            assert acquired(await m.fetch()) == [(1, 1, 2)]
            # released again at the limit: archived, never delivered a third time
            r = await m.fetch([(1, 1, [RELEASE])])
            assert ack_errors(r) == [0] and acquired(r) == []
            sp = broker.share.partition("sg", "q", 0)
            assert sp.start_offset == 3 and sp.in_flight_count() == 0
            await c.close()
    run(go())


def test_an_expired_lock_and_a_closed_connection_return_the_records(tmp_path):
    async def go():
        async with running_broker(tmp_path, **{"group.share.min.record.lock.duration.ms": "1000"}) as broker:
            c, tid = await setup(broker, records=2, share_record_lock_duration_ms="1000")
            holder = Member(c, "sg", tid)
            r = await holder.fetch()
            assert acquired(r) == [(0, 1, 1)] and r.acquisition_lock_timeout_ms == 1000
            c2 = await RawClient.connect(port(broker))
            other = Member(c2, "sg", tid)
            assert acquired(await other.fetch()) == []
            # a long-polling fetch is woken when the lock expires, and gets the records (2nd delivery)
            r = await other.fetch(max_wait=5000)
            assert acquired(r) == [(0, 1, 2)]
            # the holder's late acknowledgement is refused; the records stay with `other`
            late = await holder.fetch([(0, 1, [ACCEPT])])
            assert ack_errors(late) == [ErrorCode.INVALID_RECORD_STATE]
            # `other` goes away without acknowledging: its records come back at once
            await c2.close()
            await until(lambda: broker.share.partition("sg", "q", 0).acquired_count() == 0, tries=50)
            assert acquired(await holder.fetch()) == [(0, 1, 3)]
            await c.close()
    run(go())


def test_session_epochs_and_bad_acknowledgements(tmp_path):
    async def go():
        async with running_broker(tmp_path) as broker:
            c, tid = await setup(broker, records=4)
            m = Member(c, "sg", tid)
            # acknowledgements on the initial epoch, and an unknown session
            r = await m.fetch([(0, 0, [ACCEPT])])
            assert r.error_code == ErrorCode.INVALID_REQUEST
            r = await m.fetch(epoch=3)
            assert r.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
            assert acquired(await m.fetch(max_records=2)) == [(0, 1, 1)]
            r = await m.fetch(epoch=7)
            assert r.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
            sp = broker.share.partition("sg", "q", 0)
            before = sp.in_flight()
            # past what was acquired; a bad type; a types array of the wrong length: nothing changes
            for acks in ([(0, 3, [ACCEPT])], [(0, 1, [9])], [(0, 1, [ACCEPT, ACCEPT, ACCEPT])]):
                r = await m.ack(acks)
                codes = [p.error_code for t in r.responses for p in t.partitions]
                assert codes and codes[0] in (ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_RECORD_STATE), (acks, codes)
                assert sp.in_flight() == before
            # RENEW needs v2 with IsRenewAck (KIP-1222); there it keeps the records acquired with a fresh lock
            r = await m.ack([(0, 1, [RENEW])], version=1)
            assert r.error_code == ErrorCode.INVALID_REQUEST and sp.in_flight() == before
            r = await m.ack([(0, 1, [RENEW])], version=2)
            assert r.error_code == 0 and r.acquisition_lock_timeout_ms == 30000
            assert sp.acquired_count() == 2
            # the final ShareAcknowledge accepts and closes the session
            r = await m.ack([(0, 1, [ACCEPT])], final=True)
            assert r.error_code == 0 and sp.start_offset == 2
            r = await m.fetch()
            assert r.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
            await c.close()
    run(go())


def test_the_state_survives_a_restart_from_the_share_coordinator(tmp_path):
    async def go():
        async with running_broker(tmp_path) as broker:
            c, tid = await setup(broker, records=6)
            m = Member(c, "sg", tid)
            assert acquired(await m.fetch(max_records=5)) == [(0, 4, 1)]
            # accept 0-1, release 2; 3-4 stay acquired (a lock is not persisted: they come back available)
            r = await m.ack([(0, 2, [ACCEPT, ACCEPT, RELEASE])])
            assert r.error_code == 0
            assert [p.error_code for t in r.responses for p in t.partitions] == [0]
            code, state = await broker.share_coordinators.read_state("sg", tid, 0)
            assert code == 0 and state is not None and state.start_offset == 2
            await c.close()
        async with running_broker(tmp_path) as broker:
            c = await RawClient.connect(port(broker))
            m = Member(c, "sg", tid)
            # 2-4 were delivered once; 5 never: the group did not start over at `earliest`
            assert acquired(await m.fetch()) == [(2, 4, 2), (5, 5, 1)]
            await c.close()
    run(go())


def test_three_nodes_the_partition_leader_stops_and_the_new_leader_takes_the_persisted_state(tmp_path):
    async def go():
        async with running_broker(tmp_path, nodes=3) as broker:
            c, tid, leader, lc = await setup_replicated(broker, records=5)
            m = Member(lc, "sg", tid)
            assert acquired(await m.fetch()) == [(0, 4, 1)]
            assert (await m.ack([(0, 1, [ACCEPT])])).error_code == 0
            # the wrong node answers NOT_LEADER_OR_FOLLOWER with the leader's endpoint
            other = next(n for n in broker.node_ids if n != leader)
            oc = await RawClient.connect(port(broker, other))
            r = await Member(oc, "sg", tid).fetch()
            p = r.responses[0].partitions[0]
            assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and p.current_leader.leader_id == leader
            assert [e.node_id for e in r.node_endpoints] == [leader]
            await broker.stop_node(leader)
            new = broker.metadata.leader("q", 0)
            assert new != leader
            nc = await RawClient.connect(port(broker, new))
            # 2-4 were acquired on the old leader: after the fail-over they are available again
            assert acquired(await Member(nc, "sg", tid).fetch()) == [(2, 4, 2)]
            for x in (c, oc, nc):
                await x.close()
    run(go())


def test_read_committed_share_groups_never_deliver_aborted_or_open_transactions(tmp_path):
    from shoal.protocol.record_encode import build_batch

    async def go():
        async with running_broker(tmp_path) as broker:
            c, tid = await setup(broker, records=2, share_isolation_level="read_committed")
            plog = broker.partition_log("q", 0)

            def txn(pid: int, n: int, seq: int = 0) -> None:
                plog.append(bytearray(build_batch([(2000 + i, None, b"t", []) for i in range(n)], producer_id=pid,
                                                  producer_epoch=0, base_sequence=seq, is_transactional=True)), 2000)
            txn(7, 3)                                  # offsets 2-4, aborted by the marker at 5
            plog.append_marker(7, 0, 0, False, 2000)
            txn(8, 2)                                  # offsets 6-7, committed by the marker at 8
            plog.append_marker(8, 0, 0, True, 2000)
            txn(9, 1)                                  # offset 9: still open
            await produce_one(c, "q", 0, batch(1, ts=3000))  # offset 10, after the open transaction
            m = Member(c, "sg", tid)
            r = await m.fetch()
            assert acquired(r) == [(0, 1, 1), (6, 7, 1)], acquired(r)
            assert set(offsets_in(r)) >= {0, 1, 6, 7} and not set(offsets_in(r)) & {2, 3, 4, 9, 10}
            plog.append_marker(9, 0, 0, True, 3000)    # offset 11: 9 and 10 become readable
            r = await m.fetch([(0, 1, [ACCEPT]), (6, 7, [ACCEPT])])
            assert ack_errors(r) == [0] and acquired(r) == [(9, 10, 1)], acquired(r)
            sp = broker.share.partition("sg", "q", 0)
            assert sp.start_offset == 9  # the aborted records and the markers were left behind
            await c.close()
    run(go())


def test_batch_optimized_acquisition_takes_whole_batches_and_record_limit_does_not(tmp_path):
    async def go():
        async with running_broker(tmp_path) as broker:
            c, tid = await setup(broker, records=0)
            for b in range(3):                                  # three batches: 0-9, 10-19, 20-29
                await produce_one(c, "q", 0, batch(10, ts=1000 * (b + 1)))
            # v1 and v2's default mode (batch_optimized): up to the end of the batch reached (KIP-1206)
            assert acquired(await Member(c, "sg", tid).fetch(max_records=3)) == [(0, 9, 1)]
            assert acquired(await Member(c, "sg", tid).fetch(max_records=3, version=2)) == [(10, 19, 1)]
            # v2 record_limit: exactly max_records
            assert acquired(await Member(c, "sg", tid).fetch(max_records=3, version=2, mode=1)) == [(20, 22, 1)]
            await c.close()
    run(go())


def test_share_fetches_count_against_the_consumer_byte_rate_quota(tmp_path):
    from tests.unit.test_broker_quotas import alter

    async def go():
        async with running_broker(tmp_path) as broker:
            c, tid = await setup(broker, records=0)
            for b in range(4):
                await produce_one(c, "q", 0, batch(20, size=1000, ts=1000 * (b + 1)))
            resp = await c.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter(
                ([("client-id", "raw-test")], [("consumer_byte_rate", 3_000.0)])))
            assert resp.entries[0].error_code == 0
            m = Member(c, "sg", tid)
            # the first share fetch (one batch, ~21 KB) is within the quota: 3000 B/s over 10 s...
            first = await m.fetch(max_records=20)
            assert first.throttle_time_ms == 0 and acquired(first) == [(0, 19, 1)]
            # ...the next goes over: no data, a throttle time, as Kafka's throttled ShareFetch
            second = await m.fetch(max_records=20)
            assert second.throttle_time_ms > 0 and second.responses == []
            await c.close()
    run(go())


class _SyncFails:
    """The real disk, except that every fsync fails (EIO)."""

    def __getattr__(self, name: str) -> object:
        return getattr(fileio.OS_DISK, name)

    def fsync(self, fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    fdatasync = fsync


def test_a_share_fetch_of_an_offline_log_answers_kafka_storage_error(tmp_path, monkeypatch):
    # found by the simulator (share groups in swarm seeds): the fetch raised StorageError out of the
    # handler, and the node closed the connection instead of answering
    async def go():
        async with running_broker(tmp_path) as broker:
            c, tid = await setup(broker, records=3)
            a = Member(c, "sg", tid)
            first = await a.fetch(max_records=1)
            assert acquired(first) == [(0, 0, 1)]
            await produce_one(c, "q", 0, batch(1, ts=2000))  # unsynced data for the failing fsync
            monkeypatch.setattr(fileio, "_disk", _SyncFails())
            with pytest.raises(StorageError):
                broker.partition_log("q", 0).flush()
            monkeypatch.undo()
            resp = await a.fetch([(0, 0, [ACCEPT])])
            assert resp.error_code == 0
            assert [p.error_code for t in resp.responses for p in t.partitions] == [ErrorCode.KAFKA_STORAGE_ERROR]
            assert acquired(resp) == []
            await c.close()
    run(go())


def test_a_fetch_whose_connection_closed_while_the_state_loaded_gives_its_records_back(tmp_path, monkeypatch):
    # found by the simulator (swarm seed 15502): a ShareFetch waiting for its partition's state from the share
    # coordinator went on after its node stopped and its connection closed, and acquired records for an
    # answer never sent; they stayed locked, held by no one, until the lock ran out
    async def go():
        async with running_broker(tmp_path) as broker:
            c, tid = await setup(broker, records=3)
            reading, gate = asyncio.Event(), asyncio.Event()
            read_state = broker.share_coordinators.read_state

            async def slow_read(*args):  # noqa: ANN002, ANN202
                reading.set()
                await gate.wait()
                return await read_state(*args)

            monkeypatch.setattr(broker.share_coordinators, "read_state", slow_read)
            c2 = await RawClient.connect(port(broker))
            gone = Member(c2, "sg", tid)
            pending = asyncio.ensure_future(gone.fetch())
            await asyncio.wait_for(reading.wait(), 5)
            await c2.close()
            sessions = broker.share.sessions(0)
            await until(lambda: sessions.get("sg", gone.member_id) is None)  # the node saw the close
            assert sessions.get("sg", gone.member_id) is None
            gate.set()

            def given_back() -> bool:  # the fetch went on, acquired, and (fixed) gave back
                with contextlib.suppress(KeyError):
                    sp = broker.share.partition("sg", "q", 0)
                    return bool(sp.in_flight_count()) and not sp.acquired_count()
                return False

            await until(given_back)
            sp = broker.share.partition("sg", "q", 0)
            assert sp.in_flight_count() == 3 and sp.acquired_count() == 0
            other = Member(c, "sg", tid)
            assert acquired(await other.fetch()) == [(0, 2, 2)]  # at once, its second delivery
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
            await c.close()
    run(go())


def test_closing_a_session_with_a_former_leader_leaves_what_the_member_holds_on_the_new_one(tmp_path):
    # found by the simulator (swarm seed 1008): a member's connection to the partition's old leader closed,
    # and ending that session released the records the member held through its session with the new leader
    async def go():
        async with running_broker(tmp_path, nodes=3) as broker:
            c, tid, old, oc = await setup_replicated(broker, records=4)
            member = str(uuid.uuid4())
            at_old = Member(oc, "sg", tid, member)
            assert acquired(await at_old.fetch(max_records=1)) == [(0, 0, 1)]
            new = next(n for n in broker.node_ids if n != old)
            await broker.reassign("q", 0, [new, *[n for n in broker.node_ids if n != new]])
            assert broker.metadata.leader("q", 0) == new
            nc = await RawClient.connect(port(broker, new))
            assert acquired(await Member(nc, "sg", tid, member).fetch()) == [(0, 3, 1)]  # 0 came back at the move
            await oc.close()  # the session with the old leader ends
            await until(lambda: broker.share.sessions(old).get("sg", member) is None)
            assert broker.share.sessions(old).get("sg", member) is None
            assert broker.share.partition("sg", "q", 0).acquired_count() == 4
            c2 = await RawClient.connect(port(broker, new))
            assert acquired(await Member(c2, "sg", tid).fetch()) == []  # nothing of it for anyone else
            for x in (c, nc, c2):
                await x.close()
    run(go())
