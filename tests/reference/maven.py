"""Jars from Maven Central, with their dependencies, into a cache folder kept between runs.

Used for Apache Kafka (the reference broker) and Spark's Kafka connector. A folder is complete
only once Maven has copied every jar into it (a ``.complete`` marker); one download at a time per
machine, however many test processes ask (a file lock).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["MavenError", "cache_root", "resolve"]

Coordinate = tuple[str, str, str]  # group id, artifact id, version


class MavenError(RuntimeError):
    """Maven could not resolve the artifacts; the message is Maven's first error line."""


def cache_root() -> Path:
    """``$SHOAL_KAFKA_CACHE``, default ``~/.cache/shoal/kafka``."""
    env = os.environ.get("SHOAL_KAFKA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "shoal" / "kafka"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _pom(name: str, coords: Sequence[Coordinate]) -> str:
    body = "".join(f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
                   f"<version>{v}</version></dependency>" for g, a, v in coords)
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            f'<groupId>shoal.reference</groupId><artifactId>{name}</artifactId>'
            f'<version>1</version><dependencies>{body}</dependencies></project>\n')


def _first_error(output: str) -> str:
    for line in output.splitlines():
        if "[ERROR]" in line and line.strip() != "[ERROR]":
            return line.replace("[ERROR]", "").strip()[:300]
    lines = output.strip().splitlines()
    return lines[-1][:300] if lines else "no output"


def resolve(name: str, coords: Sequence[Coordinate], timeout: float = 900.0) -> Path:
    """The folder holding ``coords`` and everything they depend on, as ``cache_root()/name/lib``."""
    home = cache_root() / name
    lib = home / "lib"
    with _locked(cache_root() / ".lock"):
        if (home / ".complete").exists():
            return lib
        if shutil.which("mvn") is None:
            raise MavenError("Maven (mvn) is not installed")
        shutil.rmtree(lib, ignore_errors=True)
        home.mkdir(parents=True, exist_ok=True)
        (home / "pom.xml").write_text(_pom(name, coords))
        try:
            run = subprocess.run(["mvn", "-B", "-q", "-f", str(home / "pom.xml"), "dependency:copy-dependencies",
                                  f"-DoutputDirectory={lib}"], capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise MavenError(f"Maven did not finish in {timeout:.0f} s") from None
        if run.returncode != 0:
            raise MavenError(_first_error(run.stdout + run.stderr))
        (home / ".complete").write_text(name + "\n")
        return lib
