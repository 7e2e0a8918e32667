"""One simulated run: a seed, a cluster on virtual time, the workload, the invariants.

`run_seed(seed)` starts an N-node `Broker` in a fresh directory on a `SimLoop`, points the
simulated network and the seeded clients at it, lets node crashes and network faults happen,
and returns the trace, the faults injected by kind, and the violations found.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from shoal import entropy, fileio
from shoal.broker.config import BrokerConfig
from shoal.broker.metadata import OFFSETS_TOPIC, TRANSACTION_TOPIC
from shoal.sim import loop as sim_loop
from shoal.sim.admin import AdminClient
from shoal.sim.cluster import SimCluster
from shoal.sim.compaction import TOPIC_CONFIGS, CompactionChecker, KeyedProducer
from shoal.sim.consumer_checks import ConsumerChecker
from shoal.sim.consumer_groups import ProtocolMember
from shoal.sim.disk import DiskRates, SimDisk
from shoal.sim.group_checks import GroupChecker
from shoal.sim.groups import GroupMember
from shoal.sim.invariants import Checker
from shoal.sim.network import FaultRates, SimNetwork
from shoal.sim.plants import planted
from shoal.sim.replay_checks import ReplayChecker
from shoal.sim.share_checks import ShareChecker
from shoal.sim.share_groups import ShareMember
from shoal.sim.trace import Trace, Violation
from shoal.sim.txn import CommittedReader, TransactionalProducer
from shoal.sim.txn_checks import TxnChecker
from shoal.sim.workload import Committer, IdempotentProducer, Reader, WorkloadConfig


@dataclass
class SimResult:
    """What one seed did."""

    seed: int
    plant: str | None
    digest: str
    lines: list[str]
    faults: Counter[str]
    violations: list[Violation]
    steps: int
    virtual_s: float
    acked_records: int

    @property
    def ok(self) -> bool:
        return not self.violations


@dataclass
class SimConfig:
    """The cluster, the workload and the network's fault rates of a run."""

    nodes: int = 3
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    rates: FaultRates = field(default_factory=FaultRates)
    disk: DiskRates = field(default_factory=DiskRates)


# After the workload's time, how long the faults stop for before a client still running is called stuck.
QUIET_S = 30.0
# Partition files go to memory where the OS offers it: the simulated disk (`disk.py`) decides what
# survives a power cut, and never calls the real fsync.
_SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _broker_config(log_dir: str, partitions: int) -> BrokerConfig:
    return BrokerConfig({
        "listeners": "PLAINTEXT://sim:9092", "log.dirs": log_dir,
        "cluster.id": "shoal-sim-cluster-0000",  # fixed: the trace must not carry a random id
        "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
        "group.consumer.session.timeout.ms": "3000", "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
        "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3",
        "num.partitions": str(partitions), "default.replication.factor": "3",
        "auto.create.topics.enable": "false",
        # every append synced before it is answered: then a power cut may lose nothing acknowledged
        "log.flush.interval.messages": "1",
        # compaction (of the compacted topic and of the coordinators' logs) every quarter second
        "log.cleaner.backoff.ms": "250", "offsets.topic.segment.bytes": "4096",
        "transaction.state.log.segment.bytes": "4096",
        # share groups: sessions, heartbeats and record locks short enough to run out within a run
        "group.share.session.timeout.ms": "3000", "group.share.min.session.timeout.ms": "1000",
        "group.share.heartbeat.interval.ms": "1000", "group.share.min.heartbeat.interval.ms": "500",
        "group.share.record.lock.duration.ms": "2000", "group.share.min.record.lock.duration.ms": "1000",
        "share.coordinator.state.topic.num.partitions": "3", "share.coordinator.state.topic.segment.bytes": "4096",
    })


@contextlib.contextmanager
def _seeded_ids(seed: int) -> Iterator[None]:
    """The ids shoal makes up (topic and member ids) drawn from the seed while the run lasts:
    member ids order assignments, so they are part of the schedule."""
    entropy.set_source(entropy.seeded(random.Random(f"{seed}-uuid")))
    try:
        yield
    finally:
        entropy.reset_source()


@contextlib.contextmanager
def _disk(disk: SimDisk) -> Iterator[None]:
    """Every file shoal writes goes through the simulated disk while the run lasts."""
    fileio.set_disk(disk)
    try:
        yield
    finally:
        fileio.reset_disk()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The broker's logging off during a run: thousands of runs would print thousands of lines
    (the trace is what tells the story)."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)


