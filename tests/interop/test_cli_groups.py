"""`shoal groups list|describe` and `shoal offsets dump` against a real broker and confluent-kafka consumers.

The CLI runs as a subprocess (`python -m shoal.cli ...`), as a user would run it,
and its output is checked against what the consumers did: who owns which
partition, what each committed, the log end offsets and the lags.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from shoal.coordinator.partitioning import partition_for as group_partition

TOPIC = "cli-t"
GROUP = "cli-g"
PARTITIONS = 4
PER_PARTITION = 25
# committed offset per partition (lag = 25 - committed)
COMMITS = {0: 20, 1: 4, 2: 11, 3: 25}

pytestmark = pytest.mark.timeout(120)


def shoal_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shoal.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def setup_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)], request_timeout=10).values():
        fut.result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(TOPIC, value=b"v%d" % i, partition=p)
    assert producer.flush(30) == 0


def start_group(bootstrap: str, n: int = 2, timeout: float = 30) -> list[Consumer]:
    """n consumers in GROUP, polled until their assignments cover every partition."""
    consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": f"cli-c{i}",
                           "enable.auto.commit": False, "auto.offset.reset": "earliest",
                           "session.timeout.ms": 10000, "heartbeat.interval.ms": 200})
                 for i in range(n)]
    for c in consumers:
        c.subscribe([TOPIC])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.05)
        owned = [c.assignment() for c in consumers]
        if all(owned) and sorted(tp.partition for a in owned for tp in a) == list(range(PARTITIONS)):
            return consumers
    for c in consumers:
        c.close()
    raise AssertionError("the group did not stabilise in time")


def commit(consumers: list[Consumer]) -> dict[int, Consumer]:
    """Each consumer commits COMMITS for the partitions it owns; returns partition -> owner."""
    owners = {}
    for c in consumers:
        mine = [tp.partition for tp in c.assignment()]
        c.commit(offsets=[TopicPartition(TOPIC, p, COMMITS[p]) for p in mine], asynchronous=False)
        owners.update({p: c for p in mine})
    return owners


def partition_rows(text: str) -> dict[int, list[str]]:
    return {int(r[2]): r for r in rows(text) if len(r) >= 6 and r[0] == GROUP and r[1] == TOPIC}


def test_groups_list_describe_and_offsets_dump(shoal_cluster):
    bootstrap = shoal_cluster.bootstrap
    setup_topic(bootstrap)
    consumers = start_group(bootstrap)
    try:
        owners = commit(consumers)
        client_of = {p: owners[p].memberid() for p in owners}
        client_id = {c.memberid(): f"cli-c{i}" for i, c in enumerate(consumers)}

        listed = shoal_cli("groups", "list", "--bootstrap-server", bootstrap)
        assert listed.returncode == 0, listed.stderr
        assert [GROUP, "Classic", "Stable", "consumer"] in rows(listed.stdout)

        # --state / --type: kafka-consumer-groups' GROUP [TYPE] [STATE] table
        stable_only = shoal_cli("groups", "list", "--state", "stable", "--bootstrap-server", bootstrap)
        assert rows(stable_only.stdout)[0] == ["GROUP", "STATE"] and [GROUP, "Stable"] in rows(stable_only.stdout)
        typed = shoal_cli("groups", "list", "--type", "classic", "--state", "--bootstrap-server", bootstrap)
        assert [GROUP, "Classic", "Stable"] in rows(typed.stdout), typed.stdout
        none = shoal_cli("groups", "list", "--type", "consumer", "--bootstrap-server", bootstrap)
        assert none.returncode == 0 and GROUP not in none.stdout
        bad = shoal_cli("groups", "list", "--type", "share", "--bootstrap-server", bootstrap)
        assert bad.returncode == 1 and "Invalid types list 'share'" in bad.stderr
        empty_only = shoal_cli("groups", "list", "--state", "Empty", "--bootstrap-server", bootstrap)
        assert empty_only.returncode == 0 and GROUP not in empty_only.stdout

        described = shoal_cli("groups", "describe", GROUP, "--bootstrap-server", bootstrap)
        assert described.returncode == 0, described.stderr
        out = described.stdout
        assert re.search(r"^Type:\s+Classic$", out, re.M), out
        assert re.search(r"^State:\s+Stable$", out, re.M), out
        assert re.search(r"^Protocol type:\s+consumer$", out, re.M), out
        assert re.search(r"^Assignor:\s+(range|roundrobin|cooperative-sticky)$", out, re.M), out
        assert re.search(r"^Members:\s+2$", out, re.M), out
        # the member table: each member's id, client id and its decoded assignment
        member_rows = {r[0]: r for r in rows(out) if r and r[0].startswith("cli-c")}
        assert len(member_rows) == 2, out
        for c in consumers:
            r = member_rows[c.memberid()]
            mine = sorted(tp.partition for tp in c.assignment())
            assert r[-1] == f"{TOPIC}({','.join(map(str, mine))})", r
            assert r[-2] == str(len(mine))
        # the partition table: committed, log end, lag, owner
        by_p = partition_rows(out)
        assert sorted(by_p) == list(range(PARTITIONS)), out
        for p, r in by_p.items():
            assert r[3:6] == [str(COMMITS[p]), str(PER_PARTITION), str(PER_PARTITION - COMMITS[p])], r
            assert r[6] == client_of[p], r
            assert r[-1] == client_id[client_of[p]], r
    finally:
        for c in consumers:
            c.close()

    # After the members left: Empty, no owners, the offsets and lags remain.
    deadline = time.monotonic() + 20
    while True:
        described = shoal_cli("groups", "describe", GROUP, "--bootstrap-server", bootstrap)
        if re.search(r"^State:\s+Empty$", described.stdout, re.M) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert re.search(r"^State:\s+Empty$", described.stdout, re.M), described.stdout
    assert f"Consumer group '{GROUP}' has no active members." in described.stdout
    for p, r in partition_rows(described.stdout).items():
        assert r[3:] == [str(COMMITS[p]), str(PER_PARTITION), str(PER_PARTITION - COMMITS[p]), "-", "-", "-"], r

    dumped = shoal_cli("offsets", "dump", "--from-beginning", "--bootstrap-server", bootstrap)
    assert dumped.returncode == 0, dumped.stderr
    lines = dumped.stdout.splitlines()
    for p, off in COMMITS.items():
        pattern = re.compile(rf"^\[{GROUP},{TOPIC},{p}\]::\[OffsetMetadata\[{off},NO_METADATA\],"
                             r"CommitTime \d{13},ExpirationTime -1\]$")
        assert any(pattern.match(line) for line in lines), (p, lines)
    metadata_lines = [line for line in lines if line.startswith(f"{GROUP}::GroupMetadata(groupId={GROUP}, ")]
    assert any("currentState=Stable" in line and "protocolType=Some(consumer)" in line
               and "clientId=cli-c0" in line and "clientId=cli-c1" in line for line in metadata_lines), lines
    assert "currentState=Empty, members=Map())" in metadata_lines[-1], metadata_lines
    assert re.search(r"Processed \d+ records", dumped.stderr)

    # --partition: only the group's own partition of __consumer_offsets holds its records
    own = group_partition(GROUP, 50)
    only_own = shoal_cli("offsets", "dump", "--partition", str(own), "--bootstrap-server", bootstrap)
    assert sorted(only_own.stdout.splitlines()) == sorted(line for line in lines if GROUP in line)
    other = shoal_cli("offsets", "dump", "--partition", str((own + 1) % 50), "--bootstrap-server", bootstrap)
    assert other.returncode == 0 and GROUP not in other.stdout


def test_clear_errors_for_a_missing_group_and_an_unreachable_broker(shoal):
    missing = shoal_cli("groups", "describe", "no-such-group", "--bootstrap-server", shoal.bootstrap)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "shoal groups describe: error: Consumer group 'no-such-group' does not exist."
    assert "Traceback" not in missing.stderr

    # describing created __consumer_offsets (FindCoordinator does) but nothing is in it
    nothing = shoal_cli("offsets", "dump", "--bootstrap-server", shoal.bootstrap)
    assert nothing.returncode == 0 and nothing.stdout == "", nothing
    assert nothing.stderr.strip() == "Processed 0 records"

    bad_partition = shoal_cli("offsets", "dump", "--partition", "999", "--bootstrap-server", shoal.bootstrap)
    assert bad_partition.returncode == 1 and "has no partition 999" in bad_partition.stderr

    port = shoal.ports[0]
    shoal.stop()
    for args in (["groups", "list"], ["groups", "describe", "g"], ["offsets", "dump"]):
        res = shoal_cli(*args, "--bootstrap-server", f"127.0.0.1:{port}")
        assert res.returncode == 1, res
        assert f"cannot connect to broker 127.0.0.1:{port}" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr


def test_describe_a_consumer_protocol_group_shows_epochs(shoal_cluster):
    """A KIP-848 group (confluent-kafka, group.protocol=consumer): ConsumerGroupDescribe's type, group
    and member epochs and target assignments, in shoal's summary and in Kafka's --members/--state views."""
    bootstrap = shoal_cluster.bootstrap
    setup_topic(bootstrap)
    group = "cli-kip848"
    consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                           "client.id": f"k{i}", "enable.auto.commit": False}) for i in range(2)]
    try:
        for c in consumers:
            c.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for c in consumers:
                c.poll(0.05)
            if all(c.assignment() for c in consumers) and sum(len(c.assignment()) for c in consumers) == PARTITIONS:
                break
        for _ in range(10):
            for c in consumers:
                c.poll(0.05)
        listed = shoal_cli("groups", "list", "--type", "--bootstrap-server", bootstrap)
        assert [group, "Consumer"] in rows(listed.stdout), listed.stdout
        out = shoal_cli("groups", "describe", group, "--bootstrap-server", bootstrap).stdout
        assert re.search(r"^Type:\s+Consumer$", out, re.M), out
        assert re.search(r"^Assignor:\s+uniform$", out, re.M), out
        epoch = int(re.search(r"^Group epoch:\s+(\d+)$", out, re.M).group(1))
        assert epoch >= 2 and re.search(rf"^Target epoch:\s+{epoch}$", out, re.M), out
        member_rows = {r[0]: r for r in rows(out) if len(r) == 8 and r[2] in ("k0", "k1")}
        assert len(member_rows) == 2, out
        for c in consumers:
            r = member_rows[c.memberid()]
            mine = f"{TOPIC}({','.join(str(tp.partition) for tp in sorted(c.assignment(), key=lambda tp: tp.partition))})"
            assert r[4] == str(epoch) and r[6] == mine and r[7] == mine, r
        members = shoal_cli("groups", "describe", "--group", group, "--members", "--verbose",
                            "--bootstrap-server", bootstrap)
        assert rows(members.stdout)[1][:5] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert rows(members.stdout)[1][5:] == ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                                               "TARGET-ASSIGNMENT"]
        state = shoal_cli("groups", "describe", "--group", group, "--state", "--verbose",
                          "--bootstrap-server", bootstrap)
        assert rows(state.stdout)[2][-5:] == ["uniform", "Stable", str(epoch), str(epoch), "2"], state.stdout
    finally:
        for c in consumers:
            c.close()
