"""What the tests that run command-line tools against shoal and against Apache Kafka share: the
normalising of what differs between two brokers by nature (node ids, topic ids, member ids, hosts, times),
the comparison of two runs' steps, and running Kafka's tool classes, unchanged, in one JVM (ToolSession).

Used by test_tools_vs_kafka.py (shoal's tools) and test_more_tools_vs_kafka.py (Kafka's own tools)."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
from pathlib import Path

from tests.builds import javac

Step = tuple[int, str, str]  # exit code, normalised stdout, normalised stderr

# What differs between two brokers by nature, whatever the tool: (pattern, replacement), in order.
_NORMALISE = [
    (re.compile(r"TopicId: \S+"), "TopicId: <id>"),
    (re.compile(r"127\.0\.0\.1:\d+ \(id: \d+\)"), "<node>"),
    (re.compile(r"(Leader|Replicas|Isr|Coordinator|broker)( ?[:=]? ?)\d[\d,]*"), r"\1\2<node>"),
    (re.compile(r"[\w.-]*-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<member>"),
    (re.compile(r"/127\.0\.0\.1"), "<host>"),
    (re.compile(r"\b1\d{12}\b"), "<time>"),
]


def normalise(text: str) -> str:
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    # column widths follow the widest cell, which normalising changed: compare cells, not spaces
    return "\n".join(re.sub(r"[ \t]+", " ", line).strip() for line in text.splitlines())


def hide(text: str, extra: dict[str, str]) -> str:
    """Replace the per-broker ids a scenario learnt (a producer id), as whole words."""
    for old, new in extra.items():
        text = re.sub(rf"(?<![\w-]){re.escape(old)}(?![\w-])", new, text)
    return text


def mask_cell(results: dict[str, list[Step]], header: str, column: int) -> None:
    """In tables whose header line starts with ``header``, hide one column (a node id, a duration)."""
    for steps in results.values():
        for i, (rc, out, err) in enumerate(steps):
            lines = out.splitlines()
            if lines and lines[0].startswith(header + " "):
                rows = [ln.split(" ") for ln in lines[1:]]
                for row in rows:
                    row[column] = "<hidden>"
                steps[i] = (rc, "\n".join([lines[0], *(" ".join(r) for r in rows)]), err)


def assert_same(results: dict[str, list[Step]]) -> None:
    for i, (s, k) in enumerate(zip(results["shoal"], results["kafka"], strict=True)):
        assert s == k, f"step {i} differs:\nshoal: {s}\nkafka: {k}"


TOOL_RUNNER = Path(__file__).parent / "clients" / "ToolRunner.java"


def compile_tool_runner(lib: Path, out: Path) -> Path:
    """javac ToolRunner.java against Kafka's jars into ``out``; returns ``out``."""
    return javac([TOOL_RUNNER], lib, out)


class ToolSession:
    """One JVM that runs Kafka's tool classes, unchanged, one after another (ToolRunner.java): a JVM start per
    run costs seconds on a busy machine. Each run's exit code, stdout and stderr are the tool's own, as a
    process of its own would give them, except the tools' log4j lines (to the JVM's stdout, not read). Use as a
    context manager: the JVM is stopped for sure."""

    def __init__(self, lib: Path, classes: Path, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self._n = 0
        self._proc = subprocess.Popen(
            ["java", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{classes}:{lib}/*",
             "ToolRunner", str(workdir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, bufsize=1)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            if line.startswith("@@done "):
                self._lines.put(line)
        self._lines.put(None)

    def run(self, main_class: str, *args: str, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
        assert self._proc.stdin is not None
        assert not any("\t" in a or "\n" in a for a in args)
        self._proc.stdin.write("\t".join([main_class, *args]) + "\n")
        self._proc.stdin.flush()
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{main_class} {' '.join(args)} did not finish in {timeout:.0f} s") from None
        assert line is not None, f"the tool JVM died running {main_class} {' '.join(args)}"
        _, n, code = line.split()
        assert int(n) == self._n
        self._n += 1
        out = (self.workdir / f"{n}.out").read_text()
        err = (self.workdir / f"{n}.err").read_text()
        return subprocess.CompletedProcess([main_class, *args], int(code), out, err)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait(10)
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()

    def __enter__(self) -> ToolSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
