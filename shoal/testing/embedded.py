"""A broker inside the test's own process, on an event loop thread of its own.

The same ``Broker`` as ``shoal serve`` (same storage, coordinators and
handlers), on loopback ports the OS picks; any client in the process or
outside it can connect. Starting one costs milliseconds, so a test can have a
fresh broker instead of sharing one.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

from shoal.testing.process import BrokerProcess

# As testcontainers' Kafka: a test's first consumer should not wait 3 s for the group's first join.
TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


def broker_properties(properties: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> dict[str, str]:
    """Properties from ``properties`` (Kafka's names) and keywords (``_`` for ``.``)."""
    props = {**TEST_DEFAULTS, **{k.replace("_", "."): str(v) for k, v in kwargs.items()}}
    props.update({k: str(v) for k, v in (properties or {}).items()})
    return props


class EmbeddedBroker:
    """A broker of ``nodes`` nodes in this process; ``bootstrap_servers`` once started."""

    def __init__(self, nodes: int = 1, data_dir: str | Path | None = None,
                 properties: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        if nodes < 1:
            raise ValueError("nodes must be at least 1")
        self.nodes = nodes
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.properties = broker_properties(properties, kwargs)
        self.properties.setdefault("listeners", "PLAINTEXT://127.0.0.1:0")
        self.ports: dict[int, int] = {}  # each node's first listener
        self.listener_ports: dict[int, dict[str, int]] = {}  # each node's port of every listener
        self._broker: Any = None
        self._loop_thread: Any = None

    # -- what tests use ------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of every node, for any client's bootstrap setting."""
        if not self.ports:
            raise RuntimeError("the broker is not started")
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def bootstrap(self, listener: str) -> str:
        """``host:port,...`` of every node's listener of that name (SASL_SSL, a custom name...)."""
        if not self.listener_ports:
            raise RuntimeError("the broker is not started")
        return ",".join(f"127.0.0.1:{ports[listener.upper()]}" for ports in self.listener_ports.values())

    @property
    def node_ids(self) -> list[int]:
        return list(self.ports)

    @property
    def broker(self) -> Any:
        """The running ``shoal.broker.broker.Broker`` (for white-box tests)."""
        return self._broker

    def start(self) -> EmbeddedBroker:
        from shoal.client.sync import _LoopThread

        if self._loop_thread is not None:
            return self
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="shoal-test-")) / "data"
        self.properties["log.dirs"] = str(self.data_dir)
        self._loop_thread = _LoopThread("shoal-embedded-broker")
        try:
            self._run(self._start())
        except BaseException:
            self._loop_thread.stop()
            self._loop_thread = None
            raise
        return self

    def stop_node(self, node_id: int) -> None:
        """Stop one node: its connections close, its partitions and coordinators move."""
        self._run(self._broker.stop_node(self._node(node_id)))

    def start_node(self, node_id: int) -> None:
        self._run(self._broker.start_node(self._node(node_id)))

    def restart(self) -> EmbeddedBroker:
        """A clean shutdown of every node and a start again, on the same data and ports
        (what a rolling restart of a whole cluster looks like to clients)."""
        self._run(self._restart())
        return self

    def close(self) -> None:
        """Stop the broker and remove its data if it lives in a folder made for it."""
        if self._loop_thread is not None:
            try:
                if self._broker is not None:
                    self._run(self._shutdown())
            finally:
                self._loop_thread.stop()
                self._loop_thread = None
                self._broker = None
        if self._own_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir.parent, ignore_errors=True)
            self.data_dir = None
            self.ports = {}
            self.listener_ports = {}

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the asyncio face ------------------------------------------------------
    async def stop_node_async(self, node_id: int) -> None:
        await self._await(self._broker.stop_node(self._node(node_id)))

    async def start_node_async(self, node_id: int) -> None:
        await self._await(self._broker.start_node(self._node(node_id)))

    async def restart_async(self) -> EmbeddedBroker:
        await self._await(self._restart())
        return self

    # -- inside -----------------------------------------------------------------
    def _node(self, node_id: int) -> int:
        if self._broker is None:
            raise RuntimeError("the broker is not started")
        if node_id not in self._broker.nodes:
            raise ValueError(f"no node {node_id} (nodes: {sorted(self._broker.nodes)})")
        return node_id

    def _run(self, coro: Any) -> Any:
        return self._loop_thread.run(coro)

    async def _await(self, coro: Any) -> Any:
        return await asyncio.wrap_future(self._loop_thread.submit(coro))

    async def _start(self) -> None:
        from shoal.broker.broker import Broker
        from shoal.broker.config import BrokerConfig

        b = Broker(BrokerConfig(self.properties), self.nodes)
        for node_id, ports in self.listener_ports.items():  # a restart keeps every node's addresses
            for listener in b.nodes[node_id].listeners:
                listener.port = ports[listener.name]
        try:
            await b.start()
        except BaseException:
            await b.close()
            raise
        self._broker = b
        self.ports = {n.node_id: n.port for n in b.nodes.values()}
        self.listener_ports = {n.node_id: {lst.name: lst.port for lst in n.listeners} for n in b.nodes.values()}

    async def _shutdown(self) -> None:
        await self._broker.close()
        # Connection tasks end when their sockets do; let them, so the loop closes clean.
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    async def _restart(self) -> None:
        await self._broker.close()
        self._broker = None
        await self._start()


@contextlib.contextmanager
def broker(nodes: int = 1, *, mode: str = "thread", data_dir: str | Path | None = None,
           properties: Mapping[str, Any] | None = None, **kwargs: Any) -> Iterator[Any]:
    """A started broker for the ``with`` block: an ``EmbeddedBroker`` (``mode="thread"``, the
    default) or a ``BrokerProcess`` (``mode="subprocess"``: a real process, ``kill()`` for crashes).
    Both have ``bootstrap_servers``, ``stop_node``, ``start_node``, ``restart`` and ``close``."""
    b = _make(nodes, mode, data_dir, properties, kwargs)
    try:
        yield b.start()
    finally:
        b.close()


@contextlib.asynccontextmanager
async def async_broker(nodes: int = 1, *, data_dir: str | Path | None = None,
                       properties: Mapping[str, Any] | None = None, **kwargs: Any) -> AsyncIterator[EmbeddedBroker]:
    """``async with async_broker() as b``: an ``EmbeddedBroker`` started and closed without
    blocking the caller's event loop; ``await b.stop_node_async(0)`` and friends for faults."""
    b = EmbeddedBroker(nodes, data_dir, properties, **kwargs)
    await asyncio.to_thread(b.start)
    try:
        yield b
    finally:
        await asyncio.to_thread(b.close)


def _make(nodes: int, mode: str, data_dir: str | Path | None, properties: Mapping[str, Any] | None,
          kwargs: Mapping[str, Any]) -> Any:
    if mode == "thread":
        return EmbeddedBroker(nodes, data_dir, properties, **kwargs)
    if mode == "subprocess":
        props = broker_properties(properties, kwargs)
        return BrokerProcess(data_dir, nodes, props)
    raise ValueError(f"mode must be 'thread' or 'subprocess', not {mode!r}")
