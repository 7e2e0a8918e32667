"""Apache Kafka's own command-line tools, run unchanged as Java classes on Kafka 4.4's jars, against shoal and
against Apache Kafka: kafka-get-offsets, kafka-delete-records, kafka-leader-election, kafka-log-dirs,
kafka-consumer-groups --reset-offsets / --delete-offsets / --delete, kafka-producer-perf-test and
kafka-consumer-perf-test on one node; kafka-reassign-partitions (--generate, --execute, --verify, --list,
--cancel, throttles) and kafka-leader-election on three nodes (shoal's ``serve --nodes 3`` with node ids 1-3
beside a three-node Kafka).

Each scenario runs on both brokers at once, a thread each; each broker's tool runs go through one JVM of its
own (tools_helpers.ToolSession, ToolRunner.java: the tools' main classes one after another, each run with its
own stdout, stderr and exit code), since a JVM start per run cost 3-7 s on a busy two-core machine. Every
step's exit status, stdout and stderr must be equal once what differs by nature is normalised (see ``_clean``:
node ids where the brokers' differ, topic ids, log dir paths, the time stamps of the tools' log lines, Java
stack-trace frames, the Java hash-map order of partition lists). Steps whose output differs for a reason in
the brokers' designs are normalised where they are, with the reason; one known shoal difference is pinned.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.reference.tools_helpers import Step, ToolSession, assert_same, normalise

pytestmark = [pytest.mark.reference, pytest.mark.timeout(300)]

GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
BASE_TS = 1_600_000_000_000  # 2020-09-13T12:26:40Z (no retention check runs on the reference brokers)

_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+Z ")  # the admin client's log4j lines: their time
_STACK = re.compile(r"^\s+(at |\.\.\. \d+ more)")


def _clean(text: str, dirs: list[str], hide_nodes: bool) -> str:
    """A tool's output with what differs by nature hidden (node ids too when the brokers' ids differ)."""
    out = []
    for line in text.splitlines():
        if _STACK.match(line):  # a stack trace's frames: the same code, compared by message only
            continue
        line = _LOG_LINE.sub("<time> ", line)
        for d in sorted(dirs, key=len, reverse=True):  # log dir paths: each broker's own folder
            line = line.replace(d, "<dir>")
        # "... for partitions a-0, b-1": Kafka's tools print Java hash sets, in an order of their own
        line = re.sub(r"(?<=for partitions )(.*)", lambda m: ", ".join(sorted(m[1].split(", "))), line)
        out.append(line)
    # kafka-delete-records prints its result per partition from a Java hash map: in an order of its own
    rows = sorted(ln for ln in out if ln.startswith("partition: "))
    out = [rows.pop(0) if ln.startswith("partition: ") else ln for ln in out]
    if hide_nodes:
        return normalise("\n".join(out))
    # the same node ids on both: topic ids only, and cells rather than column widths
    return "\n".join(re.sub(r"[ \t]+", " ", re.sub(r"TopicId: \S+", "TopicId: <id>", ln)).strip() for ln in out)


class Broker:
    """One broker under test and the steps a scenario ran on it."""

    def __init__(self, kind: str, bootstrap: str, tools: tuple[Path, Path], dirs: list[str], tmp: Path,
                 node_ids: dict[int, str] | None = None) -> None:
        self.kind, self.bs, self.tools, self.dirs, self.tmp = kind, bootstrap, tools, dirs, tmp
        self.session: ToolSession | None = None
        self.node_ids = node_ids or {}  # a node id and how to show it (shoal's one node is 0, Kafka's 1)
        self.steps: list[Step] = []
        self.took: list[tuple[float, str, str]] = []  # each run's seconds, shown when a test fails
        self.extra: dict[str, str] = {}

    def raw(self, main_class: str, *args: str, bootstrap: str = "--bootstrap-server") -> tuple[int, str, str]:
        if self.session is None:  # one JVM runs this broker's tools, one after another
            self.session = ToolSession(*self.tools, self.tmp / f"{self.kind}-runs")
        r = self.session.run(main_class, *([bootstrap, self.bs] if bootstrap else []), *args)
        return r.returncode, r.stdout, r.stderr

    def run(self, main_class: str, *args: str, bootstrap: str = "--bootstrap-server",
            post: Callable[[str], str] | None = None) -> Step:
        """Run a tool; record its step (``post`` reduces its stdout to what is compared)."""
        t0 = time.monotonic()
        rc, out, err = self.raw(main_class, *args, bootstrap=bootstrap)
        self.took.append((time.monotonic() - t0, main_class.rsplit(".", 1)[1], " ".join(args)[:80]))
        hide_nodes = bool(self.node_ids)
        out, err = _clean(out, self.dirs, hide_nodes), _clean(err, self.dirs, hide_nodes)
        if post is not None:
            out = post(out)
        for node, shown in self.node_ids.items():
            out = re.sub(rf'(?<=brokers ){node}\b', shown, out)
            out = re.sub(rf'(?<="broker":){node}\b', json.dumps(shown), out)
            err = re.sub(rf"(?<=existent brokers: ){node}\b", shown, err)
        self.steps.append((rc, out, err))
        return self.steps[-1]

    def json_file(self, name: str, content: Any) -> str:
        path = self.tmp / f"{self.kind}-{name}.json"
        path.write_text(json.dumps(content))
        return str(path)

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        new = NewTopic(topic, partitions, 1)
        admin = AdminClient({"bootstrap.servers": self.bs})  # kept alive until its answer
        admin.create_topics([new])[topic].result(30)


def on_both(brokers: list[Broker], scenario: Callable[[Broker], None]) -> dict[str, list[Step]]:
    """``scenario`` on each broker at once; their normalised steps, by broker kind."""
    errors: list[BaseException] = []

    def go(b: Broker) -> None:
        try:
            scenario(b)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            e.add_note(f"(on {b.kind})")
            errors.append(e)

    threads = [threading.Thread(target=go, args=(b,), daemon=True) for b in brokers]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(240)
    finally:
        for b in brokers:
            if b.session is not None:
                b.session.close()
    for b in brokers:
        print(f"{b.kind}:", *(f"  {s:5.1f}s {cls} {args}" for s, cls, args in b.took), sep="\n")
    if errors:
        raise errors[0]
    assert not any(t.is_alive() for t in threads), "a scenario did not finish in time"
    return {b.kind: b.steps for b in brokers}


def _one_node(shoal_reference, kafka_broker, tools: tuple[Path, Path], tmp_path: Path) -> list[Broker]:
    # shoal's session broker is node 0, Kafka's node 1: the tools that print the id show it as <node>
    return [Broker("shoal", shoal_reference.bootstrap_servers, tools, [str(shoal_reference.data_dir)], tmp_path,
                   {0: "<node>"}),
            Broker("kafka", kafka_broker.bootstrap_servers, tools, [str(kafka_broker.workdir / "node-1" / "data")],
                   tmp_path, {1: "<node>"})]


def _produce_with_times(bs: str, topic: str) -> None:
    """Partition 0: two batches whose largest timestamp is held twice, first at offset 2; partition 1: seven
    records a second apart; partition 2: none."""
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20})
    for batch in ([1000, 5000, 9000, 3000, 9000], [2000, 9000, 9000]):
        for ts in batch:
            p.produce(topic, value=b"v", partition=0, timestamp=BASE_TS + ts)
        assert p.flush(15) == 0
    for i in range(7):
        p.produce(topic, value=b"v", partition=1, timestamp=BASE_TS + i * 1000)
    assert p.flush(15) == 0


def test_get_offsets_delete_records_log_dirs_leader_election(shoal_reference, kafka_broker, tool_runner, tmp_path):
    """kafka-get-offsets (every --time, partition filters, errors), kafka-delete-records (a delete, the high
    watermark, beyond it, below the low watermark, a duplicate), kafka-log-dirs --describe and
    kafka-leader-election on one node."""
    t = f"go-{uuid.uuid4().hex[:8]}"

    def scenario(b: Broker) -> None:
        b.create_topic(t, 3)
        b.create_topic(f"{t}-empty", 2)
        _produce_with_times(b.bs, t)
        for time_arg in ("latest", "-2", "-3", "-4", "-5", "-7", str(BASE_TS + 4000), str(BASE_TS + 9000),
                         str(BASE_TS + 9001), "0"):
            b.run(GET_OFFSETS, "--topic", t, "--time", time_arg)
        b.run(GET_OFFSETS, "--topic-partitions", f"{t}:0-1,{t}-empty:1-", "--time", "earliest")
        b.run(GET_OFFSETS, "--topic", f"{t}.*", "--partitions", "0,2", "--exclude-internal-topics")
        b.run(GET_OFFSETS, "--topic", f"{t}-nope")
        b.run(GET_OFFSETS, "--topic", t, "--time", "soon")
        plan = b.json_file("delete", {"version": 1, "partitions": [
            {"topic": t, "partition": 0, "offset": 3}, {"topic": t, "partition": 1, "offset": -1}]})
        b.run(DELETE_RECORDS, "--offset-json-file", plan)
        b.run(DELETE_RECORDS, "--offset-json-file", b.json_file("beyond", {"version": 1, "partitions": [
            {"topic": t, "partition": 0, "offset": 100}]}))
        b.run(DELETE_RECORDS, "--offset-json-file", b.json_file("below", {"version": 1, "partitions": [
            {"topic": t, "partition": 0, "offset": 1}]}))
        b.run(DELETE_RECORDS, "--offset-json-file", b.json_file("twice", {"version": 1, "partitions": [
            {"topic": t, "partition": 2, "offset": 0}, {"topic": t, "partition": 2, "offset": 0}]}))
        b.run(GET_OFFSETS, "--topic", t, "--time", "earliest")
        b.run(GET_OFFSETS, "--topic", t, "--time", "-3")
        b.run(LOG_DIRS, "--describe", "--topic-list", f"{t},{t}-empty")
        b.run(LOG_DIRS, "--describe", "--topic-list", t, "--broker-list", "5")
        b.run(LEADER_ELECTION, "--election-type", "preferred", "--all-topic-partitions")
        b.run(LEADER_ELECTION, "--election-type", "unclean", "--topic", t, "--partition", "1")
        b.run(LEADER_ELECTION, "--election-type", "preferred", "--path-to-json-file", b.json_file("elect", {
            "partitions": [{"topic": t, "partition": 0}, {"topic": t, "partition": 9},
                           {"topic": f"{t}-nope", "partition": 0}]}))

    results = on_both(_one_node(shoal_reference, kafka_broker, tool_runner, tmp_path), scenario)
    for steps in results.values():
        for i, (rc, out, err) in enumerate(steps):
            if out.startswith("Querying brokers for log directories"):
                # kafka-log-dirs prints one JSON line: partition sizes are the brokers' own (batch overheads,
                # shoal's files); its structure, partitions and order are compared, sizes of written ones masked
                head, _, doc = out.rpartition("\n")
                parsed = json.loads(doc)
                for broker in parsed["brokers"]:
                    for d in broker["logDirs"]:
                        for p in d["partitions"]:
                            p["size"] = "<size>" if p["size"] else 0
                steps[i] = (rc, head + "\n" + json.dumps(parsed), err)
    assert_same(results)


def _sorted_rows(out: str) -> str:
    """kafka-consumer-groups' tables (a header line starting "GROUP ", rows up to a blank line), rows sorted;
    so are the lines of an --export plan (topic,partition,offset), which follow the same map, and a run of
    --to-datetime's "Warn: Partition ... is empty" lines, printed in the order of the tool's own hash map of
    partitions (two partitions in one bucket come in the order the broker listed the group's offsets)."""
    out = re.sub(r"Warn: [^\n]*(?:\n\nWarn: [^\n]*)*", lambda m: "\n\n".join(sorted(m[0].split("\n\n"))), out)
    lines = out.split("\n")
    if lines and all(re.fullmatch(r"[^ ,]+,\d+,\d+", line) for line in lines):
        return "\n".join(sorted(lines))
    blocks: list[list[str]] = [[]]
    for line in out.split("\n"):
        if line.startswith("GROUP ") or not line:
            blocks.append([line])
        else:
            blocks[-1].append(line)
    return "\n".join("\n".join(b[:1] + sorted(b[1:]) if b and b[0].startswith("GROUP ") else b) for b in blocks
                     if b)


def test_consumer_groups_reset_and_delete(shoal_reference, kafka_broker, tool_runner, tmp_path):
    """kafka-consumer-groups --reset-offsets: each of --to-earliest, --to-latest, --to-offset, --shift-by (both
    ways, past either end), --to-datetime, --by-duration, --to-current, --from-file, dry run and --execute, on a
    topic, a partition and all topics, of an inactive group, a group that does not exist yet and a group with a
    live member (refused); then --delete-offsets and --delete (of an empty group, a live one, a missing one)."""
    t = f"gr-{uuid.uuid4().hex[:8]}"
    g, g2 = f"{t}-g", f"{t}-new"

    def scenario(b: Broker) -> None:
        b.create_topic(t, 2)
        b.create_topic(f"{t}-b", 1)
        p = Producer({"bootstrap.servers": b.bs, "linger.ms": 5})
        for i in range(10):
            p.produce(t, value=b"%d" % i, partition=i % 2, timestamp=BASE_TS + i * 1000)
            p.produce(f"{t}-b", value=b"%d" % i, partition=0, timestamp=BASE_TS + i * 1000)
        assert p.flush(15) == 0
        c = CKConsumer({"bootstrap.servers": b.bs, "group.id": g, "enable.auto.commit": False})
        try:
            deadline = time.monotonic() + 30
            while True:  # a first group of a broker: its offsets topic and coordinator may still be coming up
                try:
                    c.commit(offsets=[TopicPartition(t, 0, 3), TopicPartition(t, 1, 4),
                                      TopicPartition(f"{t}-b", 0, 2)], asynchronous=False)
                    break
                except KafkaException as e:
                    if e.args[0].code() not in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                                KafkaError.COORDINATOR_NOT_AVAILABLE) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        finally:
            c.close()
        reset = ("--reset-offsets", "--group", g)
        b.run(CONSUMER_GROUPS, *reset, "--topic", t, "--to-earliest")
        b.run(CONSUMER_GROUPS, *reset, "--topic", t, "--to-latest", "--dry-run")
        b.run(CONSUMER_GROUPS, *reset, "--all-topics", "--to-offset", "2", "--execute")
        b.run(CONSUMER_GROUPS, *reset, "--topic", f"{t}:1", "--shift-by", "-1", "--execute")
        b.run(CONSUMER_GROUPS, *reset, "--topic", t, "--shift-by", "-10", "--dry-run")
        b.run(CONSUMER_GROUPS, *reset, "--topic", t, "--shift-by", "100", "--dry-run")
        b.run(CONSUMER_GROUPS, *reset, "--topic", f"{t}-b", "--to-offset", "99", "--execute")
        b.run(CONSUMER_GROUPS, *reset, "--all-topics", "--to-datetime", "2020-09-13T12:26:45.000+00:00",
              "--execute")
        b.run(CONSUMER_GROUPS, *reset, "--all-topics", "--by-duration", "PT0S", "--dry-run")
        b.run(CONSUMER_GROUPS, *reset, "--all-topics", "--to-current", "--export")
        plan = tmp_path / f"{b.kind}-reset.csv"
        plan.write_text(f"{t},0,1\n{t},1,0\n")
        b.run(CONSUMER_GROUPS, *reset, "--from-file", str(plan), "--execute")
        b.run(CONSUMER_GROUPS, *reset, "--topic", t, "--to-offset", "1")  # neither --dry-run nor --execute
        b.run(CONSUMER_GROUPS, "--describe", "--group", g, "--offsets")
        b.run(CONSUMER_GROUPS, "--reset-offsets", "--group", g2, "--topic", t, "--to-earliest", "--execute")
        b.run(CONSUMER_GROUPS, "--describe", "--group", g2)
        b.run(CONSUMER_GROUPS, "--reset-offsets", "--group", g2, "--to-earliest", "--execute")  # no scope
        b.run(CONSUMER_GROUPS, "--delete-offsets", "--group", g, "--topic", f"{t}-b")
        b.run(CONSUMER_GROUPS, "--delete-offsets", "--group", g, "--topic", f"{t}:1", "--topic", f"{t}-nope")
        b.run(CONSUMER_GROUPS, "--describe", "--group", g)
        live = CKConsumer({"bootstrap.servers": b.bs, "group.id": g2, "enable.auto.commit": False,
                           "client.id": "live"})
        try:  # a live member: the reset and the deletes are refused
            live.subscribe([t])
            deadline = time.monotonic() + 30
            while len(live.assignment()) < 2:
                assert time.monotonic() < deadline, "the live consumer got no partitions"
                live.poll(0.1)
            b.run(CONSUMER_GROUPS, "--reset-offsets", "--group", g2, "--topic", t, "--to-latest", "--execute")
            b.run(CONSUMER_GROUPS, "--delete-offsets", "--group", g2, "--topic", t)
            b.run(CONSUMER_GROUPS, "--delete", "--group", g2)
        finally:
            live.close()
        b.run(CONSUMER_GROUPS, "--delete", "--group", g, "--group", f"{t}-nobody")
        b.run(CONSUMER_GROUPS, "--describe", "--group", g)

    results = on_both(_one_node(shoal_reference, kafka_broker, tool_runner, tmp_path), scenario)
    for steps in results.values():  # the tables' rows follow the group's offsets map: an order of its own
        steps[:] = [(rc, _sorted_rows(out), err) for rc, out, err in steps]
    # describing a group that is gone: DescribeGroups v6 (KIP-1043) answers GROUP_ID_NOT_FOUND on both
    assert "GroupIdNotFoundException: Group " in results["shoal"][-1][1], results["shoal"][-1]
    assert_same(results)