def run_seed(seed: int, *, plant: str | None = None, config: SimConfig | None = None,
             keep_lines: bool = True) -> SimResult:
    """Run one seed to its end; never raises for a violation (they are in the result)."""
    config = config or SimConfig()
    loop = sim_loop.SimLoop()
    trace = Trace(keep_lines=keep_lines, clock=loop.time)
    checker = Checker(trace)
    disk = SimDisk(random.Random(f"{seed}-disk"), trace, config.disk)
    with tempfile.TemporaryDirectory(prefix="shoal-sim-", dir=_SCRATCH) as log_dir, _seeded_ids(seed), \
            planted(plant), _quiet(), _disk(disk):
        # An exception nobody awaited (a broker task, or the simulator's own) is a failure, not noise.
        loop.set_exception_handler(lambda _loop, ctx: trace.violation(
            "unhandled-error", f"{ctx.get('message')}: {ctx.get('exception')!r}"))
        try:
            sim_loop.run(lambda: _simulate(seed, config, log_dir, trace, checker, disk), loop)
        except Exception as e:  # noqa: BLE001 - the broker or the simulator raised: this seed found something
            trace.violation("sim-crashed", repr(e))
        virtual_s = loop.time()
    return SimResult(seed, plant, trace.digest(), trace.lines, trace.faults, trace.violations, trace.steps,
                     virtual_s, checker.acked_records)


async def _simulate(seed: int, config: SimConfig, log_dir: str, trace: Trace, checker: Checker,
                    disk: SimDisk) -> None:
    w = config.workload
    cluster = SimCluster(_broker_config(log_dir, w.partitions), config.nodes)
    cluster.disk = disk
    disk.on_fsync_error = cluster.fsync_failed
    # only the data topic's logs may be lied about: its invariants know how to excuse the loss
    lies = re.compile(rf".*{re.escape(os.sep)}{re.escape(w.topic)}-\d+{re.escape(os.sep)}[^{re.escape(os.sep)}]+\.log")
    disk.may_lie = lambda path: lies.fullmatch(path) is not None
    cluster.after_power_cut.append(checker.lost_to_a_lie)
    await cluster.start()
    broker = cluster.broker
    broker.create_topic(w.topic, w.partitions, min(3, config.nodes))
    broker.create_topic(w.txn_topic, w.partitions, min(3, config.nodes))
    broker.create_topic(w.kv_topic, w.partitions, min(3, config.nodes), dict(TOPIC_CONFIGS))
    compaction = CompactionChecker(trace, w.kv_topic, w.partitions)
    checker.unchecked_topics.add(w.kv_topic)
    checker.broker = broker
    txn_checker = TxnChecker(trace, w.txn_topic, broker)
    network = cluster.network = SimNetwork(broker, random.Random(f"{seed}-net"), trace, config.rates)
    cluster.watchers.append(lambda b: setattr(checker, "broker", b))
    cluster.watchers.append(lambda b: setattr(txn_checker, "broker", b))
    replay_checker = ReplayChecker(trace)
    replay_checker.watch(broker)
    cluster.watchers.append(replay_checker.watch)
    cluster.before_crash.append(replay_checker.before_crash)
    cluster.before_move.append(replay_checker.before_move)
    cluster.movable_topics = [w.topic, w.txn_topic, OFFSETS_TOPIC, TRANSACTION_TOPIC]
    network.observers.append(checker.observe)
    network.observers.append(GroupChecker(trace, network.ghost_tokens).observe)
    network.observers.append(txn_checker.observe)
    network.observers.append(compaction.observe)
    network.observers.append(ConsumerChecker(trace, ghosts=network.ghost_tokens).observe)
    share_checker = None
    if w.share_groups:
        share_checker = ShareChecker(trace, {broker.metadata.topics[w.topic].topic_id: w.topic}, checker.truncated,
                                     network.ghost_tokens, clock=asyncio.get_running_loop().time)
        network.observers.append(share_checker.observe)
        network.on_close.append(share_checker.connection_closed)
        cluster.before_crash.append(share_checker.disrupted)
        cluster.before_move.append(share_checker.disrupted)
        for g in range(w.share_groups):  # as an admin sets it before the group's first member joins
            broker.metadata.set_group_configs(f"share-group-{g}", {"share.auto.offset.reset": "earliest"})
    trace.emit(f"seed {seed}: {config.nodes} nodes, topic {w.topic} x{w.partitions}")
    try:
        await _drive(seed, config, cluster, trace, checker, txn_checker, compaction, share_checker)
        checker.final_check(cluster.broker, {w.topic: w.partitions})
        txn_checker.final_check(cluster.broker, w.partitions)
        compaction.check(cluster.broker)
        trace.emit(f"end: {checker.acked_records} records acknowledged, {network.handled} requests handled, "
                   f"{replay_checker.compared} coordinator replays compared, {compaction.scans} compacted logs "
                   f"checked, {cluster.broker.logs.records_compacted} records compacted since the last restart"
                   + (f", {share_checker.acquisitions} share acquisitions" if share_checker else ""))
    finally:
        network.drop_all()
        await cluster.broker.close()


async def _drive(seed: int, config: SimConfig, cluster: SimCluster, trace: Trace, checker: Checker,
                 txn_checker: TxnChecker, compaction: CompactionChecker, share_checker: ShareChecker | None) -> None:
    w = config.workload
    network = cluster.network
    assert network is not None
    nodes = list(cluster.broker.node_ids)

    def client(cls: Any, name: str, **kwargs: Any) -> Any:
        return cls(name, network, random.Random(f"{seed}-{name}"), trace, nodes, **kwargs)

    workers = [client(IdempotentProducer, f"producer-{i}", checker=checker, topic=w.topic,
                      partitions=w.partitions, acks=-1 if i % 2 == 0 else 1, records=w.records_per_producer)
               for i in range(w.producers)]
    workers += [client(Committer, f"committer-{i}", topic=w.topic, partitions=w.partitions, ops=w.ops_per_committer)
                for i in range(w.committers)]
    workers += [client(GroupMember, f"member-{g}.{i}", group=f"group-{g}", topic=w.topic, partitions=w.partitions,
                       lifetime_s=w.member_lifetime_s)
                for g in range(w.groups) for i in range(w.members_per_group)]
    workers += [client(ProtocolMember, f"consumer-{g}.{i}", group=f"consumer-group-{g}", topic=w.topic,
                       lifetime_s=w.member_lifetime_s)
                for g in range(w.consumer_groups) for i in range(w.consumer_members_per_group)]
    workers += [client(ShareMember, f"share-{g}.{i}", group=f"share-group-{g}", topic=w.topic,
                       lifetime_s=w.member_lifetime_s)
                for g in range(w.share_groups) for i in range(w.share_members_per_group)]
    if share_checker is not None:
        share_checker.members.update((m.name, m.member_id) for m in workers if isinstance(m, ShareMember))
    workers += [client(TransactionalProducer, f"txn-producer-{i}", txn_checker=txn_checker, topic=w.txn_topic,
                       partitions=w.partitions, transactions=w.transactions_per_producer)
                for i in range(w.txn_producers)]
    workers += [client(KeyedProducer, f"kv-producer-{i}", checker=checker, compaction=compaction, topic=w.kv_topic,
                       partitions=w.partitions, acks=-1, records=w.kv_records_per_producer, keys=w.kv_keys)
                for i in range(w.kv_producers)]
    workers += [client(AdminClient, f"admin-{i}", ops=w.admin_ops, replication=min(3, config.nodes))
                for i in range(w.admins)]
    # readers of a topic somebody writes (a run of the swarm may leave a kind of writer out)
    readers = [client(Reader, f"reader-{p}", checker=checker, topic=w.topic, partition=p, wait_ms=w.reader_wait_ms)
               for p in range(w.partitions if w.producers else 0)]
    readers += [client(CommittedReader, f"committed-reader-{p}", checker=checker, txn_checker=txn_checker,
                       topic=w.txn_topic, partition=p, wait_ms=w.reader_wait_ms)
                for p in range(w.partitions if w.txn_producers else 0)]
    loop = asyncio.get_running_loop()
    background = [loop.create_task(r.run(), name=r.name) for r in readers]
    if w.kv_producers:
        background.append(loop.create_task(compaction.keep_checking(lambda: cluster.broker, 0.5), name="compaction"))
    crasher = None
    if w.crash_every_s > 0:
        crasher = loop.create_task(cluster.crasher(random.Random(f"{seed}-crash"), w), name="crasher")
        background.append(crasher)
    work = [loop.create_task(x.run(), name=x.name) for x in workers]
    _done, pending = await asyncio.wait(work, timeout=w.duration_s)
    if pending:
        # Faults so dense that nothing gets through (a node cut off more often than not) stall any
        # system: liveness is judged once they stop, as Jepsen heals the cluster before its final reads
        # (seed 15100). Only what then still does not finish in QUIET_S is stuck.
        trace.emit(f"faults stop: {len(pending)} clients still running get {QUIET_S:g} s more")
        if crasher is not None:
            crasher.cancel()
            await asyncio.gather(crasher, return_exceptions=True)
        network.heal()
        if cluster.disk is not None:
            cluster.disk.rates = DiskRates(write_error=0.0, fsync_error=0.0, lie=0.0)
        await cluster.all_up()
        _done, pending = await asyncio.wait(pending, timeout=QUIET_S)
    for worker, task in zip(workers, work, strict=True):  # in the clients' order, not the sets'
        if task in pending:  # every client's work is bounded: one still running is stuck (a liveness bug)
            checker.fail("client-stuck", f"{worker.name} did not finish in {w.duration_s:g} s and "
                                         f"{QUIET_S:g} s without faults")
            task.cancel()
        elif task.exception() is not None:
            checker.fail("client-crashed", f"{worker.name}: {task.exception()!r}")
    await asyncio.sleep(1.0)  # let readers catch up with the last acknowledged records
    for task in background:
        task.cancel()
    # bounded: a task that drops its cancel would otherwise run on in virtual time forever (seed 247245)
    ending = [*background, *pending]
    _done, left = await asyncio.wait(ending, timeout=sim_loop.CANCEL_S) if ending else (set(), set())
    for task in [t for t in ending if t in left]:  # in a fixed order, not the set's
        checker.fail("client-stuck", f"{task.get_name()} went on {sim_loop.CANCEL_S:g} s after it was cancelled")
    await cluster.all_up()  # a crash may have been cut short: every node up for the final scan
