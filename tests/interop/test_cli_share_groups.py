"""`shoal share-groups` (kafka-share-groups.sh) against shoal over real sockets, with a member from
confluent-kafka's ShareConsumer: list, describe (offsets, members, state, verbose), reset-offsets (refused
while the member lives; dry run and execute once it closed), delete-offsets and delete, each asserted as
exact text (Kafka 4.4's layout; the member id, which the broker picks, is read from the output first)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)

# Fast heartbeats and a one-node share-group state topic (the reference tests' share overrides)
SHARE_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.session.timeout.ms": "10000",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}


def share_cli(bootstrap: str, *args: str) -> tuple[int, str, str]:
    r = subprocess.run([sys.executable, "-m", "shoal.cli", "share-groups", "--bootstrap-server", bootstrap, *args],
                       capture_output=True, text=True, timeout=60)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, r.stdout, r.stderr


def create_share_group(bootstrap: str, topic: str, group: str, client_id: str = "cli-sc",
                       timeout: float = 40) -> Any:
    """``topic`` (2 partitions: 6 records in 0, 3 in 1), the group's share.auto.offset.reset=earliest, and a
    ShareConsumer member polled until it got all 9 records and acknowledged them (implicitly, by polling on)."""
    from confluent_kafka import Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)], request_timeout=15)[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(6):
        p.produce(topic, b"v%d" % i, partition=0)
    for i in range(3):
        p.produce(topic, b"w%d" % i, partition=1)
    assert p.flush(15) == 0
    res = ConfigResource("group", group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for fut in admin.incremental_alter_configs([res], request_timeout=15).values():
        fut.result(30)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + timeout
    while got < 9:
        assert time.monotonic() < deadline, f"the share consumer got {got} of 9 records"
        got += sum(1 for m in consumer.poll(0.2) or [] if m.error() is None)
    for _ in range(5):  # the implicit acknowledgements go out with the next polls
        consumer.poll(0.2)
    return consumer


def wait_for(bootstrap: str, args: list[str], expected: str, timeout: float = 20) -> tuple[int, str, str]:
    """Run the tool until its stdout is ``expected`` (acknowledgements land asynchronously); the last run."""
    deadline = time.monotonic() + timeout
    while True:
        got = share_cli(bootstrap, *args)
        if got[1] == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def test_share_groups_cli(shoal_factory, tmp_path: Path) -> None:
    broker = shoal_factory(overrides=SHARE_OVERRIDES)
    bs = broker.bootstrap_servers
    t, g = "sgc-t", "sgc-g"
    consumer = create_share_group(bs, t, g)
    try:
        assert share_cli(bs, "--list") == (0, f"{g}\n", "")
        assert share_cli(bs, "--list", "--state") == (0, f"GROUP           STATE\n{g}           Stable\n", "")
        assert share_cli(bs, "--list", "--state", "empty") == (0, "GROUP           STATE\n", "")
        rc, out, err = share_cli(bs, "--list", "--state", "Bogus")
        assert (rc, out, err.splitlines()[0]) == (1, "", "Invalid state list 'Bogus'. Valid states are: Dead, "
                                                         "Empty, Stable")
        offsets = ("\nGROUP           TOPIC           PARTITION  START-OFFSET  LAG\n"
                   f"{g}           {t}           0          6             0\n"
                   f"{g}           {t}           1          3             0\n")
        assert wait_for(bs, ["--describe", "--group", g], offsets) == (0, offsets, "")
        assert share_cli(bs, "--describe", "--group", g, "--verbose") == (0, (
            "\nGROUP           TOPIC           PARTITION  LEADER-EPOCH  START-OFFSET  LAG\n"
            f"{g}           {t}           0          0             6             0\n"
            f"{g}           {t}           1          0             3             0\n"), "")
        rc, out, err = share_cli(bs, "--describe", "--group", g, "--members")
        member = out.splitlines()[2].split()[1]
        width = max(15, len(member))
        assert (rc, out, err) == (0, (
            f"\nGROUP           {'CONSUMER-ID'.ljust(width)} HOST            CLIENT-ID       #PARTITIONS  ASSIGNMENT\n"
            f"{g}           {member.ljust(width)} /127.0.0.1      cli-sc          2            {t}:0,1\n"), "")
        rc, out, err = share_cli(bs, "--describe", "--group", g, "--members", "--verbose")
        epoch = out.splitlines()[2].split()[5]
        assert (rc, out, err) == (0, (
            f"\nGROUP           {'CONSUMER-ID'.ljust(width)} HOST            CLIENT-ID       #PARTITIONS  "
            "MEMBER-EPOCH  ASSIGNMENT\n"
            f"{g}           {member.ljust(width)} /127.0.0.1      cli-sc          2            {epoch.ljust(13)} "
            f"{t}:0,1\n"), "")
        coordinator = f"{bs}  (0)".ljust(25)
        assert share_cli(bs, "--describe", "--group", g, "--state") == (0, (
            f"\nGROUP           {'COORDINATOR (ID)'.ljust(len(coordinator))} STATE           #MEMBERS\n"
            f"{g}           {coordinator} Stable          1\n"), "")
        rc, out, err = share_cli(bs, "--describe", "--group", g, "--state", "--verbose")
        assert (rc, out.splitlines()[1].split(), err) == (0, ["GROUP", "COORDINATOR", "(ID)", "STATE", "GROUP-EPOCH",
                                                              "ASSIGNMENT-EPOCH", "#MEMBERS"], "")
        assert out.splitlines()[2].split()[:4] == [g, bs, "(0)", "Stable"] and out.splitlines()[2].endswith(" 1")
        assert share_cli(bs, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest", "--dry-run") == (
            1, "", f"Share group '{g}' is not empty.\n")
        assert share_cli(bs, "--delete", "--group", g) == (0, (
            "\nError: Deletion of some share groups failed:\n"
            f"* Group '{g}' could not be deleted due to: org.apache.kafka.common.errors.GroupNotEmptyException: "
            f"Share group '{g}' is not EMPTY.\n"), "")
    finally:
        consumer.close()
    empty = f"\nShare group '{g}' has no active members.\n"
    assert wait_for(bs, ["--describe", "--group", g, "--members"], "")[1:] == ("", empty)
    assert share_cli(bs, "--describe", "--group", g, "--state") == (0, (
        f"\nGROUP           {'COORDINATOR (ID)'.ljust(len(coordinator))} STATE           #MEMBERS\n"
        f"{g}           {coordinator} Empty           0\n"), empty)
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs})
    p.produce(t, b"x0", partition=1)
    p.produce(t, b"x1", partition=1)
    assert p.flush(15) == 0
    assert share_cli(bs, "--describe", "--group", g) == (0, (
        "\nGROUP           TOPIC           PARTITION  START-OFFSET  LAG\n"
        f"{g}           {t}           0          6             0\n"
        f"{g}           {t}           1          3             2\n"), "")
    rc, _, err = share_cli(bs, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest")
    assert (rc, err.splitlines()[0]) == (1, "Option [reset-offsets] takes the option: [execute] or [dry-run]")
    plan = ("\nGROUP           TOPIC           PARTITION  NEW-OFFSET\n"  # Kafka's HashMap order: partition 1 first
            f"{g}           {t}           1          {{}}\n{g}           {t}           0          {{}}\n")
    assert share_cli(bs, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest", "--dry-run") == (
        0, plan.format(0, 0), "")
    assert share_cli(bs, "--reset-offsets", "--group", g, "--all-topics", "--to-offset", "100", "--dry-run") == (
        0, plan.format(5, 6), "")
    assert share_cli(bs, "--reset-offsets", "--group", g, "--all-topics", "--to-datetime", "2020-01-01T00:00:00.000",
                     "--dry-run") == (0, plan.format(0, 0), "")
    assert share_cli(bs, "--reset-offsets", "--group", g, "--topic", f"{t}:1", "--to-offset", "1", "--execute") == (
        0, f"\nGROUP           TOPIC           PARTITION  NEW-OFFSET\n{g}           {t}           1          1\n", "")
    assert share_cli(bs, "--reset-offsets", "--group", g, "--all-topics", "--to-current", "--dry-run") == (
        0, plan.format(1, 6), "")
    assert share_cli(bs, "--reset-offsets", "--group", g, "--all-topics", "--to-earliest", "--execute",
                     "--export") == (0, f"{t},1,0\n{t},0,0\n\n", "")
    assert share_cli(bs, "--describe", "--group", g) == (0, (
        "\nGROUP           TOPIC           PARTITION  START-OFFSET  LAG\n"
        f"{g}           {t}           0          0             6\n"
        f"{g}           {t}           1          0             5\n"), "")
    assert share_cli(bs, "--delete-offsets", "--group", g, "--topic", "nosuch") == (
        0, "\nTOPIC           STATUS\nnosuch          Error: This server does not host this topic-partition.\n", "")
    assert share_cli(bs, "--delete-offsets", "--group", g, "--topic", t) == (
        0, f"\nTOPIC           STATUS\n{t.ljust(15)} Successful\n", "")
    assert share_cli(bs, "--delete", "--group", g) == (
        0, f"Deletion of requested share groups ('{g}') was successful.\n", "")
    assert share_cli(bs, "--delete", "--group", g) == (0, (
        "\nError: Deletion of some share groups failed:\n"
        f"* Group '{g}' could not be deleted due to: org.apache.kafka.common.errors.GroupIdNotFoundException: "
        f"Group '{g}' is not a share group.\n"), "")
    assert share_cli(bs, "--describe", "--group", g) == (0, (
        "\nError: Executing share group command failed due to org.apache.kafka.common.errors."
        f"GroupIdNotFoundException: Group {g} not found.\n"), "")
    assert share_cli(bs, "--delete-offsets", "--group", "nosuch-g", "--topic", t) == (0, (
        "\nError: Group nosuch-g not found.\n\nTOPIC           STATUS\n"
        f"{t.ljust(15)} Error: Group nosuch-g not found.\n"), "")
    assert share_cli(bs, "--list") == (0, "", "")


def test_share_groups_usage_errors() -> None:
    """Kafka's checks, before any connection (the first line of stderr is Kafka's message)."""
    cases = [
        (["--list"], 'Missing required argument "[bootstrap-server]"'),
        (["--bootstrap-server", "127.0.0.1:1"], "Command must include exactly one action: --list, --describe, "
                                                "--delete, --reset-offsets, --delete-offsets."),
        (["--bootstrap-server", "127.0.0.1:1", "--describe"],
         "Option [describe] takes one of these options: [all-groups], [group]"),
        (["--bootstrap-server", "127.0.0.1:1", "--describe", "--group", "g", "--state", "Stable"],
         "Option [describe] does not take a value for [state]"),
        (["--bootstrap-server", "127.0.0.1:1", "--delete"], "Option [delete] takes the options [group] or "
                                                            "[all-groups]."),
        (["--bootstrap-server", "127.0.0.1:1", "--delete", "--group", "g", "--topic", "t"],
         "Option [delete] does not take the options [topic] or [all-topics]."),
        (["--bootstrap-server", "127.0.0.1:1", "--delete-offsets", "--group", "g"],
         "Option [delete-offsets] takes the following options: [group], [topic]"),
        (["--bootstrap-server", "127.0.0.1:1", "--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest",
          "--dry-run", "--execute"], "Option [reset-offsets] only accepts one of [execute] and [dry-run]"),
        (["--bootstrap-server", "127.0.0.1:1", "--reset-offsets", "--group", "g", "--to-earliest", "--dry-run"],
         "Option [reset-offsets] takes one of these options: [all-topics], [from-file], [topic]"),
        (["--bootstrap-server", "127.0.0.1:1", "--reset-offsets", "--group", "g", "--topic", "t", "--dry-run"],
         "Option [reset-offsets] takes one of these options: [from-file], [to-current], [to-datetime], "
         "[to-earliest], [to-latest], [to-offset]"),
        (["--bootstrap-server", "127.0.0.1:1", "--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest",
          "--to-latest", "--dry-run"], 'Option "[to-earliest]" can\'t be used with option "[to-latest]"'),
        (["--bootstrap-server", "127.0.0.1:1", "--reset-offsets", "--group", "g", "--topic", "t", "--all-topics",
          "--to-earliest", "--dry-run"], 'Option "[topic]" can\'t be used with option "[all-topics]"'),
    ]
    for args, first in cases:
        r = subprocess.run([sys.executable, "-m", "shoal.cli", "share-groups", *args], capture_output=True, text=True,
                           timeout=30)
        assert (r.returncode, r.stdout, r.stderr.splitlines()[0]) == (1, "", first), args
