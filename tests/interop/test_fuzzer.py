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


def test_fuzzer_sasl_listener_before_authentication():
    """Unauthenticated garbage on a SASL listener: never authenticates, never reaches a handler (no
    topic the fuzz frames ask for is created), never crashes or freezes the broker."""
    proc = subprocess.run([sys.executable, "-m", "shoal.testing.fuzzer", "--sasl", "--frames", "6000", "--seed", "3",
                           "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = proc.stdout
    assert proc.returncode == 0, report + proc.stderr[-3000:]
    sent = int(report.split("frames sent", 1)[1].split()[0].replace(",", ""))
    assert sent > 4000
    answered, closed = (int(x.replace(",", "")) for x in report.split("answered / closed", 1)[1].split()[0:3:2])
    assert answered > 0 and closed > 0
    assert "unanswered         0" in report
    assert "broker tracebacks  0" in report and "broker crashed     no" in report
    control = next(line for line in report.splitlines() if line.startswith("control client"))
    assert " 0 failures" in control
