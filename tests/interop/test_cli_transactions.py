"""`shoal transactions` (as kafka-transactions.sh) run as a subprocess against a real broker: list,
describe and describe-producers of a live open transaction; find-hanging and abort of a transaction
no coordinator knows (left in the log, as by an older broker or a lost coordinator); bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Producer

from shoal.protocol.record_encode import build_batch
from shoal.storage import LogConfig, PartitionLog
from tests.interop.txn_helpers import create_topic, read_all, watermarks

pytestmark = pytest.mark.timeout(120)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shoal.cli", "transactions", *args], capture_output=True,
                          text=True, timeout=60)


def table(text: str) -> list[list[str]]:
    return [line.rstrip("\t").split("\t") for line in text.splitlines()]


def test_list_describe_and_producers_of_an_open_transaction(shoal):
    bs = shoal.bootstrap
    create_topic(bs, "cli-txn")
    p = Producer({"bootstrap.servers": bs, "transactional.id": "cli-tx", "transaction.timeout.ms": 60000})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce("cli-txn", value=b"a")
    p.flush(10)
    listed = cli("--bootstrap-server", bs, "list")  # Kafka's flag order
    assert listed.returncode == 0, listed.stderr
    rows = table(listed.stdout)
    assert [c.strip() for c in rows[0]] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    mine = [[c.strip() for c in r] for r in rows[1:] if r[0].strip() == "cli-tx"]
    assert mine and mine[0][1] == "0" and mine[0][3] == "Ongoing"
    pid = mine[0][2]
    described = cli("describe", "--bootstrap-server", bs, "--transactional-id", "cli-tx")
    assert described.returncode == 0, described.stderr
    head, row = ([c.strip() for c in r] for r in table(described.stdout))
    assert head == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions"]
    assert row[1:5] == ["cli-tx", pid, "0", "Ongoing"] and row[5] == "60000" and row[8] == "cli-txn-0"
    producers = cli("describe-producers", "--bootstrap-server", bs, "--topic", "cli-txn", "--partition", "0")
    assert producers.returncode == 0, producers.stderr
    head, row = ([c.strip() for c in r] for r in table(producers.stdout))
    assert head == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                    "CurrentTransactionStartOffset"]
    assert row[0] == pid and row[3] == "0" and row[5] == "0"
    # A live transaction is not hanging: its coordinator lists the partition.
    hanging = cli("find-hanging", "--bootstrap-server", bs, "--topic", "cli-txn", "--max-transaction-timeout", "0")
    assert hanging.returncode == 0 and len(table(hanging.stdout)) == 1, hanging.stdout
    p.commit_transaction(10)
    producers = cli("describe-producers", "--bootstrap-server", bs, "--topic", "cli-txn", "--partition", "0")
    assert table(producers.stdout)[1][5].strip() == "None"


def test_find_and_abort_a_hanging_transaction(shoal_factory):
    broker = shoal_factory()
    bs = broker.bootstrap
    create_topic(bs, "cli-hang")
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("cli-hang", value=b"before")
    plain.flush(10)
    broker.stop()
    # An open transaction of producer 777 that no coordinator knows of, as an old broker could leave.
    log = PartitionLog(broker.data_dir / "cli-hang-0", LogConfig())
    log.append(bytearray(build_batch([(1, None, b"hung", None)], producer_id=777, producer_epoch=3,
                                     base_sequence=0, is_transactional=True)), 1)
    log.close()
    broker.start()
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("cli-hang", value=b"after")
    plain.flush(10)
    assert watermarks(bs, "cli-hang") == (0, 1)  # stuck at the hanging transaction
    found = cli("find-hanging", "--bootstrap-server", bs, "--topic", "cli-hang", "--max-transaction-timeout", "0")
    assert found.returncode == 0, found.stderr
    head, row = ([c.strip() for c in r] for r in table(found.stdout))
    assert head == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                    "LastTimestamp", "Duration(min)"]
    assert row[:4] == ["cli-hang", "0", "777", "3"] and row[5] == "1"
    aborted = cli("abort", "--bootstrap-server", bs, "--topic", "cli-hang", "--partition", "0",
                  "--start-offset", "1")
    assert aborted.returncode == 0, aborted.stderr
    assert read_all(bs, "cli-hang") == [b"before", b"after"]
    assert watermarks(bs, "cli-hang") == (0, 4)


def test_bad_input_is_one_line_and_a_failure(shoal):
    bs = shoal.bootstrap
    for args, words in [
        (("describe", "--bootstrap-server", bs, "--transactional-id", "nobody"), "TRANSACTIONAL_ID_NOT_FOUND"),
        (("find-hanging", "--bootstrap-server", bs), "--topic or --broker-id"),
        (("abort", "--bootstrap-server", bs, "--topic", "none", "--partition", "0"), "--start-offset"),
        (("list", "--bootstrap-server", "127.0.0.1:1"), "127.0.0.1:1"),
    ]:
        r = cli(*args)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and words in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
