"""The pytest plugin as a user meets it: a suite that only names the fixtures, run by a fresh pytest
process (the plugin found through its entry point), on one node, on three, and against a cluster
that was already running (--shoal-bootstrap)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.shoal_process import ShoalProcess

USER_SUITE = Path(__file__).parent / "plugin_user"


def run_user_suite(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # -p no:cacheprovider: leave nothing behind in the repository; rootdir is the user's folder.
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), "--basetemp", str(tmp_path / "basetemp"), *args, str(USER_SUITE)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)


@pytest.mark.timeout(320)
def test_user_suite_on_one_node(tmp_path):
    r = run_user_suite(tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "6 passed" in r.stdout


@pytest.mark.timeout(320)
def test_user_suite_on_three_nodes_with_properties(tmp_path):
    r = run_user_suite(tmp_path, "--shoal-nodes", "3", "--shoal-property", "num.partitions=2")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "6 passed" in r.stdout


@pytest.mark.timeout(320)
def test_user_suite_against_a_running_cluster(tmp_path):
    """--shoal-bootstrap: the plugin starts nothing; a test that needs a restart fails clearly."""
    cluster = ShoalProcess(tmp_path / "external").start()
    try:
        r = run_user_suite(tmp_path, "--shoal-bootstrap", cluster.bootstrap)
    finally:
        cluster.stop()
    assert "5 passed" in r.stdout and "1 failed" in r.stdout, r.stdout[-3000:]
    assert "shoal_broker.restart() needs a broker the plugin started" in r.stdout