def _producer_perf(out: str) -> str:
    """ProducerPerformance's summary line: its record count; speeds and latencies are the brokers' own."""
    return re.sub(r"(?<=records sent, ).*", "<speeds>", out.splitlines()[-1])


def _consumer_perf(out: str) -> str:
    """ConsumerPerformance's CSV: the header, and of each row the MB and the records consumed (not times)."""
    rows = []
    for line in out.splitlines():
        cells = line.split(", ")
        rows.append(line if cells[0] in ("start.time", "time") or len(cells) < 5 else f"{cells[2]}, {cells[4]}")
    return "\n".join(rows)


def _offsets_total(out: str) -> str:
    """GetOffsetShell's lines summed: the producer's partitioner spread the records at random."""
    return str(sum(int(line.rsplit(":", 1)[1]) for line in out.splitlines()))


def test_perf_tools(shoal_reference, kafka_broker, tool_runner, tmp_path):
    """kafka-producer-perf-test (plain, and transactional) and kafka-consumer-perf-test complete with the same
    record counts; speeds, latencies and times are the brokers' own and are not compared."""
    t = f"pf-{uuid.uuid4().hex[:8]}"

    def scenario(b: Broker) -> None:
        b.create_topic(t, 2)
        b.create_topic(f"{t}-tx", 1)
        b.run(PRODUCER_PERF, "--topic", t, "--num-records", "3000", "--record-size", "100", "--throughput", "-1",
              "--command-property", f"bootstrap.servers={b.bs}", "acks=all", bootstrap="", post=_producer_perf)
        b.run(PRODUCER_PERF, "--topic", f"{t}-tx", "--num-records", "2000", "--record-size", "50", "--throughput",
              "-1", "--transactional-id", f"{t}-tx", "--transaction-duration-ms", "50", "--command-property",
              f"bootstrap.servers={b.bs}", bootstrap="", post=_producer_perf)
        b.run(CONSUMER_PERF, "--topic", t, "--num-records", "3000", "--group", f"{t}-g", post=_consumer_perf)
        b.run(CONSUMER_PERF, "--topic", f"{t}-tx", "--num-records", "2000", "--hide-header",
              "--command-property", "isolation.level=read_committed", post=_consumer_perf)
        b.run(GET_OFFSETS, "--topic", t, post=_offsets_total)

    assert_same(on_both(_one_node(shoal_reference, kafka_broker, tool_runner, tmp_path), scenario))


