"""Apache Kafka on demand: fetched from Maven Central, started on loopback, stopped for sure.

The reference broker that shoal is compared with. ``fetch`` resolves Kafka's
broker and tools jars (``org.apache.kafka:kafka_2.13`` and ``kafka-tools``,
with their dependencies) through Maven into a cache folder kept between runs
(``$SHOAL_KAFKA_CACHE``, default ``~/.cache/shoal/kafka``); ``KafkaCluster``
formats a KRaft data folder with Kafka's own StorageTool and starts one JVM per
node, each node a combined broker and controller, on free loopback ports.

Every JVM dies with the Python process that started it (``PR_SET_PDEATHSIG``),
so an interrupted test run leaves nothing behind. A failed download or a failed
start raises ``KafkaError`` with one line naming what failed and where the log is.

Command line (from the checkout)::

    python scripts/kafka.py fetch [--line 4|3.9]
    python scripts/kafka.py start [--line 4|3.9] [--nodes 3]   # runs until Ctrl-C

Test-only: nothing in ``shoal/`` imports this.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from tests.ports import free_ports as _free_ports
from tests.reference import maven

__all__ = ["LINES", "KafkaCluster", "KafkaError", "fetch", "main"]

# Newest first: the first version of a line that Maven resolves is the one used.
LINES: dict[str, tuple[str, ...]] = {
    "4": ("4.4.0", "4.3.1", "4.3.0"),
    "3.9": ("3.9.2", "3.9.1", "3.9.0"),
}
READY_TIMEOUT = 90.0
# starts tried when a node finds a port taken (another test worker drew it too): each with new ports
PORT_ATTEMPTS = 3
_PR_SET_PDEATHSIG = 1


class KafkaError(RuntimeError):
    """Kafka could not be fetched or started; the message is one line naming the cause."""


def _coordinates(version: str) -> list[maven.Coordinate]:
    coords = [("org.apache.kafka", "kafka_2.13", version), ("org.apache.kafka", "kafka-tools", version)]
    if not version.startswith("3."):
        # Kafka 4 logs through log4j2 and ships its slf4j binding in the distribution, not in the pom;
        # Kafka 3.x depends on slf4j-reload4j itself.
        coords.append(("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.5"))
    return coords


def fetch(line: str = "4") -> tuple[str, Path]:
    """The newest version of a Kafka ``line`` ("4" or "3.9") that Maven resolves, and its jar folder.

    Downloads once per machine; later calls find the cache. Raises KafkaError when
    no version of the line can be fetched (Maven Central unreachable, for one).
    """
    if line not in LINES:
        raise KafkaError(f"unknown Kafka line {line!r} (known: {', '.join(LINES)})")
    reasons = []
    for version in LINES[line]:
        try:
            return version, maven.resolve(version, _coordinates(version))
        except maven.MavenError as e:
            reasons.append(f"{version}: {e}")
    raise KafkaError(f"Maven could not fetch Apache Kafka {line}.x from Maven Central ({'; '.join(reasons)})")


def _die_with_parent() -> None:
    # Runs in the child before exec: the JVM gets SIGKILL when the test process dies, however it dies.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass
    os.setsid()


_LIVE: set[KafkaCluster] = set()


@atexit.register
def _stop_all() -> None:
    for cluster in list(_LIVE):
        cluster.stop()


class KafkaCluster:
    """N Kafka nodes (combined broker + controller, KRaft) on loopback, one JVM each.

    ``overrides`` are server properties applied to every node (Kafka's names).
    Use as a context manager, or call ``start()`` and ``stop()``.
    """

    # JVM options of every node unless a cluster is given its own: none here (a benchmark measures Kafka as it
    # ships); the test suite sets C1-only JIT (tests/reference/fixtures.py), a third less CPU for a node's start
    # and its light test load on a two-core machine.
    default_jvm_options: tuple[str, ...] = ()

    def __init__(self, line: str = "4", nodes: int = 1, workdir: Path | str | None = None,
                 overrides: dict[str, str] | None = None, heap: str = "768m",
                 extra_listeners: dict[str, str] | None = None, jvm_options: tuple[str, ...] | None = None) -> None:
        self.line = line
        self.jvm_options = KafkaCluster.default_jvm_options if jvm_options is None else tuple(jvm_options)
        # more client listeners beside PLAINTEXT: name -> security protocol (SASL_PLAINTEXT, SSL, ...)
        self.extra_listeners = dict(extra_listeners or {})
        self.listener_ports: dict[int, dict[str, int]] = {}
        self.nodes = nodes
        self._own_dir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix=f"kafka-{line}-")) if workdir is None else Path(workdir)
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.version = ""
        self.lib: Path | None = None
        self.ports: dict[int, int] = {}
        self._controller_ports: dict[int, int] = {}
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self.format_seconds = 0.0  # how long Kafka's StorageTool took: part of a first start only

    # -- what tests use ------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    @property
    def node_ids(self) -> list[int]:
        return list(self.ports)

    def bootstrap(self, listener: str) -> str:
        """``host:port,...`` of an extra listener (``extra_listeners``) on every node."""
        return ",".join(f"127.0.0.1:{ports[listener]}" for ports in self.listener_ports.values())

    def log_path(self, node_id: int) -> Path:
        return self.workdir / f"node-{node_id}" / "server.log"

    def java(self, main_class: str, *args: str, timeout: float = 120.0,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's tool classes (``kafka.tools.StorageTool``, ...) on this version's jars."""
        assert self.lib is not None
        # a one-shot tool: C1 alone and the serial collector (C2 compiles nothing useful in a run of seconds)
        return subprocess.run(["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp",
                               f"{self.lib}/*", main_class, *args],
                              capture_output=True, text=True, timeout=timeout, input=input)

    # -- start and stop ------------------------------------------------

    def _properties(self, node_id: int) -> str:
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in self._controller_ports.items())
        rf = str(min(3, self.nodes))
        extra = "".join(f",{name}://127.0.0.1:{port}" for name, port in self.listener_ports.get(node_id, {}).items())
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.ports[node_id]},"
                         f"CONTROLLER://127.0.0.1:{self._controller_ports[node_id]}{extra}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.ports[node_id]}{extra}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
                                              + "".join(f",{n}:{p}" for n, p in self.extra_listeners.items()),
            "log.dirs": str(self.workdir / f"node-{node_id}" / "data"),
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
        }
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _log_config(self, node_dir: Path) -> list[str]:
        log = node_dir / "server.log"
        if self.version.startswith("3."):
            cfg = node_dir / "log4j.properties"
            cfg.write_text("log4j.rootLogger=INFO, F\nlog4j.appender.F=org.apache.log4j.FileAppender\n"
                           f"log4j.appender.F.File={log}\nlog4j.appender.F.layout=org.apache.log4j.PatternLayout\n"
                           "log4j.appender.F.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
            return [f"-Dlog4j.configuration=file:{cfg}"]
        cfg = node_dir / "log4j2.properties"
        cfg.write_text("rootLogger.level=INFO\nrootLogger.appenderRef.f.ref=F\nappender.f.type=File\n"
                       f"appender.f.name=F\nappender.f.fileName={log}\nappender.f.layout.type=PatternLayout\n"
                       "appender.f.layout.pattern=[%d] %p %m (%c)%n\n")
        return [f"-Dlog4j2.configurationFile={cfg}"]

    def _format(self, node_id: int, cluster_id: str) -> Path:
        node_dir = self.workdir / f"node-{node_id}"
        node_dir.mkdir(parents=True, exist_ok=True)
        props = node_dir / "server.properties"
        props.write_text(self._properties(node_id))
        run = self.java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props))
        if run.returncode != 0:
            raise KafkaError(f"Kafka {self.version} StorageTool format failed for node {node_id}: "
                             f"{_first_cause(run.stdout + run.stderr)}")
        return props

    def _spawn(self, node_id: int, props: Path) -> None:
        assert self.lib is not None
        node_dir = props.parent
        cmd = ["java", f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseG1GC", *self.jvm_options, "-Djava.awt.headless=true",
               *self._log_config(node_dir), "-cp", f"{self.lib}/*", "kafka.Kafka", str(props)]
        with open(node_dir / "stdout.log", "ab") as out:
            self._procs[node_id] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                                    stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)

    def start(self, timeout: float = READY_TIMEOUT) -> KafkaCluster:
        """Fetch (if needed), format and start every node; return once all are ready.

        A node that finds one of its ports taken (it was free when chosen) is started again on new ports, up
        to ``PORT_ATTEMPTS`` starts; the earlier attempts' logs stay in ``workdir/port-clash-N``.
        """
        self.version, self.lib = fetch(self.line)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                return self._start_on_new_ports(timeout)
            except KafkaError as e:
                if attempt == PORT_ATTEMPTS or not _PORT_CLASH.search(str(e)):
                    raise
                self._set_aside(self.workdir / f"port-clash-{attempt}")
        raise AssertionError("unreachable")

    def _start_on_new_ports(self, timeout: float) -> KafkaCluster:
        ports = _free_ports(2 * self.nodes + len(self.extra_listeners) * self.nodes)
        self.ports = {n: ports[2 * (n - 1)] for n in range(1, self.nodes + 1)}
        self._controller_ports = {n: ports[2 * (n - 1) + 1] for n in range(1, self.nodes + 1)}
        extra = iter(ports[2 * self.nodes:])
        self.listener_ports = {n: {name: next(extra) for name in self.extra_listeners} for n in self.ports}
        cluster_id = _cluster_id()
        _LIVE.add(self)
        try:
            t0 = time.monotonic()
            props = {n: self._format(n, cluster_id) for n in self.ports}
            self.format_seconds = time.monotonic() - t0
            for n, p in props.items():
                self._spawn(n, p)
            self._wait_ready(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _set_aside(self, folder: Path) -> None:
        """Move a failed start's node folders (data and logs) aside, so the next start formats afresh."""
        folder.mkdir(parents=True, exist_ok=True)
        for n in self.ports:
            node_dir = self.workdir / f"node-{n}"
            if node_dir.exists():
                node_dir.rename(folder / node_dir.name)

    def _wait_ready(self, deadline: float) -> None:
        pending = set(self.ports)
        while pending:
            for n in sorted(pending):
                proc = self._procs[n]
                if proc.poll() is not None:
                    raise KafkaError(f"Kafka {self.version} node {n} exited with {proc.returncode} "
                                     f"while starting: {self._cause(n)}; log: {self.log_path(n)}")
                if self._answers_metadata(n):
                    pending.discard(n)
            if pending and time.monotonic() > deadline:
                n = min(pending)
                raise KafkaError(f"Kafka {self.version} node {n} was not ready in time: {self._cause(n)}; "
                                 f"log: {self.log_path(n)}")
            if pending:
                time.sleep(0.2)

    def _answers_metadata(self, node_id: int) -> bool:
        """Ready: the node answers Metadata and sees every broker of the cluster."""
        from shoal.tools.wire import ToolClient, ToolError

        try:
            with ToolClient(f"127.0.0.1:{self.ports[node_id]}", timeout=2.0) as client:
                return len(client.all_nodes()) == self.nodes
        except (ToolError, OSError):
            return False

    def _cause(self, node_id: int) -> str:
        """The first error the node logged (a port clash names itself here), or its last line."""
        text = ""
        for name in ("server.log", "stdout.log"):
            path = self.workdir / f"node-{node_id}" / name
            if path.exists():
                text += path.read_text(errors="replace")
        return _first_cause(text)

    def stop_node(self, node_id: int, timeout: float = 30.0) -> None:
        """Stop one node (SIGTERM, then SIGKILL); its data stays."""
        proc = self._procs.pop(node_id, None)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def stop(self) -> None:
        """Stop every node; the logs stay in ``workdir`` (removed only by ``close``)."""
        for n in list(self._procs):
            proc = self._procs[n]
            if proc.poll() is None:
                proc.terminate()
        for n in list(self._procs):
            self.stop_node(n)
        _LIVE.discard(self)

    def close(self) -> None:
        """Stop, and remove the work folder if this cluster made it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        return self if self._procs else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __hash__(self) -> int:
        return id(self)


_CLASH_CAUSES = (r"BindException[^\n]*", r"Address already in use[^\n]*")
_PORT_CLASH = re.compile("|".join(_CLASH_CAUSES))
_CAUSES = (*_CLASH_CAUSES, r"\] (?:ERROR|FATAL) [^\n]*", r"\w+(?:Exception|Error): [^\n]*")


def _first_cause(text: str) -> str:
    """The line of Kafka's output that names why it failed (a port clash names itself), else its last."""
    for pattern in _CAUSES:
        m = re.search(pattern, text)
        if m:
            return m.group(0).strip()[:300]
    lines = text.strip().splitlines()
    return lines[-1].strip()[:300] if lines else "it printed nothing"


def _cluster_id() -> str:
    # Kafka's Uuid.randomUuid().toString(): 16 random bytes, URL-safe base64 without padding, and (as
    # Kafka) never starting with "-", which a command line would take for an option.
    import base64

    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def main(argv: list[str] | None = None) -> int:
    """``fetch`` or ``start`` Apache Kafka from the command line."""
    import argparse

    parser = argparse.ArgumentParser(prog="scripts/kafka.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("fetch", "start"))
    parser.add_argument("--line", choices=tuple(LINES), default="4")
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--workdir", default=None, help="data and logs (default: a new temporary folder)")
    args = parser.parse_args(argv)
    try:
        if args.action == "fetch":
            version, lib = fetch(args.line)
            print(f"Apache Kafka {version}: {lib}")
            return 0
        cluster = KafkaCluster(args.line, args.nodes, args.workdir).start()
    except KafkaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"Apache Kafka {cluster.version} ready: {cluster.bootstrap_servers} (logs in {cluster.workdir})",
          flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
