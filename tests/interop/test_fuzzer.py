"""A bounded run of shoal's own fuzzer against a real broker process (the long run is one
command: ``python -m shoal.testing.fuzzer --frames 1000000``; figures in docs/reliability.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_fuzzer_bounded_run():
    proc = subprocess.run([sys.executable, "-m", "shoal.testing.fuzzer", "--frames", "15000", "--seed", "7",
                           "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = proc.stdout
    assert proc.returncode == 0, report + proc.stderr[-3000:]
    assert "frames sent        15,000" in report
    assert "unanswered         0" in report
    assert "broker tracebacks  0" in report and "broker crashed     no" in report
    control = next(line for line in report.splitlines() if line.startswith("control client"))
    assert " 0 failures" in control and not control.startswith("control client     0 round trips")