# -- three nodes: kafka-reassign-partitions and kafka-leader-election --------------------------------------

def _three_nodes(shoal_brokers, kafka_factory, tools: tuple[Path, Path], tmp_path: Path) -> list[Broker]:
    """shoal (node ids 1-3, as Kafka's) and a three-node Kafka, started at once. Kafka's JVMs start on this
    thread: they die with the thread that started them (PR_SET_PDEATHSIG), so not on a helper thread."""
    started: dict[str, Any] = {}

    def shoal() -> None:
        try:
            started["shoal"] = shoal_brokers(nodes=3, overrides={"node.id": "1"})
        except BaseException as e:  # noqa: BLE001 - re-raised below
            started["error"] = e

    th = threading.Thread(target=shoal, daemon=True)
    th.start()
    try:
        k = kafka_factory(nodes=3)
    finally:  # the shoal started meanwhile is in shoal_brokers' hands (stopped at teardown) once this returns
        th.join(60)
    if "error" in started:
        raise started["error"]
    if "shoal" not in started:
        raise AssertionError("the 3-node shoal did not start within 60 s")
    s = started["shoal"]
    return [Broker("shoal", s.bootstrap_servers, tools, [str(s.data_dir)], tmp_path),
            Broker("kafka", k.bootstrap_servers, tools, [str(k.workdir / f"node-{n}" / "data") for n in (1, 2, 3)],
                   tmp_path)]


