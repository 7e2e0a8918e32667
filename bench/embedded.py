"""How soon a test has a ready broker: shoal.testing's fixtures against starting `shoal serve`.

    .venv/bin/python bench/embedded.py [--repeat 20]

Python's bytecode caching is on, as in a user's install (PYTHONDONTWRITEBYTECODE is dropped
and a first, uncounted start writes the caches). "Ready" means a client's first request is answered: from the start call to an
ApiVersions response read off a fresh socket. Measured, medians of --repeat:

1. `shoal_broker` cold: a new Python process imports shoal.testing, starts a broker in
   process, answers (what the first test of a session waits for; interpreter start excluded);
2. in process, warm: one more broker in a process that already made one (a fixture per test);
3. `broker(mode="subprocess")`: a `shoal serve` child process started and answering;
4. `shoal serve` started from a shell command (the interpreter's start included).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

API_VERSIONS_V0 = struct.pack(">ihhi", 10, 18, 0, 1) + struct.pack(">h", 0)  # size, key, version, corr, client id ""


def answered(host: str, port: int, timeout: float = 10.0) -> None:
    """Send ApiVersions v0 and read the whole response."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=timeout) as s:
                s.sendall(API_VERSIONS_V0)
                head = s.recv(4, socket.MSG_WAITALL)
                size = struct.unpack(">i", head)[0]
                body = b""
                while len(body) < size:
                    chunk = s.recv(size - len(body))
                    if not chunk:
                        raise OSError("closed")
                    body += chunk
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.002)


COLD = """
import time, sys
t0 = time.perf_counter()
from shoal.testing import EmbeddedBroker
sys.path.insert(0, {bench!r})
from embedded import answered
b = EmbeddedBroker().start()
answered("127.0.0.1", next(iter(b.ports.values())))
print(time.perf_counter() - t0)
b.close()
"""


def cold(repeat: int) -> list[float]:
    code = COLD.format(bench=os.path.dirname(os.path.abspath(__file__)))
    return [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
                  .stdout.strip()) for _ in range(repeat)]


def warm(repeat: int) -> list[float]:
    from shoal.testing import EmbeddedBroker

    EmbeddedBroker().start().close()  # imports paid
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        b = EmbeddedBroker().start()
        answered("127.0.0.1", next(iter(b.ports.values())))
        out.append(time.perf_counter() - t0)
        b.close()
    return out


def subprocess_mode(repeat: int) -> list[float]:
    from shoal.testing import BrokerProcess

    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        b = BrokerProcess().start()
        answered("127.0.0.1", next(iter(b.ports.values())))
        out.append(time.perf_counter() - t0)
        b.close()
    return out


def shoal_serve(repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-m", "shoal.cli", "--log-level", "WARNING", "serve",
                                     "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                                     "--override", f"log.dirs={d}"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                answered("127.0.0.1", port, 20)
                out.append(time.perf_counter() - t0)
            finally:
                proc.terminate()
                proc.wait(10)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # children inherit it: caches on, as users have them
    cold(1)  # writes the bytecode caches; not counted
    rows = [("shoal_broker, cold (new process, imports included)", cold(args.repeat)),
            ("in process, warm (another broker in the same process)", warm(args.repeat)),
            ('broker(mode="subprocess")', subprocess_mode(args.repeat)),
            ("`shoal serve` from a command line", shoal_serve(args.repeat))]
    print(f"start to first answered request, median of {args.repeat} (min - max)")
    for name, xs in rows:
        print(f"  {name:56s} {statistics.median(xs) * 1000:8.1f} ms  ({min(xs) * 1000:.1f} - {max(xs) * 1000:.1f})")


if __name__ == "__main__":
    main()
