"""shoal's command-line tools (`shoal topics | configs | produce | consume | groups | transactions`) as
subprocesses against shoal and against Apache Kafka 4.x: each scenario runs on both brokers and the
outputs must be equal once what differs by nature (node ids, topic ids, member and producer ids,
times) is normalised. A difference is either a tool that assumes shoal, or shoal answering unlike Kafka.

Topic and group names carry a per-test suffix (the session brokers are shared with other tests); the
same names are used on both brokers, so names need no normalising."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from shoal.client import Consumer
from tests.reference.tools_helpers import (
    Step,
    ToolSession,
    assert_same,
    hide,
    mask_cell,
    normalise,
)

pytestmark = pytest.mark.timeout(300)

Scenario = Callable[[Callable[..., Step]], list[Step]]


def runner(bs: str) -> Callable[..., Step]:
    def run(*args: str, stdin: str | None = None) -> Step:
        r = subprocess.run([sys.executable, "-m", "shoal.cli", *args, "--bootstrap-server", bs], input=stdin,
                           capture_output=True, text=True, timeout=60)
        assert "Traceback" not in r.stderr, r.stderr
        return r.returncode, normalise(r.stdout), normalise(r.stderr)
    return run


def on_both(shoal_reference, kafka_broker, scenario: Callable[[str, Callable[..., Step], dict[str, str]], None]
            ) -> dict[str, list[Step]]:
    """Run ``scenario(bootstrap, run, extra)`` on each broker; ``extra`` collects per-broker ids to hide."""
    results: dict[str, list[Step]] = {}
    for kind, bs in (("shoal", shoal_reference.bootstrap_servers), ("kafka", kafka_broker.bootstrap_servers)):
        extra: dict[str, str] = {}
        steps: list[Step] = []
        run = runner(bs)

        def record(*args: str, stdin: str | None = None, _run: Callable[..., Step] = run,
                   _steps: list[Step] = steps) -> Step:
            _steps.append(_run(*args, stdin=stdin))
            return _steps[-1]
        scenario(bs, record, extra)
        results[kind] = [(rc, hide(out, extra), hide(err, extra)) for rc, out, err in steps]
    return results


def test_topics_tool(shoal_reference, kafka_broker):
    t = f"tt-{uuid.uuid4().hex[:8]}"

    def scenario(bs: str, run: Callable[..., Step], extra: dict[str, str]) -> None:
        assert run("topics", "create", "--topic", t, "--partitions", "2", "--config", "retention.ms=100000") \
            == (0, f"Created topic {t}.", "")
        run("topics", "create", "--topic", t)
        run("topics", "create", "--topic", t, "--if-not-exists")
        run("topics", "create", "--topic", f"{t}-b", "--replication-factor", "1")
        run("topics", "list", "--topic", f"{t}.*")
        run("topics", "describe", "--topic", t)
        run("topics", "alter", "--topic", t, "--partitions", "3")
        run("topics", "alter", "--topic", t, "--partitions", "2")
        run("topics", "alter", "--topic", t, "--partitions", "3")
        run("topics", "describe", "--topic", f"{t}$")
        run("topics", "describe", "--topic", f"{t}-nope")
        run("topics", "create", "--topic", f"{t}-x", "--config", "no.such=1")
        run("topics", "delete", "--topic", f"{t}-b")
        run("topics", "delete", "--topic", f"{t}-b")
        run("topics", "delete", "--topic", f"{t}-b", "--if-exists")

    assert_same(on_both(shoal_reference, kafka_broker, scenario))


def test_configs_tool(shoal_reference, kafka_broker):
    t = f"tc-{uuid.uuid4().hex[:8]}"

    def scenario(bs: str, run: Callable[..., Step], extra: dict[str, str]) -> None:
        run("topics", "create", "--topic", t)
        assert run("configs", "alter", "--entity-type", "topics", "--entity-name", t, "--add-config",
                   "retention.ms=5000,cleanup.policy=[compact,delete]")[0] == 0
        run("configs", "describe", "--topic", t)
        run("configs", "alter", "--topic", t, "--delete-config", "cleanup.policy")
        run("configs", "alter", "--topic", t, "--delete-config", "segment.ms")
        run("configs", "alter", "--topic", t, "--add-config", "retention.ms=soon")
        run("configs", "alter", "--topic", t, "--add-config", "min.insync.replicas=9999999999")
        run("configs", "alter", "--topic", t, "--add-config", "min.insync.replicas=0")
        run("configs", "alter", "--topic", t, "--add-config", "no.such.config=1")
        run("configs", "describe", "--topic", t)

    assert_same(on_both(shoal_reference, kafka_broker, scenario))


def test_configs_tool_group_configs(shoal_reference, kafka_broker):
    """`configs --entity-type groups` (KIP-848/KIP-932 group configs) answers the same on both brokers."""
    g = f"gc-{uuid.uuid4().hex[:8]}"

    def scenario(bs: str, run: Callable[..., Step], extra: dict[str, str]) -> None:
        assert run("configs", "alter", "--entity-type", "groups", "--entity-name", g, "--add-config",
                   "share.auto.offset.reset=earliest,share.delivery.count.limit=3")[0] == 0
        run("configs", "describe", "--group", g)
        run("configs", "alter", "--group", g, "--add-config", "share.record.lock.duration.ms=1000")
        run("configs", "alter", "--group", g, "--add-config", "share.record.lock.duration.ms=999")
        for bad in ("share.delivery.count.limit=1", "share.delivery.count.limit=11",
                    "share.partition.max.record.locks=50", "share.partition.max.record.locks=5000"):
            run("configs", "alter", "--group", g, "--add-config", bad)
        run("configs", "alter", "--group", g, "--add-config", "share.auto.offset.reset=sometimes")
        run("configs", "alter", "--group", g, "--add-config", "share.auto.offset.reset=by_duration:P1DT2H")
        run("configs", "alter", "--group", g, "--add-config", "share.auto.offset.reset=by_duration:1h")
        run("configs", "alter", "--group", g, "--add-config", "share.isolation.level=serializable")
        run("configs", "alter", "--group", g, "--add-config", "no.such.config=1")
        run("configs", "alter", "--group", g, "--delete-config", "share.delivery.count.limit")
        run("configs", "alter", "--group", g, "--delete-config", "share.delivery.count.limit")
        run("configs", "describe", "--entity-type", "groups", "--entity-name", g)

    assert_same(on_both(shoal_reference, kafka_broker, scenario))


def test_console_producer_and_consumer(shoal_reference, kafka_broker):
    t = f"tp-{uuid.uuid4().hex[:8]}"
    props = ["--property", "print.key=true", "--property", "print.offset=true", "--property",
             "print.partition=true", "--property", "print.headers=true"]

    def scenario(bs: str, run: Callable[..., Step], extra: dict[str, str]) -> None:
        run("topics", "create", "--topic", t)
        run("produce", "--topic", t, "--property", "parse.key=true", "--property", "key.separator=:",
            "--property", "null.marker=NULL", stdin="k1:hello\nk2:world\nNULL:nokey\nk4:NULL\n")
        run("produce", "--topic", t, "--property", "parse.key=true", "--property", "parse.headers=true",
            stdin="h1:a,h2:b\tk5\twith headers\n")
        assert run("consume", "--topic", t, "--from-beginning", "--max-messages", "5", *props)[1].count("\n") == 4
        run("consume", "--topic", t, "--partition", "0", "--offset", "4", "--max-messages", "1",
            "--formatter", "json")
        run("consume", "--topic", t, "--partition", "0", "--offset", "earliest", "--max-messages", "1",
            "--property", "print.timestamp=true", "--property", "print.value=false")
        run("consume", "--topic", t, "--group", f"{t}-g", "--from-beginning", "--max-messages", "3")
        run("groups", "describe", f"{t}-g")
        run("produce", "--topic", t, "--property", "parse.key=true", stdin="ok\tv\nno-separator\n")
        run("consume", "--topic", t, "--partition", "0", "--offset", "latest", "--timeout-ms", "500")

    assert_same(on_both(shoal_reference, kafka_broker, scenario))


def test_groups_tool(shoal_reference, kafka_broker):
    t = f"tg-{uuid.uuid4().hex[:8]}"
    g = f"{t}-g"

    def scenario(bs: str, run: Callable[..., Step], extra: dict[str, str]) -> None:
        # records of 2020 (for --to-datetime) outlive time retention only by retention.ms=-1: a Kafka broker
        # started under 30 s before (log.initial.task.delay.ms) deletes them at its first retention check
        run("topics", "create", "--topic", t, "--partitions", "2", "--config", "retention.ms=-1")
        p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
        for i in range(20):
            p.produce(t, value=b"%d" % i, partition=i % 2, timestamp=1_600_000_000_000 + i * 1000)
        assert p.flush(15) == 0
        run("consume", "--topic", t, "--group", g, "--from-beginning", "--max-messages", "20")
        listed = run("groups", "list", "--state", "Empty")
        assert g in listed[1]
        run("groups", "describe", g)
        live = Consumer(bootstrap_servers=bs, group_id=g, client_id="live-c", enable_auto_commit=False)
        try:  # a live member: its id, client id and host as the tool shows them
            live.subscribe([t])
            deadline = time.monotonic() + 30
            while len(live.assignment()) < 2 and time.monotonic() < deadline:
                live.poll(100)
            run("groups", "describe", "--group", g)
        finally:
            live.close(autocommit=False)
        run("groups", "reset-offsets", "--group", g, "--topic", t, "--to-earliest")
        run("groups", "reset-offsets", "--group", g, "--topic", f"{t}:1", "--shift-by", "-3", "--execute")
        run("groups", "reset-offsets", "--group", g, "--all-topics", "--to-datetime", "2020-09-13T12:26:45.000",
            "--execute")
        run("groups", "describe", g)
        run("groups", "delete-offsets", "--group", g, "--topic", f"{t}:0")
        run("groups", "describe", g)
        run("groups", "delete", "--group", g)
        run("groups", "describe", g)

    results = on_both(shoal_reference, kafka_broker, scenario)
    # the group list holds other tests' groups too: keep only this test's line
    for steps in results.values():
        steps[2] = (steps[2][0], "\n".join(ln for ln in steps[2][1].splitlines() if g in ln), steps[2][2])
    assert_same(results)


def test_transactions_tool(shoal_reference, kafka_broker):
    t = f"tx-{uuid.uuid4().hex[:8]}"

    def scenario(bs: str, run: Callable[..., Step], extra: dict[str, str]) -> None:
        run("topics", "create", "--topic", t)
        p = Producer({"bootstrap.servers": bs, "transactional.id": t, "transaction.timeout.ms": 60000})
        p.init_transactions(20)
        p.begin_transaction()
        p.produce(t, value=b"a")
        p.flush(10)
        listed = run("transactions", "list")
        row = next(ln for ln in listed[1].splitlines() if ln.startswith(t + " "))
        extra[row.split()[2]] = "<pid>"  # the producer id
        run("transactions", "describe", "--transactional-id", t)
        run("transactions", "describe-producers", "--topic", t, "--partition", "0")
        run("transactions", "find-hanging", "--topic", t, "--max-transaction-timeout", "0")
        p.commit_transaction(10)
        # Kafka answers EndTxn before its markers are written (PrepareCommit for a moment): wait for the end
        deadline = time.monotonic() + 15
        while "CompleteCommit" not in runner(bs)("transactions", "describe", "--transactional-id", t)[1]:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        run("transactions", "describe", "--transactional-id", t)
        run("transactions", "describe-producers", "--topic", t, "--partition", "0")
        run("transactions", "describe", "--transactional-id", f"{t}-nobody")
        run("transactions", "find-hanging")

    results = on_both(shoal_reference, kafka_broker, scenario)
    for steps in results.values():  # keep this test's row of the list (there are other transactions)
        steps[1] = (steps[1][0], "\n".join(ln for i, ln in enumerate(steps[1][1].splitlines())
                                           if i == 0 or ln.startswith(t + " ")), steps[1][2])
    mask_cell(results, "TransactionalId", 1)  # the coordinator's node id
    mask_cell(results, "CoordinatorId", 0)
    mask_cell(results, "CoordinatorId", 7)  # TransactionDurationMs: how long ago it began
    assert_same(results)


CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
_B64_MEMBER = re.compile(r"(?<![\w+/])[A-Za-z0-9+/_-]{22}(?![\w+/])")  # a KIP-848 member id (a base64 uuid)


def _consumer_protocol_group(bs: str, topic: str, group: str, timeout: float = 30) -> list:
    """Two confluent-kafka consumers with group.protocol=consumer on 4 partitions, polled until they
    hold every partition; the first commits offset 3 on its partitions."""
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import TopicPartition

    consumers = [CKConsumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
                             "client.id": f"c{i}", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
                 for i in range(2)]
    for c in consumers:
        c.subscribe([topic])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.05)
        owned = [c.assignment() for c in consumers]
        if all(owned) and sum(len(a) for a in owned) == 4:
            break
    else:
        raise AssertionError("the consumer group did not cover its partitions in time")
    mine = consumers[0].assignment()
    consumers[0].commit(offsets=[TopicPartition(topic, tp.partition, 3) for tp in mine], asynchronous=False)
    for _ in range(10):  # a few heartbeats: every member has acknowledged its assignment
        for c in consumers:
            c.poll(0.05)
    return consumers


def test_consumer_protocol_group_tool(shoal_reference, kafka_broker, tool_runner, tmp_path):
    """A KIP-848 group: on each broker, shoal's `groups list --type` and `groups describe --offsets |
    --members | --state [--verbose]` print exactly what Kafka's ConsumerGroupCommand prints for the same
    state (Kafka's tool against shoal too); then shoal's tool on shoal and on Kafka agree on what is
    deterministic (member ids, and the epochs, which count heartbeats that raced, are hidden)."""
    tag = uuid.uuid4().hex[:8]
    t, g = f"tk-{tag}", f"tk-{tag}-g"
    views = [["--describe", "--group", g, "--offsets"], ["--describe", "--group", g, "--offsets", "--verbose"],
             ["--describe", "--group", g, "--members"], ["--describe", "--group", g, "--members", "--verbose"],
             ["--describe", "--group", g, "--state"], ["--describe", "--group", g, "--state", "--verbose"]]
    ours: dict[str, list[str]] = {}
    # Kafka's tool runs in one JVM, run after run (ToolRunner): a JVM start per run is seconds of CPU
    with ToolSession(*tool_runner, tmp_path / "runs") as session:
        _consumer_protocol_views(shoal_reference, kafka_broker, session, t, g, views, ours)
    for kind, outputs in ours.items():
        shown = []
        for args, text in zip([["list"], ["list"], *views], outputs, strict=True):
            text = re.sub(r"127\.0\.0\.1:\d+\s+\(\d+\)", "<node>", text)  # COORDINATOR (ID)
            text = _B64_MEMBER.sub("<member>", normalise(text))
            lines = text.splitlines()
            if "--verbose" in args and "--members" in args or "--state" in args and "--verbose" in args:
                lines = [re.sub(r"\b\d+\b", "<n>", ln) for ln in lines]  # the epochs
            if "--offsets" in args or "--members" in args:  # who owns which partitions is the assignor's choice
                lines = [re.sub(r"\b[0-3](,[0-3])?\b", "<p>", ln) for ln in lines]
                lines = [re.sub(r"(<member> <host>) c\d", r"\1 <client>", ln) for ln in lines]
                lines = lines[:2] + sorted(lines[2:])
            shown.append("\n".join(lines))
        ours[kind] = shown
    for i, (s, k) in enumerate(zip(ours["shoal"], ours["kafka"], strict=True)):
        assert s == k, f"view {i} differs:\nshoal: {s}\nkafka: {k}"


def _consumer_protocol_views(shoal_reference, kafka_broker, session: ToolSession, t: str, g: str,
                             views: list[list[str]], ours: dict[str, list[str]]) -> None:
    """On each broker: a consumer-protocol group, then each view printed by both tools (asserted equal)."""
    for kind, bs in (("shoal", shoal_reference.bootstrap_servers), ("kafka", kafka_broker.bootstrap_servers)):
        run = runner(bs)
        run("topics", "create", "--topic", t, "--partitions", "4")
        p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
        for i in range(40):
            p.produce(t, value=b"%d" % i, partition=i % 4)
        assert p.flush(15) == 0
        consumers = _consumer_protocol_group(bs, t, g)
        try:
            ours[kind] = []
            for args in [["--list", "--type"], ["--list", "--type", "consumer", "--state"], *views]:
                for c in consumers:
                    c.poll(0.01)
                theirs = session.run(CONSUMER_GROUP_COMMAND, "--bootstrap-server", bs, *args, timeout=120)
                shoal_args = ["list" if a == "--list" else "describe" if a == "--describe" else a for a in args]
                r = subprocess.run([sys.executable, "-m", "shoal.cli", "groups", *shoal_args, "--bootstrap-server",
                                    bs], capture_output=True, text=True, timeout=60)
                got, want = r.stdout, theirs.stdout
                if args[0] == "--list":  # other tests' groups are listed too
                    got, want = ("\n".join(ln for ln in x.splitlines() if ln.startswith(("GROUP ", g)))
                                 for x in (got, want))
                assert (r.returncode, got, r.stderr) == (theirs.returncode, want, theirs.stderr), \
                    f"{kind}: {args}\nshoal's tool:\n{got}{r.stderr}\nKafka's tool:\n{want}{theirs.stderr}"
                ours[kind].append(got)
        finally:
            for c in consumers:
                c.close()


# -- ACLs and SCRAM users: Kafka's own kafka-acls / kafka-configs beside shoal's ------------------------------------

ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
AUTHORIZER_PROPERTIES = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # the tools come in on PLAINTEXT as User:ANONYMOUS, as do Kafka's controller and inter-broker traffic
    "super.users": "User:ANONYMOUS",
}


def _acl_blocks(text: str) -> list[tuple[str, list[str]]]:
    """AclCommand's output as (header, entries) blocks, both sorted: Kafka prints Java hash sets (entries and
    resources in the JVM's order), shoal's tool the command line's or the broker's order."""
    blocks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.lstrip(" ").startswith("\t"):
            blocks[-1][1].append(line.strip())
        else:
            blocks.append((line, []))
    return sorted((h, sorted(e)) for h, e in blocks)


def _config_error(text: str) -> str:
    """The message of a failed ConfigCommand (Kafka's: the bare message, or ``Error while executing config
    command ...`` and the exception's trace, whose last ``Caused by:`` holds the broker's message) or of a
    failed `shoal configs` (``shoal configs alter: error: MESSAGE``)."""
    caused = re.findall(r"^Caused by: [\w.$]+: (.*)$", text, re.MULTILINE)
    if caused:
        return caused[-1]
    first = next((line for line in text.splitlines() if line.strip()), "")
    return re.sub(r"^shoal configs \w+: error: ", "", first)


def test_acls_and_scram_users_vs_kafka_tools(kafka_factory, tool_runner, tmp_path):
    """Kafka's AclCommand and ConfigCommand (users' SCRAM credentials, client quotas) and shoal's `acls` /
    `configs --entity-type users|clients|ips`, each run on shoal and on Kafka (both with the
    StandardAuthorizer): the four outputs of each step agree (entry order aside; only the first line of a
    usage error, which Kafka follows with its help; a failed ConfigCommand's message). --remove without --force is left out: Kafka's tool reads the answer from
    the console, which a test has not."""
    from shoal.testing.embedded import EmbeddedBroker
    from tests.reference.fixtures import COMMON_PROPERTIES

    kafka = kafka_factory(overrides=AUTHORIZER_PROPERTIES)
    steps = [
        ("acls", ["--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob", "--operation", "Read",
                  "--operation", "Write", "--topic", "ta", "--topic", "tb"]),
        ("acls", ["--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
                  "--topic", "ta"]),
        ("acls", ["--add", "--deny-principal", "User:eve", "--allow-principal", "User:alice", "--allow-host",
                  "10.0.0.1", "--operation", "Read", "--group", "g", "--resource-pattern-type", "prefixed"]),
        ("acls", ["--add", "--producer", "--idempotent", "--topic", "tp", "--transactional-id", "tx",
                  "--allow-principal", "User:p"]),
        ("acls", ["--add", "--consumer", "--topic", "tc", "--group", "gc", "--allow-principal", "User:c"]),
        ("acls", ["--list"]),
        ("acls", ["--list", "--topic", "ta"]),
        ("acls", ["--list", "--principal", "User:bob"]),
        ("acls", ["--list", "--resource-pattern-type", "match", "--group", "gx"]),
        ("acls", ["--list", "--resource-pattern-type", "any", "--topic", "tp", "--cluster"]),
        ("acls", ["--remove", "--force", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "ta"]),
        ("acls", ["--list", "--topic", "ta"]),
        ("acls", ["--remove", "--force", "--topic", "ta", "--topic", "tb", "--group", "g", "--resource-pattern-type",
                  "match"]),
        ("acls", ["--list"]),
        ("acls", ["--add", "--topic", "ta"]),
        ("acls", ["--add", "--resource-pattern-type", "match", "--topic", "ta", "--allow-principal", "User:a"]),
        ("acls", ["--list", "--producer", "--topic", "ta"]),
        ("acls", ["--add", "--idempotent", "--topic", "ta", "--allow-principal", "User:a"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--alter", "--add-config",
                     "SCRAM-SHA-256=[iterations=8192,password=alice-secret]"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--alter", "--add-config",
                     "SCRAM-SHA-512=[password=alice-secret]"]),
        ("configs", ["--entity-type", "users", "--entity-name", "bob", "--alter", "--add-config",
                     "SCRAM-SHA-512=[iterations=4096,password=bob-secret]"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--describe"]),
        ("configs", ["--entity-type", "users", "--entity-name", "nobody", "--describe"]),
        ("configs", ["--entity-type", "users", "--describe"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--alter", "--delete-config",
                     "SCRAM-SHA-256"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--describe"]),
        ("configs", ["--entity-type", "users", "--entity-name", "carol", "--alter", "--add-config",
                     "SCRAM-SHA-256=[password=a],SCRAM-SHA-512=[password=b]"]),
        ("configs", ["--entity-type", "users", "--entity-name", "carol", "--alter", "--delete-config",
                     "SCRAM-SHA-256"]),
        # client quotas: users, clients, a user's clients, ips, defaults; beside SCRAM credentials
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--alter", "--add-config",
                     "producer_byte_rate=1024,consumer_byte_rate=2048,request_percentage=50"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name",
                     "app", "--alter", "--add-config", "producer_byte_rate=100"]),
        ("configs", ["--entity-type", "clients", "--entity-name", "app", "--entity-type", "users", "--entity-name",
                     "bob", "--alter", "--add-config", "consumer_byte_rate=200"]),
        ("configs", ["--entity-type", "users", "--entity-default", "--alter", "--add-config",
                     "producer_byte_rate=10000000"]),
        ("configs", ["--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default",
                     "--alter", "--add-config", "consumer_byte_rate=400"]),
        ("configs", ["--client-defaults", "--alter", "--add-config", "request_percentage=12.5"]),
        ("configs", ["--entity-type", "ips", "--entity-name", "10.0.0.1", "--alter", "--add-config",
                     "connection_creation_rate=10"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--describe"]),
        ("configs", ["--entity-type", "users", "--describe"]),
        ("configs", ["--entity-type", "users", "--entity-default", "--describe"]),
        ("configs", ["--entity-type", "clients", "--describe"]),
        ("configs", ["--entity-type", "ips", "--describe"]),
        ("configs", ["--entity-type", "users", "--entity-type", "clients", "--describe"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--describe"]),
        ("configs", ["--user", "bob", "--client", "app", "--describe"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--alter", "--add-config",
                     "producer_byte_rate=1,SCRAM-SHA-256=[password=x]"]),
        ("configs", ["--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config",
                     "SCRAM-SHA-256=[password=x],zzz=1"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--alter", "--add-config", "zzz=1,aaa=2"]),
        ("configs", ["--entity-type", "ips", "--entity-name", "10.0.0.1", "--alter", "--add-config",
                     "producer_byte_rate=1"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--alter", "--add-config",
                     "producer_byte_rate=abc"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--alter", "--add-config",
                     "producer_byte_rate=1.5"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--alter", "--add-config",
                     "request_percentage=0"]),
        ("configs", ["--entity-type", "users", "--entity-name", "nobody", "--alter", "--delete-config",
                     "producer_byte_rate"]),
        ("configs", ["--entity-type", "users", "--entity-default", "--alter", "--add-config",
                     "SCRAM-SHA-256=[password=x]"]),
        ("configs", ["--entity-type", "users", "--entity-type", "clients", "--entity-name", "app", "--alter",
                     "--add-config", "producer_byte_rate=1"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--alter", "--delete-config",
                     "producer_byte_rate,consumer_byte_rate"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--describe"]),
        ("configs", ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name",
                     "app", "--alter", "--delete-config", "producer_byte_rate"]),
        ("configs", ["--entity-type", "users", "--entity-type", "clients", "--describe"]),
    ]
    props = {**COMMON_PROPERTIES, **AUTHORIZER_PROPERTIES}
    outputs: dict[str, list[tuple[int, object, str]]] = {}
    kafkas = [kafka, kafka_factory(overrides=AUTHORIZER_PROPERTIES)]
    # Kafka's tools run one after another in one JVM (ToolRunner): a JVM start per run made this test minutes long
    with EmbeddedBroker(properties=props, data_dir=tmp_path / "s1") as shoal1, \
            EmbeddedBroker(properties=props, data_dir=tmp_path / "s2") as shoal2, \
            ToolSession(*tool_runner, tmp_path / "runs") as session:
        # each (tool, broker) pair on a fresh broker: the steps change what the broker holds
        for tool_kind, broker_kind, bs in (("kafka", "kafka", kafkas[0].bootstrap_servers),
                                           ("shoal", "kafka", kafkas[1].bootstrap_servers),
                                           ("kafka", "shoal", shoal1.bootstrap_servers),
                                           ("shoal", "shoal", shoal2.bootstrap_servers)):
            seen = outputs.setdefault(f"{tool_kind}'s tool on {broker_kind}", [])
            for tool, args in steps:
                if tool_kind == "kafka":
                    r = session.run(ACL_COMMAND if tool == "acls" else CONFIG_COMMAND, "--bootstrap-server", bs,
                                    *args, timeout=120)
                else:
                    r = subprocess.run([sys.executable, "-m", "shoal.cli", tool, *args, "--bootstrap-server", bs],
                                       capture_output=True, text=True, timeout=60)
                    assert "Traceback" not in r.stderr, r.stderr
                rc, out, err = r.returncode, r.stdout, r.stderr
                if tool == "acls":
                    shown: object = _acl_blocks(out)
                elif rc:  # ConfigCommand's failure: its message, or a line naming the command then a trace
                    shown = _config_error(out + err)
                else:  # users and their mechanisms come in Java hash-map order from Kafka's broker
                    shown = sorted(re.sub(r"(?<= are ).*", lambda m: ", ".join(sorted(m[0].split(", "))), line)
                                   for line in out.splitlines())
                seen.append((rc, shown, err.splitlines()[0] if err.strip() and rc and tool == "acls" else ""))
    runs = list(outputs.items())
    (first_name, first), rest = runs[0], runs[1:]
    for name, seen in rest:
        for (tool, args), a, b in zip(steps, first, seen, strict=True):
            assert a == b, f"{tool} {' '.join(args)}:\n{first_name}: {a}\n{name}: {b}"
