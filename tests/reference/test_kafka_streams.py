"""Kafka Streams 4.4 on shoal (issue 17, part 4): a word count with processing.guarantee=exactly_once_v2,
a repartition topic (groupBy word), a state store with its changelog, killed with SIGKILL mid-stream and
restarted. The output, read with read_committed, must be exactly right: with the record cache off, each
word's counts are 1, 2, ..., n, each once and in order, n being the word's count in the input.
"""

from __future__ import annotations

import json
import random
import signal
import struct
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.builds import javac
from tests.reference import maven
from tests.reference.apache_kafka import _die_with_parent
from tests.reference.consumer_protocol_helpers import CLIENTS_DIR, create_topic, wait_until

pytestmark = [pytest.mark.reference, pytest.mark.timeout(300)]

WORDS = ["shoal", "kafka", "stream", "spark", "group", "offset", "record", "topic", "broker", "commit"]
LINES = 2000


@pytest.fixture(scope="module")
def word_count(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Kafka Streams 4.4's jars (Maven) and WordCount.java compiled against them."""
    lib = maven.resolve("streams-4.4.0", [("org.apache.kafka", "kafka-streams", "4.4.0"),
                                          ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.5")])
    return lib, javac([CLIENTS_DIR / "WordCount.java"], lib, tmp_path_factory.mktemp("wordcount"))


class App:
    """One WordCount process and the events it printed."""

    def __init__(self, jars: tuple[Path, Path], bs: str, state_dir: Path, log: Path) -> None:
        lib, classes = jars
        self.events: list[dict[str, Any]] = []
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", f"{lib}/*:{classes}",
                 "WordCount", bs, "wordcount", "lines", "counts", str(state_dir)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, preexec_fn=_die_with_parent)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                self.events.append(json.loads(raw))
            except ValueError:
                pass

    def running(self) -> bool:
        states = [e["state"] for e in self.events if e.get("ev") == "state"]
        return bool(states) and states[-1] == "RUNNING"

    def errors(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("ev") == "error"]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def produce(bs: str, lines: list[str], pause: float = 0.0) -> None:
    """The lines, in order; ``pause`` seconds after each (records that keep arriving)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "enable.idempotence": True})
    for i, line in enumerate(lines):
        p.produce("lines", key=str(i).encode(), value=line.encode())
        p.poll(0)
        if pause:
            time.sleep(pause)
    assert p.flush(30) == 0


class Output:
    """The counts topic read with read_committed: every (word, count) in order."""

    def __init__(self, bs: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bs, "group.id": "wordcount-check", "enable.auto.commit": False,
                                  "isolation.level": "read_committed"})
        self.consumer.assign([TopicPartition("counts", p, 0) for p in range(3)])
        self.counts: dict[str, list[int]] = {}

    def poll(self) -> None:
        for m in self.consumer.consume(500, 0.2):
            if m.error() is None:
                self.counts.setdefault(m.key().decode(), []).append(struct.unpack(">q", m.value())[0])

    def last(self) -> dict[str, int]:
        return {w: c[-1] for w, c in self.counts.items()}


def test_word_count_is_exactly_right_through_a_kill(shoal_brokers: Any, word_count: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    bs = shoal_brokers().bootstrap_servers
    create_topic(bs, "lines", 3)
    create_topic(bs, "counts", 3)
    rng = random.Random(17)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(LINES)]
    expected = Counter(w for line in lines for w in line.split())
    output = Output(bs)
    apps: list[App] = []
    try:
        produce(bs, lines[:LINES // 2])
        apps.append(App(word_count, bs, tmp_path / "state", tmp_path / "app1.stderr"))
        wait_until(lambda: apps[-1].running() or apps[-1].errors(), 90, "the application running")
        assert not apps[-1].errors(), apps[-1].errors()
        wait_until(lambda: output.poll() or sum(output.last().values()) >= LINES // 4, 60, "the first counts")
        # Mid-stream: records keep arriving (a chunk every 50 ms) and the application commits every 200 ms,
        # so the kill finds a transaction open (its output then aborted, and processed again).
        first_half = sum(len(line.split()) for line in lines[:LINES // 2])
        feeder = threading.Thread(target=produce, args=(bs, lines[LINES // 2:], 0.004))
        feeder.start()
        wait_until(lambda: output.poll() or sum(output.last().values()) > first_half + 200, 60,
                   "the application counting the records that keep arriving")
        time.sleep(0.1)  # a commit just became visible: half a commit interval later the next one is open
        apps[-1].kill()
        feeder.join(60)
        apps.append(App(word_count, bs, tmp_path / "state", tmp_path / "app2.stderr"))
        wait_until(lambda: output.poll() or output.last() == dict(expected), 120, "every word's final count",
                   lambda: f"last {output.last()} expected {dict(expected)}; errors {apps[-1].errors()}")
        time.sleep(1.0)
        output.poll()
    finally:
        for app in apps:
            app.close()
        output.consumer.close()
    assert not apps[-1].errors(), apps[-1].errors()
    wrong = {w: c for w, c in output.counts.items() if c != list(range(1, expected[w] + 1))}
    assert not wrong, {w: (c[:5], "...", c[-5:], len(c), expected[w]) for w, c in wrong.items()}
