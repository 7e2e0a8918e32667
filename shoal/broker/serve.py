"""Run a broker process until SIGINT/SIGTERM: `shoal serve`.

With `--control-stdin`, lines on standard input drive the cluster, so tests
(and curious users) can exercise fail-over: `stop-node N`, `start-node N`.
Each command is answered with one line `ok ...` or `error ...` on stdout.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import signal
import sys

from shoal.broker.broker import Broker
from shoal.broker.config import BrokerConfig

log = logging.getLogger("shoal")


async def _control_loop(broker: Broker, stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while not stop.is_set():
        line = await reader.readline()
        if not line:
            return
        words = line.decode().split()
        try:
            if len(words) == 2 and words[0] == "stop-node":
                await broker.stop_node(int(words[1]))
            elif len(words) == 2 and words[0] == "start-node":
                await broker.start_node(int(words[1]))
            elif words == ["shutdown"]:
                stop.set()
            else:
                raise ValueError(f"unknown command {' '.join(words)!r}")
            print("ok", " ".join(words), flush=True)
        except Exception as e:  # report and keep serving
            print("error", e, flush=True)


def tune_malloc() -> None:
    """Keep large request buffers on the heap (glibc).

    Produce requests carry batches of about 1 MiB. By default glibc serves
    such sizes with a fresh mmap and unmaps them when freed, so every request
    buffer, and every copy of one, pays page faults on first touch; that cost
    the broker about half of its CPU on the produce path. Raising the mmap and
    trim thresholds lets freed buffers be reused instead. SHOAL_MALLOC_TUNING=0
    turns this off (the process then keeps less memory it no longer uses).
    """
    if not sys.platform.startswith("linux") or os.environ.get("SHOAL_MALLOC_TUNING") == "0":
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        libc.mallopt(m_mmap_threshold, 64 << 20)
        libc.mallopt(m_trim_threshold, 256 << 20)
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass


async def run(config: BrokerConfig, nodes: int = 1, control_stdin: bool = False,
              node_ports: list[int] | None = None) -> None:
    try:
        broker = Broker(config, nodes)
    except OSError as e:
        raise SystemExit(f"shoal serve: cannot use the log directories: {e}") from None
    for node, port in zip(broker.nodes.values(), node_ports or [], strict=False):
        node.port = port
    try:
        await broker.start()
    except OSError as e:  # e.g. the port is taken: one clear line, not a traceback
        await broker.close()
        raise SystemExit(f"shoal serve: cannot start: {e.strerror or e}") from None
    endpoints = ", ".join(f"node {n.node_id} at {n.host}:{n.port}" + "".join(
        f" ({lst.name} at {lst.host}:{lst.port})" for lst in n.listeners[1:]) for n in broker.nodes.values())
    print(f"shoal started: cluster {broker.cluster_id}, {endpoints}, data in "
          f"{','.join(map(str, config.log_dirs))}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    control = loop.create_task(_control_loop(broker, stop)) if control_stdin else None
    try:
        await stop.wait()
    finally:
        if control is not None:
            control.cancel()
        await broker.close()
        print("shoal stopped", flush=True)


def serve(config: BrokerConfig, nodes: int = 1, control_stdin: bool = False,
          node_ports: list[int] | None = None) -> None:
    """Run until SIGINT/SIGTERM. ``node_ports`` gives each node its port (else listener, +1, ...)."""
    tune_malloc()
    asyncio.run(run(config, nodes, control_stdin, node_ports))
