"""The command-line tools as a user runs them: `shoal topics|configs|produce|consume|groups` as
subprocesses against a shoal broker, their output compared line for line with what Kafka's tools
print for the same state (the layouts of kafka-topics, kafka-configs, the console producer and
consumer and kafka-consumer-groups, from their sources), and bad input answered with one line on
stderr and a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

pytestmark = pytest.mark.timeout(240)


def shoal(bs: str, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``shoal ARGS --bootstrap-server BS`` (every tool takes the flag after its command)."""
    return subprocess.run([sys.executable, "-m", "shoal.cli", *args, "--bootstrap-server", bs], input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def shoal_cmd(bs: str):  # noqa: ANN201
    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return shoal(bs, *args, stdin=stdin)
    return run


def ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, f"rc={r.returncode}\nstdout:{r.stdout}\nstderr:{r.stderr}"
    return r.stdout


def one_line_error(r: subprocess.CompletedProcess[str], text: str) -> None:
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and text in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def kafka_uuid(tid) -> str:  # noqa: ANN001
    """How Kafka's tools print a topic id: URL-safe base64, no padding (librdkafka prints standard base64)."""
    import base64

    raw = (tid.get_most_significant_bits() & (2**64 - 1)).to_bytes(8, "big") + \
        (tid.get_least_significant_bits() & (2**64 - 1)).to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_topics_tool(shoal):
    bs = shoal.bootstrap
    run = shoal_cmd(bs)
    assert ok(run("topics", "create", "--topic", "orders", "--partitions", "2", "--config", "retention.ms=1000")) \
        == "Created topic orders.\n"
    one_line_error(run("topics", "create", "--topic", "orders"), "Topic 'orders' already exists.")
    assert ok(run("topics", "create", "--topic", "orders", "--if-not-exists")) == ""
    ok(run("topics", "create", "--topic", "audit"))
    assert ok(run("topics", "list", "--exclude-internal")) == "audit\norders\n"
    assert ok(run("topics", "list", "--topic", "ord.*")) == "orders\n"
    admin = AdminClient({"bootstrap.servers": bs})
    from confluent_kafka import TopicCollection

    tid = admin.describe_topics(TopicCollection(["orders"]))["orders"].result(15).topic_id
    expected = (f"Topic: orders\tTopicId: {kafka_uuid(tid)}\tPartitionCount: 2\tReplicationFactor: 1\t"
                # a fresh cluster's min.insync.replicas record (as Kafka 4.1+ writes it) shows too
                "Configs: min.insync.replicas=1,retention.ms=1000\n"
                "\tTopic: orders\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: N/A\tLastKnownElr: N/A\n"
                "\tTopic: orders\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: N/A\tLastKnownElr: N/A\n")
    assert ok(run("topics", "describe", "--topic", "orders")) == expected
    # every topic has a non-default config since the cluster-level min.insync.replicas record (Kafka 4.1+)
    overrides = ok(run("topics", "describe", "--topics-with-overrides", "--exclude-internal")).splitlines(True)
    assert overrides[1] == expected.splitlines(True)[0] and len(overrides) == 2
    assert overrides[0].startswith("Topic: audit\t") and overrides[0].endswith("Configs: min.insync.replicas=1\n")
    assert ok(run("topics", "alter", "--topic", "orders", "--partitions", "3")) == ""
    assert len(admin.list_topics("orders", timeout=10).topics["orders"].partitions) == 3
    one_line_error(run("topics", "alter", "--topic", "orders", "--partitions", "2"),
                   "The topic orders currently has 3 partition(s); 2 would not be an increase.")
    one_line_error(run("topics", "create", "--topic", "x", "--partitions", "0"), "The partitions must be greater than 0")
    one_line_error(run("topics", "create", "--topic", "x", "--config", "no.such=1"), "Unknown topic config name: no.such")
    one_line_error(run("topics", "describe", "--topic", "nope"), "Topic 'nope' does not exist as expected")
    assert ok(run("topics", "describe", "--topic", "nope", "--if-exists")) == ""
    assert ok(run("topics", "delete", "--topic", "audit")) == ""
    assert ok(run("topics", "list", "--exclude-internal")) == "orders\n"
    one_line_error(run("topics", "delete", "--topic", "audit"), "Topic 'audit' does not exist as expected")
    one_line_error(shoal_cmd("127.0.0.1:1")("topics", "list"), "cannot connect to broker 127.0.0.1:1")


def test_kafka_action_flags(shoal):
    """Kafka's tools take their action as a flag anywhere on the line (kafka-topics.sh
    --bootstrap-server B --create --topic T); shoal's accept that form too, so scripts written
    for them (librdkafka's test suite calls kafka-topics.sh so) run with the name swapped."""
    bs = shoal.bootstrap

    def kafka_style(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "shoal.cli", "--log-level", "WARNING", args[0],
                               "--bootstrap-server", bs, *args[1:]], capture_output=True, text=True, timeout=60)

    assert ok(kafka_style("topics", "--create", "--topic", "k", "--partitions", "2", "--replication-factor", "1",
                          "--config", "cleanup.policy=compact")) == "Created topic k.\n"
    assert ok(kafka_style("topics", "--list", "--exclude-internal")) == "k\n"
    assert "PartitionCount: 2" in ok(kafka_style("topics", "--topic", "k", "--describe"))
    ok(kafka_style("configs", "--entity-type", "topics", "--entity-name", "k", "--alter",
                   "--add-config", "retention.ms=5000"))
    assert "retention.ms=5000" in ok(kafka_style("configs", "--describe", "--entity-type", "topics",
                                                 "--entity-name", "k"))
    assert ok(kafka_style("groups", "--list")) == ok(shoal_cmd(bs)("groups", "list"))
    c = Consumer({"bootstrap.servers": bs, "group.id": "kg"})
    c.commit(offsets=[TopicPartition("k", 0, 1)], asynchronous=False)
    c.close()
    described = ok(kafka_style("groups", "--describe", "--group", "kg"))
    assert "kg" in described and described == ok(shoal_cmd(bs)("groups", "describe", "kg"))
    assert ok(kafka_style("topics", "--delete", "--topic", "k")) == ""
    assert ok(kafka_style("topics", "--list", "--exclude-internal")) == ""