def test_reassign_partitions_and_leader_election_three_nodes(shoal_brokers, kafka_factory, tool_runner, tmp_path):
    """kafka-reassign-partitions --generate / --execute (with and without throttles) / --verify (keeping and
    clearing throttles) / --list / --cancel and its refusals, kafka-leader-election after a reassignment that
    changed the preferred leader, and kafka-log-dirs on three nodes."""
    t = f"ra-{uuid.uuid4().hex[:8]}"
    brokers = _three_nodes(shoal_brokers, kafka_factory, tool_runner, tmp_path)

    def verify(b: Broker, plan: str, *more: str) -> None:
        """--verify until the reassignment is complete (Kafka copies the replicas; shoal has nothing to copy).
        Kafka's controller may report the reassignment done ("no active reassignment ... but replica set is
        2,3,1 rather than 2,3") before the broker answering Metadata has the shrunk replica set: wait for both."""
        deadline = time.monotonic() + 30
        while any(unsettled in b.raw(REASSIGN, "--reassignment-json-file", plan, "--verify",
                                     "--preserve-throttles")[1] for unsettled in ("still in progress", "rather than")):
            assert time.monotonic() < deadline, "the reassignment did not complete"
            time.sleep(0.5)
        b.run(REASSIGN, "--reassignment-json-file", plan, "--verify", *more)

    def scenario(b: Broker) -> None:
        b.run(TOPICS, "--create", "--topic", t, "--replica-assignment", "1:2,2:3,3:1")
        p = Producer({"bootstrap.servers": b.bs, "linger.ms": 5})
        for i in range(20):  # partitions 0 and 1 hold records, 2 none
            p.produce(t, value=b"x" * 100, partition=i % 2)
        assert p.flush(15) == 0
        b.run(REASSIGN, "--topics-to-move-json-file", b.json_file("move", {"version": 1, "topics": [{"topic": t}]}),
              "--broker-list", "1,2,3", "--generate")
        plan = b.json_file("plan", {"version": 1, "partitions": [
            {"topic": t, "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]},
            {"topic": t, "partition": 1, "replicas": [3, 1]}, {"topic": t, "partition": 2, "replicas": [1]}]})
        b.run(REASSIGN, "--reassignment-json-file", plan, "--execute")
        verify(b, plan)
        b.run(REASSIGN, "--list")
        b.run(TOPICS, "--describe", "--topic", t)
        # the preferred replica of partition 0 becomes 3 (was 2, still a replica)
        swap = b.json_file("swap", {"version": 1, "partitions": [
            {"topic": t, "partition": 0, "replicas": [3, 2]}, {"topic": t, "partition": 1, "replicas": [3, 1]}]})
        b.run(REASSIGN, "--reassignment-json-file", swap, "--execute", "--throttle", "100000",
              "--replica-alter-log-dirs-throttle", "2000")
        verify(b, swap, "--preserve-throttles")
        b.run(CONFIGS, "--describe", "--entity-type", "brokers", "--entity-name", "2")
        b.run(CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", t)
        verify(b, swap)
        b.run(CONFIGS, "--describe", "--entity-type", "brokers", "--entity-name", "2")
        b.run(CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", t)
        b.run(LEADER_ELECTION, "--election-type", "preferred", "--topic", t, "--partition", "0")
        b.run(LEADER_ELECTION, "--election-type", "preferred", "--topic", t, "--partition", "1")
        b.run(TOPICS, "--describe", "--topic", t)
        for bad in ([{"topic": t, "partition": 0, "replicas": [1, 4]}],
                    [{"topic": t, "partition": 7, "replicas": [1, 2]}],
                    [{"topic": t, "partition": 0, "replicas": [1, 1]}]):
            b.run(REASSIGN, "--reassignment-json-file", b.json_file("bad", {"version": 1, "partitions": bad}),
                  "--execute")
        b.run(REASSIGN, "--reassignment-json-file", swap, "--cancel")
        b.run(LOG_DIRS, "--describe", "--topic-list", t)

    results = on_both(brokers, scenario)
    for steps in results.values():
        for i, (rc, out, err) in enumerate(steps):
            lines = out.splitlines()
            if lines and lines[0] == "Current partition replica assignment" and "Proposed" in out:
                # --generate proposes a random assignment (the tool's own choice, by a random first broker):
                # its partitions and replication factors are compared, not the brokers it picked
                lines[-1] = re.sub(r'"replicas":\[[\d,]+\]', lambda m: f'"replicas":{m[0].count(",") + 1}',
                                   lines[-1])
            if lines and lines[0] == "Querying brokers for log directories information":
                parsed = json.loads(lines[-1])
                for broker in parsed["brokers"]:
                    for d in broker["logDirs"]:
                        for p in d["partitions"]:
                            p["size"] = "<size>" if p["size"] else 0
                lines[-1] = json.dumps(parsed)
            out = "\n".join(lines)
            # the in-sync replicas' order: Kafka's follows which follower caught up first, shoal's the replicas'
            out = re.sub(r"(?<=Isr: )[\d,]+", lambda m: ",".join(sorted(m[0].split(","))), out)
            steps[i] = (rc, out, err)
    # A reassignment that makes another replica preferred (step "swap"): Kafka keeps the old leader until an
    # election moves it, so the election that follows elects; shoal's replicas share one storage and a
    # partition's leader is always its first live replica, so the reassignment moved the leadership already
    # and the election needs nothing. Both end with the preferred replica leading (the describe after it).
    shoal_steps, kafka_steps = results["shoal"], results["kafka"]
    for i, (k, s) in enumerate(zip(kafka_steps, shoal_steps, strict=True)):
        if k[1].startswith("Successfully completed leader election (PREFERRED) for partitions") and \
                s[1].startswith("Valid replica already elected for partitions"):
            kafka_steps[i] = (k[0], k[1].replace("Successfully completed leader election (PREFERRED)",
                                                 "Valid replica already elected"), k[2])
    assert_same(results)
