"""A virtual-time asyncio event loop: the broker's real asyncio code, on simulated time.

`SimLoop.time()` is the simulation's clock. When no callback is ready, asyncio asks its selector
to wait until the next timer; the simulated selector instead moves the clock to that timer at
once and reports no IO. A run therefore takes the CPU time its callbacks need, whatever the
timeouts, and the order of callbacks depends only on the schedule, so one seed gives one run.

Nothing here does real IO: servers are placeholders (the simulated network calls
`BrokerNode.dispatch` directly) and executor jobs run inline (a thread would make the order of
events depend on the OS scheduler).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from shoal import clock

# Virtual time starts at a fixed wall clock (2025-01-01T00:00:00Z) so record timestamps and
# stored deadlines are the same on every run of a seed.
WALL_EPOCH_MS = 1_735_689_600_000


CANCEL_S = 10.0  # how long, in virtual time, a cancelled task may take to end


class Deadlock(RuntimeError):
    """Nothing is ready and no timer is set: the awaited work can never finish."""


class _TimeWarp:
    """Stands in for asyncio's selector: "waiting" moves the virtual clock forward."""

    def __init__(self, loop: SimLoop) -> None:
        self._loop = loop

    def select(self, timeout: float | None) -> list[Any]:
        if timeout is None:
            raise Deadlock("no callback is ready and no timer is set")
        if timeout > 0:
            self._loop.advance(timeout)
        return []

    def close(self) -> None:
        pass


class _SimSocket:
    """Enough of a listening socket for `BrokerNode._listen` to learn its port."""

    def __init__(self, host: str, port: int) -> None:
        self._name = (host, port)

    def getsockname(self) -> tuple[str, int]:
        return self._name


class SimServer:
    """What `create_server` returns in the simulation: a listener that never accepts (clients
    reach nodes through `shoal.sim.network`)."""

    def __init__(self, host: str, port: int) -> None:
        self.sockets = [_SimSocket(host, port)]
        self.closed = False

    def close(self) -> None:
        self.closed = True

    async def wait_closed(self) -> None:
        return None

    def is_serving(self) -> bool:
        return not self.closed


class SimLoop(asyncio.BaseEventLoop):
    """An event loop whose clock is virtual and whose waits take no real time.

    Relies on `BaseEventLoop._run_once` asking `self._selector.select(timeout)` for the time to
    the next timer (CPython 3.11+).
    """

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0
        self._wall_offset_ns = 0  # clock jumps move the wall clock only
        self._selector = _TimeWarp(self)
        # Timers due within this much of now fire together; virtual time has no jitter to absorb.
        self._clock_resolution = 1e-6
        self._next_port = 40_000

    # ------------------------------------------------------------------ time
    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the virtual clock forward (the loop does this itself when idle)."""
        self._now += seconds

    def jump_wall_clock(self, ms: int) -> None:
        """Move the wall clock (not the monotonic one) by ``ms``, as an NTP step would."""
        self._wall_offset_ns += ms * 1_000_000

    def monotonic_ns(self) -> int:
        return int(self._now * 1e9)

    def wall_ns(self) -> int:
        return WALL_EPOCH_MS * 1_000_000 + int(self._now * 1e9) + self._wall_offset_ns

    # ------------------------------------------------------------------ BaseEventLoop's IO hooks
    def _process_events(self, event_list: list[Any]) -> None:
        pass

    def _write_to_self(self) -> None:
        pass  # single-threaded: nobody needs waking

    def run_in_executor(  # type: ignore[override]
            self, executor: Any, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``func`` inline: a thread would make the run depend on the OS scheduler."""
        fut = self.create_future()
        try:
            fut.set_result(func(*args))
        except BaseException as e:  # noqa: BLE001 - delivered to the awaiter, as an executor would
            fut.set_exception(e)
        return fut

    async def create_server(  # type: ignore[override]
            self, protocol_factory: Any, host: Any = None, port: Any = None, **kwargs: Any) -> SimServer:
        """A placeholder listener; port 0 gets the next free simulated port."""
        if not port:
            port, self._next_port = self._next_port, self._next_port + 1
        return SimServer(str(host or "sim"), int(port))

    async def getaddrinfo(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - guard
        raise OSError("the simulation has no DNS")

    async def create_connection(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - guard
        raise OSError("the simulation has no sockets; use shoal.sim.network")

    def _make_socket_transport(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - guard
        raise OSError("the simulation has no sockets")


@contextlib.contextmanager
def sim_clock(loop: SimLoop) -> Iterator[None]:
    """Make `shoal.clock` read ``loop``'s virtual time for the duration."""
    clock.set_source(loop.wall_ns, loop.monotonic_ns)
    try:
        yield
    finally:
        clock.reset_source()


def run(main: Callable[[], Any], loop: SimLoop | None = None) -> Any:
    """Run the coroutine ``main()`` to completion on a fresh `SimLoop` with `shoal.clock`
    reading virtual time; cancels whatever tasks are left when it returns."""
    loop = loop or SimLoop()
    asyncio.set_event_loop(loop)
    try:
        with sim_clock(loop):
            try:
                return loop.run_until_complete(main())
            finally:
                _cancel_all(loop)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def _cancel_all(loop: SimLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        # bounded in virtual time: a task that drops its cancel would otherwise run on forever
        _done, left = loop.run_until_complete(asyncio.wait(tasks, timeout=CANCEL_S))
        if left:
            raise Deadlock(f"{len(left)} tasks went on after they were cancelled: "
                           + ", ".join(sorted(t.get_name() for t in left)))


__all__ = ["Deadlock", "SimLoop", "SimServer", "WALL_EPOCH_MS", "run", "sim_clock"]