def test_topics_describe_on_three_nodes(shoal_factory):
    broker = shoal_factory(nodes=3)
    run = shoal_cmd(broker.bootstrap)
    ok(run("topics", "create", "--topic", "r3", "--replica-assignment", "0:1:2,1:2:0"))
    lines = ok(run("topics", "describe", "--topic", "r3")).splitlines()
    assert "\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: " in lines[0]
    assert lines[1] == "\tTopic: r3\tPartition: 0\tLeader: 0\tReplicas: 0,1,2\tIsr: 0,1,2\tElr: N/A\tLastKnownElr: N/A"
    assert lines[2] == "\tTopic: r3\tPartition: 1\tLeader: 1\tReplicas: 1,2,0\tIsr: 1,2,0\tElr: N/A\tLastKnownElr: N/A"
    assert ok(run("topics", "describe", "--topic", "r3", "--unavailable-partitions")) == ""


def test_configs_tool(shoal):
    run = shoal_cmd(shoal.bootstrap)
    ok(run("topics", "create", "--topic", "cfg"))
    assert ok(run("configs", "alter", "--entity-type", "topics", "--entity-name", "cfg", "--add-config",
                  "retention.ms=5000,cleanup.policy=[compact,delete]")) == "Completed updating config for topic cfg.\n"
    assert ok(run("configs", "describe", "--topic", "cfg")) == (
        "Dynamic configs for topic cfg are:\n"
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
        # As Kafka: log.retention.hours is listed only when log.retention.ms is set somewhere
        # (tests/reference/test_describe_configs_diff.py compares this with Apache Kafka).
        "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000}\n")
    one_line_error(run("configs", "alter", "--topic", "cfg", "--delete-config", "segment.ms"), "Invalid config(s): segment.ms")
    one_line_error(run("configs", "alter", "--topic", "cfg", "--add-config", "retention.ms=soon"), "retention.ms")
    ok(run("configs", "alter", "--topic", "cfg", "--delete-config", "cleanup.policy"))
    assert ok(run("configs", "alter", "--entity-type", "brokers", "--entity-default", "--add-config",
                  "log.retention.ms=7200000")) == "Completed updating default config for brokers in the cluster.\n"
    assert ok(run("configs", "describe", "--entity-type", "brokers", "--entity-default")) == (
        "Default configs for brokers in the cluster are:\n"
        "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}\n"
        # As Kafka: the cluster default resource lists its dynamic default layer only
        "  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}\n")
    one_line_error(run("configs", "alter", "--broker", "0", "--add-config", "num.partitions=3"),
                   "Cannot update these configs dynamically: Set(num.partitions)")
    shoal.restart()  # applied configs are kept
    run = shoal_cmd(shoal.bootstrap)
    out = ok(run("configs", "describe", "--topic", "cfg", "--all"))
    assert out.startswith("All configs for topic cfg are:\n")
    assert "  retention.ms=5000 sensitive=false" in out
    assert "  cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}" in out
    seg = [ln for ln in out.splitlines() if ln.startswith("  segment.ms=")][0]
    # As Kafka: log.roll.hours is listed only when log.roll.ms is set somewhere
    assert seg == ("  segment.ms=604800000 sensitive=false synonyms={}")
    brokers = ok(run("configs", "describe", "--entity-type", "brokers")).splitlines()
    assert brokers[0] == "Dynamic configs for broker 0 are:" and brokers[1] == "Default configs for brokers in the cluster are:"


