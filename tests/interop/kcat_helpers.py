"""kcat (librdkafka's CLI) for the tests that drive it."""

from __future__ import annotations

import shutil
import subprocess

# scripts/test.sh installs kcat; a missing kcat fails the tests rather than skipping them.
KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def kcat(*args: str, input: str | None = None, timeout: float = 30) -> str:
    assert KCAT is not None, "kcat is not installed (scripts/test.sh installs it)"
    out = subprocess.run([KCAT, *args], input=input, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout
