"""Exactly-once under faults: copiers (consume-transform-produce in transactions, one per input
partition) are SIGKILLed again and again, the node coordinating their transactions is stopped and
started, and the whole broker (three nodes in one process) is killed -9 and restarted, while they
copy. A checker then reads the output at read_committed and requires: every input exactly once
(no loss, no duplicate), in input order per partition, no record of an aborted transaction, and
every transaction all or nothing. A read_committed consumer reading the output all along must
never have seen anything but a prefix of that."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from shoal.coordinator.partitioning import partition_for
from tests.interop.txn_helpers import create_topic, read_all

PARTITIONS = 3
PER_PARTITION = 1500
PAUSE_MS = 150  # inside each transaction, so that a fault often finds a transaction open
CHUNKS = 6
FAULTS = ["kill-copier", "kill-broker", "stop-coordinator", "kill-copier"]
ROOT = Path(__file__).resolve().parents[2]


class Copiers:
    def __init__(self, bootstrap: str, client: str, log_dir: Path) -> None:
        self.bootstrap, self.client, self.log_dir = bootstrap, client, log_dir
        self.procs: dict[int, subprocess.Popen] = {}
        self.starts = 0

    def start(self, p: int) -> None:
        log = open(self.log_dir / f"copier-{p}.log", "a")  # noqa: SIM115 - the process's lifetime
        self.procs[p] = subprocess.Popen([sys.executable, "-m", "tests.interop.copier", self.bootstrap, str(p),
                                          self.client, str(PAUSE_MS)], cwd=ROOT, stdout=log,
                                         stderr=subprocess.STDOUT)
        self.starts += 1

    def kill(self, p: int) -> None:
        proc = self.procs[p]
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def revive(self) -> None:
        for p, proc in self.procs.items():
            if proc.poll() is not None:
                self.start(p)

    def stop_all(self) -> None:
        for p in list(self.procs):
            self.kill(p)


def copied(bootstrap: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier-group"})
    try:
        offsets = c.committed([TopicPartition("in", p) for p in range(PARTITIONS)], timeout=10)
        return sum(max(tp.offset, 0) for tp in offsets)
    except Exception:  # noqa: BLE001 - the broker may be down right now
        return -1
    finally:
        c.close()


def progress(bootstrap: str) -> str:
    """Committed / last stable / end offset per input partition: what a failure message needs."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier-group",
                  "isolation.level": "read_committed"})
    try:
        tps = [TopicPartition("in", p) for p in range(PARTITIONS)]
        committed = [tp.offset for tp in c.committed(tps, timeout=10)]
        stable = [c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
        return f"committed {committed}, input ends at {stable}"
    except Exception as e:  # noqa: BLE001
        return f"progress unknown: {e}"
    finally:
        c.close()


def coordinator_node(bootstrap: str, transactional_id: str) -> int | None:
    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("__transaction_state", timeout=5)
        return md.topics["__transaction_state"].partitions[partition_for(transactional_id, 50)].leader
    except Exception:  # noqa: BLE001
        return None


class ConcurrentReader(threading.Thread):
    """Reads the output at read_committed while the copiers run and the faults happen."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.values: dict[int, list[bytes]] = defaultdict(list)
        self.stop = threading.Event()

    def run(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "concurrent-reader",
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        c.assign([TopicPartition("out", p, 0) for p in range(PARTITIONS)])
        try:
            while not self.stop.is_set():
                m = c.poll(0.2)
                if m is not None and not m.error():
                    self.values[m.partition()].append(m.value())
        finally:
            c.close()


def check(values: list[bytes]) -> None:
    """The exactly-once checker (raises AssertionError with what is wrong)."""
    seen: dict[int, int] = defaultdict(int)
    txns: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    order: dict[int, list[int]] = defaultdict(list)
    for v in values:
        assert not v.startswith(b"ABORTED"), f"a record of an aborted transaction is visible: {v!r}"
        value, run, txn, k, n = v.decode().split(":")
        i = int(value)
        seen[i] += 1
        txns[(run, txn)].append((int(k), int(n)))
        order[i % PARTITIONS].append(i)
    duplicates = sorted(i for i, c in seen.items() if c > 1)
    missing = sorted(set(range(PARTITIONS * PER_PARTITION)) - set(seen))
    assert not duplicates, f"{len(duplicates)} inputs copied more than once, e.g. {duplicates[:5]}"
    assert not missing, f"{len(missing)} inputs never copied, e.g. {missing[:5]}"
    for key, parts in txns.items():
        n = parts[0][1]
        assert sorted(k for k, _ in parts) == list(range(n)), f"transaction {key} is torn: {sorted(parts)}"
    for p, inputs in order.items():
        assert inputs == sorted(inputs), f"partition {p} is out of order"


@pytest.mark.parametrize("client", ["confluent", "shoal"])
def test_exactly_once_copier_under_faults(shoal_factory, tmp_path, client):
    broker = shoal_factory(nodes=3, overrides={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
        "offsets.topic.num.partitions": "10"})
    bs = broker.bootstrap
    create_topic(bs, "in", PARTITIONS)
    create_topic(bs, "out", PARTITIONS)
    # The input arrives in chunks between the faults, so the faults always land mid-copy however
    # fast the copiers are on this machine: copying cannot finish before the last chunk.
    seed = Producer({"bootstrap.servers": bs, "linger.ms": 5, "enable.idempotence": True})
    total = PARTITIONS * PER_PARTITION
    chunks = [range(i, min(i + total // CHUNKS, total)) for i in range(0, total, total // CHUNKS)]

    def feed(chunk: range) -> None:
        for i in chunk:
            seed.produce("in", value=b"%d" % i, partition=i % PARTITIONS)
        assert seed.flush(60) == 0, "the input could not be produced"

    feed(chunks.pop(0))
    copiers = Copiers(bs, client, tmp_path)
    for p in range(PARTITIONS):
        copiers.start(p)
    reader = ConcurrentReader(bs)
    reader.start()
    rng = random.Random(11)
    faults: dict[str, int] = defaultdict(int)
    try:
        for action in FAULTS * 2:
            time.sleep(rng.uniform(0.8, 1.6))
            copiers.revive()
            if action == "kill-copier":
                copiers.kill(rng.randrange(PARTITIONS))
            elif action == "stop-coordinator":
                node = None
                for _ in range(20):
                    node = coordinator_node(bs, f"copier-{rng.randrange(PARTITIONS)}")
                    if node is not None and node >= 0:
                        break
                    time.sleep(0.5)
                assert node is not None and node >= 0, "no coordinator for the copiers' transactions"
                broker.command(f"stop-node {node}")
                time.sleep(rng.uniform(0.5, 1.5))
                broker.command(f"start-node {node}")
            else:
                broker.kill9()
                time.sleep(0.3)
                broker.start()
            faults[action] += 1
            if chunks:
                feed(chunks.pop(0))
        while chunks:
            feed(chunks.pop(0))
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and copied(bs) != total:
            copiers.revive()
            time.sleep(1)
        assert copied(bs) == total, \
            f"copiers did not finish in time: {progress(bs)} ({dict(faults)})"
    finally:
        copiers.stop_all()
        reader.stop.set()
        reader.join(30)
        seed.flush(10)
    # Killed copiers may leave a transaction open: a restarted copier or the timeout aborts it.
    values = read_all(bs, "out", PARTITIONS, timeout=60)
    check(values)
    by_partition: dict[int, list[bytes]] = defaultdict(list)
    for v in values:
        by_partition[int(v.split(b":")[0]) % PARTITIONS].append(v)
    for p, seen in reader.values.items():
        assert seen == by_partition[p][:len(seen)], f"the concurrent reader of partition {p} saw other data"
    everything = read_all(bs, "out", PARTITIONS, isolation="read_uncommitted", timeout=60)
    assert len(everything) > len(values)  # aborted records are there for read_uncommitted
