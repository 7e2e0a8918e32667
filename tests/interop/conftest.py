"""Fixtures that run a real `shoal serve` process on loopback.

Each broker is a subprocess (so kill -9 is real), listening on ports the OS
picks, with its data in the test's tmp dir. Every process started here is
stopped when the test ends, and every wait is bounded.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

_STARTED = re.compile(r"node (\d+) at ([\d.]+):(\d+)")


class ShoalProcess:
    """A `shoal serve` subprocess and what it printed when it started."""

    def __init__(self, data_dir: Path, nodes: int = 1, overrides: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.nodes = nodes
        self.overrides = {"group.initial.rebalance.delay.ms": "0", **(overrides or {})}
        self.ports: dict[int, int] = {}
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def start(self, timeout: float = 20.0) -> ShoalProcess:
        first_port = next(iter(self.ports.values()), 0)
        cmd = [sys.executable, "-m", "shoal.cli", "--log-level", "INFO", "serve",
               "--nodes", str(self.nodes), "--control-stdin",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{first_port}",
               "--override", f"log.dirs={self.data_dir}"]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        log_file = open(self.log_path, "a")  # noqa: SIM115 - kept for the process's life
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log_file, text=True, bufsize=1)
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"shoal exited early; log:\n{self.log_path.read_text()[-4000:]}")
            if line.startswith("shoal started"):
                self.ports = {int(n): int(port) for n, _, port in _STARTED.findall(line)}
                return self
        raise RuntimeError("shoal did not start in time")

    def command(self, text: str, timeout: float = 30.0) -> str:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        if not line.startswith("ok"):
            raise RuntimeError(f"control command {text!r} failed: {line}")
        return line

    def stop(self, timeout: float = 15.0) -> None:
        """Graceful stop (SIGTERM), as a user's Ctrl-C."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def kill9(self) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
            self.proc = None

    def restart(self) -> ShoalProcess:
        self.stop()
        return self.start()


@pytest.fixture
def shoal_factory(tmp_path: Path) -> Iterator:
    started: list[ShoalProcess] = []

    def make(nodes: int = 1, overrides: dict[str, str] | None = None) -> ShoalProcess:
        proc = ShoalProcess(tmp_path / f"data{len(started)}", nodes, overrides)
        started.append(proc)
        return proc.start()

    yield make
    for proc in started:
        proc.stop()


@pytest.fixture
def shoal(shoal_factory) -> ShoalProcess:
    """One single-node broker."""
    return shoal_factory()


@pytest.fixture(params=[1, 3], ids=["1node", "3nodes"])
def shoal_cluster(request, shoal_factory) -> ShoalProcess:
    """A broker of one node, and again of three nodes in one process."""
    return shoal_factory(nodes=request.param)
