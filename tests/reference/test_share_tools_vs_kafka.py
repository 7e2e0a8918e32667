"""`shoal share-groups` beside Kafka 4.4's own kafka-share-groups (org.apache.kafka.tools.consumer.group.
ShareGroupCommand), each run on shoal and on Apache Kafka 4.4 for the same steps on a share group whose member
is confluent-kafka's ShareConsumer.

1. On each broker, the two tools print the same (exit status, stdout; stderr too, except that Kafka follows a
   usage error with its help and a failure with a Java stack trace: only stderr's first line of a usage error
   is compared, and stack-trace lines are dropped). Same broker, same moment: nothing else is normalised.
2. shoal's tool on shoal and on Kafka agree once what differs by nature is normalised: the member id, the
   coordinator's port and node id, the member and group epochs (Kafka bumps them for the share partitions'
   initialisation too), and one known broker difference is masked (see KNOWN_DIFFERENCES).

One shoal and one Kafka (with the share group overrides: fast heartbeats, a one-node state topic) serve the
module; every process is stopped at the end. Kafka's tool runs in one JVM, run after run (ToolRunner.java,
tools_helpers.ToolSession): a JVM start per run made this test minutes long on two busy cores.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shoal.testing.process import BrokerProcess
from tests.interop.test_cli_share_groups import SHARE_OVERRIDES, create_share_group
from tests.reference.apache_kafka import KafkaCluster
from tests.reference.fixtures import COMMON_PROPERTIES
from tests.reference.tools_helpers import ToolSession

pytestmark = [pytest.mark.reference, pytest.mark.timeout(420)]

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
Step = tuple[int, str, str]

# Steps whose output differs between the brokers for a reason in the brokers (both tools agree on each):
# - "live-offsets": with the member alive Kafka 4.4 reports START-OFFSET 0 (its share coordinator persists the
#   advanced start offset lazily, on a later write) where shoal reports the acknowledged position (6 and 3);
#   both report LAG 0. The START-OFFSET column of these steps is masked.
KNOWN_DIFFERENCES = {"live-offsets"}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    props = {**COMMON_PROPERTIES, **SHARE_OVERRIDES}
    shoal = BrokerProcess(tmp_path_factory.mktemp("shoal-share-tools") / "data", 1, props)
    kafka = KafkaCluster("4", 1, tmp_path_factory.mktemp("kafka-share-tools"), overrides=props)
    try:
        kafka.start()
        shoal.start()
        yield {"shoal": shoal, "kafka": kafka}
    finally:
        shoal.stop()
        kafka.stop()


def _clean_stderr(text: str, usage: bool) -> str:
    lines = [ln for ln in text.splitlines()
             if not ln.startswith(("\tat ", "java.util.concurrent.ExecutionException", "Caused by: ", "\t... "))]
    if usage and lines:
        lines = lines[:1]
    # Kafka lists the valid states from a Java HashSet: its order changes from one JVM to the next
    return "\n".join(re.sub(r"(?<=Valid states are: ).*", lambda m: ", ".join(sorted(m[0].split(", "))), ln)
                     for ln in lines)


def test_share_group_command_vs_kafka(brokers: dict[str, Any], tool_runner: tuple[Path, Path],
                                      tmp_path: Path) -> None:
    with ToolSession(*tool_runner, tmp_path / "runs") as session:
        _compare(brokers, session)


def _compare(brokers: dict[str, Any], session: ToolSession) -> None:
    tag = uuid.uuid4().hex[:6]
    t, g = f"sgt-{tag}", f"sgt-{tag}-g"
    ours: dict[str, list[tuple[str, Step]]] = {}
    for kind, proc in brokers.items():
        bs = proc.bootstrap_servers
        seen: list[tuple[str, Step]] = []
        ours[kind] = seen

        def both(name: str, *args: str, _bs: str = bs, _seen: list = seen, _kind: str = kind,
                 shoal_only: bool = False) -> None:
            """Both tools, Kafka's first (``shoal_only``: a step that cannot run twice, shoal's tool alone)."""
            theirs = None if shoal_only else session.run(SHARE_GROUP_COMMAND, "--bootstrap-server", _bs, *args,
                                                         timeout=120)
            r = subprocess.run([sys.executable, "-m", "shoal.cli", "share-groups", "--bootstrap-server", _bs, *args],
                               capture_output=True, text=True, timeout=60)
            assert "Traceback" not in r.stderr, r.stderr
            usage = r.returncode == 1 and "Run `shoal share-groups --help`" in r.stderr
            got = (r.returncode, r.stdout, _clean_stderr(r.stderr, usage))
            want = got if theirs is None else (theirs.returncode, theirs.stdout, _clean_stderr(theirs.stderr, usage))
            assert got == want, f"{_kind}: {args}\nshoal's tool: {got}\nKafka's tool: {want}"
            _seen.append((name, got))

        consumer = create_share_group(bs, t, g)
        try:
            both("list", "--list")
            both("list-state", "--list", "--state")
            both("list-bad-state", "--list", "--state", "Bogus")
            both("live-offsets", "--describe", "--group", g, "--verbose")
            both("members", "--describe", "--group", g, "--members", "--verbose")
            both("state", "--describe", "--group", g, "--state")
            both("no-such-group", "--describe", "--group", f"{g}-nobody", "--members")
            both("reset-live", "--reset-offsets", "--group", g, "--all-topics", "--to-earliest", "--dry-run")
            both("delete-live", "--delete", "--group", g)
        finally:
            consumer.close()
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bs})
        p.produce(t, b"x0", partition=1)
        p.produce(t, b"x1", partition=1)
        assert p.flush(15) == 0
        # the member has left once the group is Empty (bounded: shoal's tool, no JVM)
        for _ in range(50):
            r = subprocess.run([sys.executable, "-m", "shoal.cli", "share-groups", "--bootstrap-server", bs,
                                "--describe", "--group", g, "--state"], capture_output=True, text=True, timeout=60)
            if " Empty " in r.stdout:
                break
        else:
            raise AssertionError(f"the group did not become Empty: {r.stdout}")
        both("empty-state", "--describe", "--group", g, "--state", "--verbose")
        both("empty-members", "--describe", "--group", g, "--members")
        both("usage", "--reset-offsets", "--group", g, "--topic", t, "--to-earliest")
        both("dry-run", "--reset-offsets", "--group", g, "--topic", t, "--to-offset", "100", "--dry-run")
        both("execute", "--reset-offsets", "--group", g, "--topic", f"{t}:1", "--to-latest", "--execute")
        both("export", "--reset-offsets", "--group", g, "--all-topics", "--to-earliest", "--execute", "--export")
        both("offsets", "--describe", "--group", g)
        both("delete-offsets", "--delete-offsets", "--group", g, "--topic", t, "--topic", f"{t}-nope",
             shoal_only=True)
        both("delete-offsets-again", "--delete-offsets", "--group", g, "--topic", t)
        both("after-delete-offsets", "--describe", "--group", g)
        both("delete", "--delete", "--group", g, shoal_only=True)
        both("delete-again", "--delete", "--group", g)
        both("delete-offsets-no-group", "--delete-offsets", "--group", g, "--topic", t)

    def shown(kind: str) -> list[tuple[str, Step]]:
        port = brokers[kind].bootstrap_servers.rsplit(":", 1)[1]
        out = []
        for name, (rc, stdout, stderr) in ours[kind]:
            text = stdout.replace(f"127.0.0.1:{port}  (", "<coordinator>  (")
            text = re.sub(r"<coordinator>  \(\d+\)", "<coordinator>  (<id>)", text)
            text = re.sub(r"(?<![\w+/])[A-Za-z0-9+/_-]{22}(?![\w+/])", "<member-id>", text)
            lines = text.split("\n")
            if name in ("members", "empty-state"):  # member epoch; group and assignment epochs
                lines = [ln if ln.startswith("GROUP ") else re.sub(r"(?<= )\d+(?= )", "<n>", ln) for ln in lines]
            if name == "live-offsets":
                lines = [ln if ln.startswith("GROUP ") or not ln else
                         " ".join([*ln.split()[:4], "<start>", *ln.split()[5:]]) for ln in lines]
            out.append((name, (rc, "\n".join(lines), stderr)))
        return out

    for (name, s), (_, k) in zip(shown("shoal"), shown("kafka"), strict=True):
        assert s == k, f"{name}:\non shoal: {s}\non Kafka: {k}"
