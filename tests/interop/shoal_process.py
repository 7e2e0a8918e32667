"""A real `shoal serve` process for the interop tests (the fixtures are in conftest.py)."""

from __future__ import annotations

from shoal.testing.process import BrokerProcess


class ShoalProcess(BrokerProcess):
    """shoal.testing's BrokerProcess under the names these tests use."""

    @property
    def bootstrap(self) -> str:
        return self.bootstrap_servers

    def kill9(self) -> None:
        self.kill()
