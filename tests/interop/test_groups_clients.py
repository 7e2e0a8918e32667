"""kafka-python, aiokafka and `kcat -G` consumer groups against shoal.

Three members form a group over a 6-partition topic; one closes (leaves at
once), one is SIGKILLed (removed after its session timeout). Assignment is
checked from the clients and from DescribeGroups.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from tests.interop.group_helpers import (
    HEARTBEAT_MS,
    SESSION_MS,
    Member,
    assert_partitioned,
    create_topic,
    describe_group,
    group_state,
    is_partitioned,
    kafka_conf,
    members,  # noqa: F401 - fixture
    produce,
    wait_until,
)
from tests.interop.kcat_helpers import KCAT

TOPIC_PARTS = 6


def _settled(bootstrap: str, group: str, ms: list[Member], expected: set[tuple[str, int]]) -> bool:
    if not is_partitioned({m.name: m.assignment for m in ms}, expected):
        return False
    view = describe_group(bootstrap, group)
    return (view.state == "STABLE" and set(view.members) == {m.name for m in ms}
            and all(view.members[m.name] == m.assignment for m in ms))


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_python_client_group_assigns_rebalances_on_close_and_crash(shoal, members, client):  # noqa: F811
    bs, topic, group = shoal.bootstrap, f"grp-{client}", f"g-{client}"
    create_topic(bs, topic, TOPIC_PARTS)
    everything = {(topic, p) for p in range(TOPIC_PARTS)}
    ms = [members.start(f"{client}-{i}", client, bs, group, [topic], kafka_conf(client)) for i in range(3)]
    diag = lambda: group_state(bs, group, ms)  # noqa: E731
    wait_until(lambda: _settled(bs, group, ms, everything), 40, "three members settled", detail=diag)
    assert all(len(m.assignment) == 2 for m in ms), {m.name: m.assignment for m in ms}
    # Produced once the group is stable, so no rebalance hands a partition over mid-way.
    produce(bs, topic, TOPIC_PARTS, 60)
    # Each record is consumed once, by the member owning its partition.
    wait_until(lambda: sum(len(m.records) for m in ms) >= 60, 20, "all 60 records consumed")
    consumed = [r for m in ms for r in m.records]
    assert sorted(consumed) == sorted((topic, i % TOPIC_PARTS, i // TOPIC_PARTS) for i in range(60))
    for m in ms:
        assert {(t, p) for t, p, _ in m.records} <= m.assignment

    t0 = time.monotonic()
    ms[0].close()
    rest = ms[1:]
    wait_until(lambda: _settled(bs, group, rest, everything), 20, "two members settled after a close",
               detail=diag)
    assert time.monotonic() - t0 < SESSION_MS / 1000, "close did not leave the group"

    t0 = time.monotonic()
    rest[0].kill9()
    wait_until(lambda: _settled(bs, group, rest[1:], everything), SESSION_MS / 1000 + 20,
               "the last member owns everything after a crash", detail=diag)
    took = time.monotonic() - t0
    assert took > SESSION_MS / 1000 - 1.5, f"crashed member removed after {took:.1f}s"
    assert_partitioned({rest[1].name: rest[1].assignment}, everything)


class _Kcat:
    """`kcat -G` in a subprocess, counting the records it printed."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, log_dir: str) -> None:
        assert KCAT is not None, "kcat is not installed (scripts/test.sh installs it)"
        self.err_path = os.path.join(log_dir, f"kcat-{name}.log")
        self.out_path = os.path.join(log_dir, f"kcat-{name}.out")
        with open(self.err_path, "w") as err, open(self.out_path, "w") as out:
            self.proc = subprocess.Popen(
                [KCAT, "-b", bootstrap, "-G", group, topic, "-o", "beginning", "-J", "-q", "-u",
                 "-X", f"client.id={name}", "-X", f"session.timeout.ms={SESSION_MS}",
                 "-X", f"heartbeat.interval.ms={HEARTBEAT_MS}", "-X", "max.poll.interval.ms=15000",
                 "-X", "partition.assignment.strategy=roundrobin"],
                stdout=out, stderr=err)

    def records(self) -> list[tuple[int, int]]:
        with open(self.out_path) as f:
            # Only whole lines: kcat may be writing the last one.
            lines = [json.loads(x) for x in f if x.startswith("{") and x.endswith("\n")]
        return [(m["partition"], m["offset"]) for m in lines]

    def stop(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise AssertionError("kcat did not stop") from None


def test_kcat_group_assigns_rebalances_on_close_and_crash(shoal, tmp_path):
    bs, topic, group = shoal.bootstrap, "grp-kcat", "g-kcat"
    create_topic(bs, topic, TOPIC_PARTS)
    everything = {(topic, p) for p in range(TOPIC_PARTS)}
    kcats = [_Kcat(bs, group, topic, f"kc{i}", str(tmp_path)) for i in range(3)]
    try:
        def settled(names: set[str]) -> bool:
            view = describe_group(bs, group)
            return (view.state == "STABLE" and set(view.members) == names
                    and is_partitioned(view.members, everything))

        view = wait_until(lambda: settled({"kc0", "kc1", "kc2"}) and describe_group(bs, group), 40,
                          "three kcat members settled")
        assert all(len(p) == 2 for p in view.members.values()), view.members
        produce(bs, topic, TOPIC_PARTS, 60)
        wait_until(lambda: sum(len(k.records()) for k in kcats) >= 60, 20, "kcat consumed all 60 records")
        assert sorted(r for k in kcats for r in k.records()) == sorted(
            (i % TOPIC_PARTS, i // TOPIC_PARTS) for i in range(60))
        for k, name in zip(kcats, ["kc0", "kc1", "kc2"], strict=True):
            assert {(topic, p) for p, _ in k.records()} <= view.members[name]

        t0 = time.monotonic()
        kcats[0].stop(signal.SIGTERM)
        wait_until(lambda: settled({"kc1", "kc2"}), 20, "two kcat members after one closed")
        assert time.monotonic() - t0 < SESSION_MS / 1000, "kcat's close did not leave the group"

        t0 = time.monotonic()
        kcats[1].stop(signal.SIGKILL)
        wait_until(lambda: settled({"kc2"}), SESSION_MS / 1000 + 20, "one kcat member after a crash")
        assert time.monotonic() - t0 > SESSION_MS / 1000 - 1.5
    finally:
        for k in kcats:
            if k.proc.poll() is None:
                k.proc.kill()
                k.proc.wait(5)