def test_console_producer_and_consumer(shoal):
    bs = shoal.bootstrap
    run = shoal_cmd(bs)
    ok(run("topics", "create", "--topic", "lines"))
    ok(run("produce", "--topic", "lines", "--property", "parse.key=true", "--property", "key.separator=:",
           "--property", "null.marker=NULL", stdin="k1:hello\nk2:world\nNULL:nokey\nk4:NULL\n"))
    ok(run("produce", "--topic", "lines", "--property", "parse.key=true", "--property", "parse.headers=true",
           stdin="h1:a,h2:b\tk5\twith headers\n"))
    got = ok(run("consume", "--topic", "lines", "--from-beginning", "--max-messages", "5", "--property",
                 "print.key=true", "--property", "print.offset=true", "--property", "print.partition=true",
                 "--property", "print.headers=true"))
    assert got == ("Partition:0\tOffset:0\tNO_HEADERS\tk1\thello\n"
                   "Partition:0\tOffset:1\tNO_HEADERS\tk2\tworld\n"
                   "Partition:0\tOffset:2\tNO_HEADERS\tnull\tnokey\n"
                   "Partition:0\tOffset:3\tNO_HEADERS\tk4\tnull\n"
                   "Partition:0\tOffset:4\th1:a,h2:b\tk5\twith headers\n")
    r = run("consume", "--topic", "lines", "--partition", "0", "--offset", "4", "--max-messages", "1",
            "--formatter", "json", "--property", "print.timestamp=true")
    rec = json.loads(ok(r))
    assert rec["key"] == "k5" and rec["value"] == "with headers" and rec["offset"] == 4
    assert rec["headers"] == [{"key": "h1", "value": "a"}, {"key": "h2", "value": "b"}]
    assert r.stderr.strip().endswith("Processed a total of 1 messages")
    ts = ok(run("consume", "--topic", "lines", "--partition", "0", "--offset", "earliest", "--max-messages", "1",
                "--property", "print.timestamp=true", "--property", "print.value=false"))
    assert ts.startswith("CreateTime:") and ts.endswith("\n") and "\t" not in ts
    # A group commits what it consumed: the lag tool sees it.
    ok(run("consume", "--topic", "lines", "--group", "readers", "--from-beginning", "--max-messages", "3"))
    c = Consumer({"bootstrap.servers": bs, "group.id": "readers"})
    assert c.committed([TopicPartition("lines", 0)], timeout=10)[0].offset == 3
    c.close()
    # Bad input: one line, non-zero exit, nothing half-sent after the bad line.
    one_line_error(run("produce", "--topic", "lines", "--property", "parse.key=true", stdin="ok\tv\nno-separator\n"),
                   "No key separator found on line number 2: 'no-separator'")
    one_line_error(run("consume", "--topic", "lines", "--offset", "3"), "The partition is required when offset is specified.")
    one_line_error(run("consume", "--topic", "lines", "--partition", "0", "--offset", "x"),
                   "The provided offset value 'x' is incorrect.")
    one_line_error(run("produce", "--topic", "lines", "--property", "key.separator=:", "--property", "null.marker=:"),
                   "null.marker and key.separator may not be equal")


def test_console_consumer_read_committed(shoal):
    bs = shoal.bootstrap
    run = shoal_cmd(bs)
    ok(run("topics", "create", "--topic", "txn"))
    p = Producer({"bootstrap.servers": bs, "transactional.id": "cli-txn"})
    p.init_transactions()
    p.begin_transaction()
    p.produce("txn", b"aborted")
    p.flush(10)  # written, then aborted (librdkafka drops what is still queued at abort)
    p.abort_transaction()
    p.begin_transaction()
    p.produce("txn", b"committed")
    p.commit_transaction()
    committed = ok(run("consume", "--topic", "txn", "--from-beginning", "--isolation-level", "read_committed",
                       "--timeout-ms", "8000"))
    assert committed == "committed\n"
    everything = ok(run("consume", "--topic", "txn", "--from-beginning", "--timeout-ms", "8000"))
    assert everything == "aborted\ncommitted\n"


