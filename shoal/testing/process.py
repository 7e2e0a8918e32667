"""``shoal serve`` as a managed child process: for tests where a crash must be real (SIGKILL).

The process listens on ports the OS picks (kept across restarts, so clients
reconnect to the same addresses), writes its log to a file beside its data,
and takes ``stop-node N`` / ``start-node N`` on its standard input
(``--control-stdin``). Every wait is bounded.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_STARTED = re.compile(r"node (\d+) at ([\d.]+):(\d+)((?: \([A-Z0-9_]+ at [\d.]+:\d+\))*)")
_MORE = re.compile(r"\(([A-Z0-9_]+) at [\d.]+:(\d+)\)")


class BrokerProcess:
    """A ``shoal serve`` subprocess and what it printed when it started."""

    def __init__(self, data_dir: Path | str | None = None, nodes: int = 1,
                 overrides: dict[str, str] | None = None) -> None:
        self._own_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="shoal-test-")) / "data" if data_dir is None else Path(data_dir)
        self.nodes = nodes
        self.overrides = {"group.initial.rebalance.delay.ms": "0", **(overrides or {})}
        self.ports: dict[int, int] = {}
        self.listener_ports: dict[int, dict[str, int]] = {}  # the other listeners of each node
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-broker.log"

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of every node, for any client's bootstrap setting."""
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    @property
    def node_ids(self) -> list[int]:
        return list(self.ports)

    def bootstrap(self, listener: str) -> str:
        """``host:port,...`` of every node's listener of that name (beyond the first one)."""
        return ",".join(f"127.0.0.1:{ports[listener.upper()]}" for ports in self.listener_ports.values())

    def start(self, timeout: float = 20.0) -> BrokerProcess:
        cmd = [sys.executable, "-m", "shoal.cli", "--log-level", "INFO", "serve",
               "--nodes", str(self.nodes), "--control-stdin",
               "--override", "listeners=PLAINTEXT://127.0.0.1:0",
               "--override", f"log.dirs={self.data_dir}"]
        if self.ports:  # a restart: every node back on its own port
            cmd += ["--node-ports", ",".join(str(self.ports[n]) for n in sorted(self.ports))]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as log_file:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log_file, text=True, bufsize=1)
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"shoal exited early; log:\n{self.log_path.read_text()[-4000:]}")
            if line.startswith("shoal started"):
                found = _STARTED.findall(line)
                self.ports = {int(n): int(port) for n, _, port, _ in found}
                self.listener_ports = {int(n): {name: int(p) for name, p in _MORE.findall(more)}
                                       for n, _, _, more in found}
                return self
        self.kill()
        raise RuntimeError("shoal did not start in time")

    def command(self, text: str) -> str:
        """One control line (``stop-node 1``); its ``ok ...`` answer, or RuntimeError."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        if not line.startswith("ok"):
            raise RuntimeError(f"control command {text!r} failed: {line}")
        return line

    def stop_node(self, node_id: int) -> None:
        """Stop one node: its connections close, its partitions and coordinators move."""
        self.command(f"stop-node {node_id}")

    def start_node(self, node_id: int) -> None:
        self.command(f"start-node {node_id}")

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
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: nothing flushed, nothing closed, as a crash."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            self.proc = None

    def restart(self, hard: bool = False) -> BrokerProcess:
        """Stop (SIGKILL when ``hard``) and start again on the same data and ports."""
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start()

    def close(self) -> None:
        """Stop, and remove the data if it lives in a folder made for it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir.parent, ignore_errors=True)

    def __enter__(self) -> BrokerProcess:
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
