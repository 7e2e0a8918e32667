"""Fixtures that run a real `shoal serve` process on loopback.

Each broker is a subprocess (so kill -9 is real), listening on ports the OS
picks, with its data in the test's tmp dir. Every process started here is
stopped when the test ends, and every wait is bounded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.shoal_process import ShoalProcess


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