def test_groups_reset_delete_and_delete_offsets(shoal):
    bs = shoal.bootstrap
    run = shoal_cmd(bs)
    ok(run("topics", "create", "--topic", "work", "--partitions", "2"))
    p = Producer({"bootstrap.servers": bs})
    for i in range(10):
        p.produce("work", b"%d" % i, partition=i % 2)
    p.flush(10)
    c = Consumer({"bootstrap.servers": bs, "group.id": "workers", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("work", 0, 4), TopicPartition("work", 1, 5)], asynchronous=False)
    c.close()

    def committed() -> list[int]:
        cc = Consumer({"bootstrap.servers": bs, "group.id": "workers"})
        out = [tp.offset for tp in cc.committed([TopicPartition("work", 0), TopicPartition("work", 1)], timeout=10)]
        cc.close()
        return out

    table = ("\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET     "
             "\nworkers                        work                           0          {}              "
             "\nworkers                        work                           1          {}              \n")
    assert ok(run("groups", "reset-offsets", "--group", "workers", "--topic", "work", "--to-earliest")) \
        == table.format(0, 0)
    assert committed() == [4, 5]  # a dry run by default
    assert ok(run("groups", "reset-offsets", "--group", "workers", "--all-topics", "--shift-by", "-2", "--execute")) \
        == table.format(2, 3)
    assert committed() == [2, 3]
    r = run("groups", "reset-offsets", "--group", "workers", "--topic", "work:1", "--to-offset", "99", "--execute")
    assert ok(r).endswith("work                           1          5              \n")  # clamped to the end
    assert "New offset (99) is higher than latest offset for topic partition work-1" in r.stderr
    assert committed() == [2, 5]
    assert ok(run("groups", "reset-offsets", "--group", "workers", "--all-topics", "--to-latest", "--export")) \
        == "work,0,5\nwork,1,5\n"
    future = ok(run("groups", "reset-offsets", "--group", "workers", "--topic", "work", "--to-datetime",
                    "2999-01-01T00:00:00.000"))
    assert "Warn: Partition 0 from topic work is empty. Falling back to latest known offset." in future
    # An active group cannot be reset.
    active = Consumer({"bootstrap.servers": bs, "group.id": "workers", "session.timeout.ms": 6000})
    active.subscribe(["work"])
    deadline = time.monotonic() + 20
    while not active.assignment() and time.monotonic() < deadline:
        active.poll(0.2)
    out = ok(run("groups", "reset-offsets", "--group", "workers", "--all-topics", "--to-earliest", "--execute"))
    assert "Error: Assignments can only be reset if the group 'workers' is inactive, but the current state is " \
           "Stable." in out
    active.close()
    assert committed()[0] >= 2  # not reset to 0
    one_line_error(run("groups", "reset-offsets", "--group", "workers", "--all-topics"), "give exactly one of")
    assert ok(run("groups", "delete-offsets", "--group", "workers", "--topic", "work:0")) == (
        "Request succeed for deleting offsets with topic work:0 group workers\n"
        "\nTOPIC                          PARTITION       STATUS         "
        "\nwork                           0               Successful     \n")
    assert committed()[0] < 0
    assert ok(run("groups", "delete", "--group", "workers")) == \
        "Deletion of requested consumer groups ('workers') was successful.\n"
    r = run("groups", "delete", "--group", "workers")
    assert r.returncode == 1 and "* Group 'workers' could not be deleted due to: GROUP_ID_NOT_FOUND" in r.stdout


def test_acls_tool_without_an_authorizer(shoal):
    """`shoal acls` on a broker with no authorizer: Kafka's SecurityDisabledException, as kafka-acls prints it
    (the ACL tools on a secured broker: test_cli_security.py)."""
    run = shoal_cmd(shoal.bootstrap)
    for args, message in [(["--list"], "No Authorizer is configured on the broker"),
                          (["--add", "--topic", "t", "--allow-principal", "User:a"],
                           "No Authorizer is configured on the broker"),
                          (["--remove", "--force", "--topic", "t"], "No Authorizer is configured.")]:
        r = run("acls", *args)
        assert (r.returncode, r.stdout, r.stderr) == (
            1, "Error while executing ACL command: org.apache.kafka.common.errors.SecurityDisabledException: "
               f"{message}\n", ""), args
    r = run("acls", "--list", "--add")
    assert r.returncode == 1 and r.stderr == "Command must include exactly one action: --list, --add, --remove. \n"
