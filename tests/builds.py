"""Building the test drivers that are not Python, once per machine, into ``~/.cache/shoal``: Go programs
(``go build``, modules from the Go module proxy) and pinned npm packages (``npm ci`` from the npm
registry), each keyed by a hash of its sources so a changed driver is rebuilt. Used by the Go and JS
client tests (tests/interop/test_go_js_clients.py) and the KIP-848 franz-go member (tests/reference/).
Also ``javac`` for the Java drivers, and ``die_with_parent``, for driver processes that must not outlive the test process.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

GO = os.environ.get("SHOAL_GO", "/usr/local/go/bin/go")
GO_CACHE = Path(os.environ.get("SHOAL_GO_CACHE", Path.home() / ".cache" / "shoal" / "go"))
NPM = os.environ.get("SHOAL_NPM", "npm")
NPM_CACHE = Path(os.environ.get("SHOAL_NPM_CACHE", Path.home() / ".cache" / "shoal" / "npm"))


def die_with_parent() -> None:
    """``preexec_fn`` for a child process: it is killed when the test process dies (PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def javac(sources: list[Path], lib: Path, out: Path) -> Path:
    """Compile Java ``sources`` against the jars in ``lib`` into ``out`` (made if missing); returns ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", f"{lib}/*", *map(str, sources)],
                         capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        raise RuntimeError(f"javac of {', '.join(s.name for s in sources)} failed: {run.stderr[-3000:]}")
    return out


def _digest(folder: Path, names: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode() + b"\0" + (folder / name).read_bytes())
    return digest.hexdigest()[:16]


def build_go(src: Path, name: str) -> Path:
    """``go build`` the program in ``src`` once (cached as ``name`` and a hash of its sources); the binary."""
    binary = GO_CACHE / "bin" / f"{name}-{_digest(src, ('go.mod', 'go.sum', 'main.go'))}"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOPATH": str(GO_CACHE), "GOMODCACHE": str(GO_CACHE / "mod"),
           "GOFLAGS": "-modcacherw -mod=readonly", "CGO_ENABLED": "0"}
    tmp = binary.with_suffix(f".tmp{os.getpid()}")
    run = subprocess.run([GO, "build", "-o", str(tmp), "."], cwd=src, env=env, capture_output=True, text=True,
                         timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"go build of the {name} driver failed: {run.stderr[-3000:]}")
    tmp.replace(binary)
    return binary


def install_npm(src: Path) -> Path:
    """``npm ci`` the pinned packages of ``src`` (package.json, package-lock.json) into the cache once; their
    node_modules."""
    name = src.name
    target = NPM_CACHE / f"{name}-{_digest(src, ('package.json', 'package-lock.json'))}"
    if (target / "node_modules" / ".shoal-complete").exists():
        return target / "node_modules"
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for file in ("package.json", "package-lock.json"):
        shutil.copy(src / file, tmp / file)
    env = {**os.environ, "npm_config_audit": "false", "npm_config_fund": "false",
           "npm_config_update_notifier": "false"}
    if Path("/usr/include/node/node.h").exists():  # node-gyp builds against these headers, offline
        env["npm_config_nodedir"] = "/usr"
    # @confluentinc/kafka-javascript: its prebuilt binary is on GitHub; the fallback compiles the bundled
    # librdkafka, linked to the system's OpenSSL and zlib rather than sources it would download.
    env["CKJS_LINKING"] = "dynamic"
    for key in ("JOBS", "npm_config_jobs", "MAKEFLAGS"):  # a parallel top-level make races librdkafka's
        env.pop(key, None)  # configure step: "No rule to make target '../deps/librdkafka/config.h'"
    log = NPM_CACHE / f"{name}-install.log"
    with open(log, "w") as out:
        npm = subprocess.Popen([NPM, "ci", "--no-audit", "--no-fund", "--foreground-scripts"], cwd=tmp, env=env,
                               stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            npm.wait(1200)
        except subprocess.TimeoutExpired:
            os.killpg(npm.pid, signal.SIGKILL)  # npm and the compilers it started
            npm.wait(10)
    if npm.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(f"npm ci of {name} failed; the end of {log}:\n{log.read_text()[-4000:]}")
    (tmp / "node_modules" / ".shoal-complete").write_text("ok\n")
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)
    return target / "node_modules"
