"""The simulated network between simulated clients and broker nodes.

A client connection carries requests to one node in order (it is TCP): each request frame is
delivered after a seeded delay, never before one sent earlier on the same connection, and the
node handles the frames of one connection one at a time through the real
`BrokerNode.dispatch`, as `KafkaConnection` does. Across connections nothing is ordered, so
requests of different clients are reordered freely by their delays.

Faults, each drawn from the run's seeded random stream and counted by kind:

- ``delay``: a slow delivery, long enough for the client to time out and retry;
- ``lose-request`` / ``lose-response``: the frame vanishes; the client times out and retries;
- ``drop-connection``: the request is handled but the connection drops before the answer
  (the client sees the disconnect and retries on a new connection);
- ``duplicate``: a copy of the request is handled again later, on a connection of its own, its
  answer thrown away (what a node does with bytes that arrived before a client gave up on a
  connection and retried elsewhere);
- a stopped node refuses connections and drops those it had.

Observers see every request a node handled and its answer, even an answer the network then
loses: invariants judge what the broker did, not what the client happened to hear.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shoal.broker.connection import CloseConnection
from shoal.broker.security.authentication import Authenticator
from shoal.protocol.framing import decode_response_header, encode_request, response_header_version
from shoal.protocol.generated import api_spec
from shoal.waits import within

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.sim.trace import Trace


class NetworkError(Exception):
    """A request got no answer: the client may retry (on a new connection)."""


class RequestTimeout(NetworkError):
    """No answer within the client's request timeout."""


class Disconnected(NetworkError):
    """The connection was refused or dropped."""


@dataclass
class FaultRates:
    """Probabilities per request (and delay bounds) of the network's faults."""

    min_delay_ms: float = 0.2
    max_delay_ms: float = 15.0
    slow: float = 0.01  # delivered after slow_delay_ms: past the client's timeout
    slow_delay_ms: tuple[float, float] = (500.0, 4000.0)
    lose_request: float = 0.01
    lose_response: float = 0.01
    drop_connection: float = 0.005
    duplicate: float = 0.01

    @classmethod
    def none(cls) -> FaultRates:
        """A network that only delays (for final checks)."""
        return cls(slow=0, lose_request=0, lose_response=0, drop_connection=0, duplicate=0)


# An observer is told (node id, token, api key, version, request, response or None, phase) where
# phase is "start" when the node begins handling the request and "end" when it has answered, and
# the token tells apart two deliveries of one request (a duplicate).
Observer = Callable[[int, int, int, int, Any, Any, str], None]


class ServerConnection:
    """The node's side of one connection: what `BrokerNode.dispatch` needs of a connection."""

    def __init__(self, network: SimNetwork, node_id: int, peer: str, ghost: bool = False) -> None:
        self.network = network
        self.node_id = node_id
        node = network.broker.nodes[node_id]
        self.node = node
        self.listener = node.listeners[0]
        self.auth = Authenticator(self.listener.security.sasl)
        self.peer = peer
        self.ghost = ghost  # answers go nowhere
        self.closed = False
        self.in_flight = False
        self.client: ClientConnection | None = None
        self._queue: asyncio.Queue[tuple[bytearray, int, int, int, Any] | None] = asyncio.Queue()
        self._released: list[tuple[Any, int]] = []
        self._close_after = False
        self.task = asyncio.get_running_loop().create_task(self._run())
        network.handling[self.task] = None
        self.task.add_done_callback(network.handling.pop)

    # what handlers call on a connection
    def throttle(self, ms: int) -> None:
        pass  # no quotas are configured in the simulation

    def release_when_sent(self, memory: Any, n: int) -> None:
        self._released.append((memory, n))

    def close_after_response(self) -> None:
        self._close_after = True

    def enqueue(self, frame: bytearray, corr: int, api_key: int, version: int, request: Any) -> None:
        self._queue.put_nowait((frame, corr, api_key, version, request))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._queue.put_nowait(None)
        self.node.broker.share.connection_closed(self)  # its share sessions end, as on a real connection
        for told in self.network.on_close:
            told(self)
        if self.client is not None:
            self.client.server_closed()

    async def _run(self) -> None:
        net = self.network
        while True:
            item = await self._queue.get()
            if item is None or self.closed:
                return
            frame, corr, api_key, version, request = item
            net.handled += 1
            token = net.handled
            if self.ghost:
                net.ghost_tokens.add(token)
            net.observe(self.node_id, token, api_key, version, request, None, "start")
            self.in_flight = True
            try:
                raw = await self.node.dispatch(frame, self)  # type: ignore[arg-type]
            except CloseConnection as e:
                net.trace.emit(f"node {self.node_id} closes {self.peer}: {e}")
                raw = None
                self._close_after = True
            except Exception as e:  # noqa: BLE001 - a handler bug: KafkaConnection would close, we report
                net.trace.violation("handler-error", f"node {self.node_id} {api_spec(api_key).name}: {e!r}")
                raw = None
                self._close_after = True
            finally:
                self.in_flight = False
                for memory, n in self._released:  # "sent" as soon as it leaves the handler
                    memory.release(n)
                self._released.clear()
            response = None
            if raw is not None:
                response = _decode_response(raw, api_key, version)
            net.observe(self.node_id, token, api_key, version, request, response, "end")
            if response is not None and not self.ghost and not self.closed:
                net.respond(self, corr, response)
            if self._close_after:
                self.close()
                return


def _decode_response(raw: bytes | bytearray, api_key: int, version: int) -> Any:
    body = memoryview(raw)[4:]
    _, offset = decode_response_header(body, response_header_version(api_key, version))
    return api_spec(api_key).response.decode(bytes(body[offset:]), version)


class ClientConnection:
    """A client's end of a connection to one node; `call` is one request and its answer."""

    def __init__(self, network: SimNetwork, node_id: int, client: str) -> None:
        self.network = network
        self.node_id = node_id
        self.client = client
        self.closed = False
        self._correlation = 0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self.last_delivery = 0.0  # FIFO: nothing is delivered before what was sent earlier
        self.last_response = 0.0
        self.server: ServerConnection | None = None

    async def call(self, api_key: int, version: int, request: Any, timeout_s: float) -> Any:
        """Send ``request`` and await its decoded answer; raises `NetworkError` subclasses."""
        if self.closed:
            raise Disconnected(f"connection to node {self.node_id} is closed")
        self._correlation += 1
        corr = self._correlation
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[corr] = fut
        self.network.send(self, corr, api_key, version, request)
        try:
            return await within(fut, timeout_s)
        except TimeoutError:
            self.close()
            raise RequestTimeout(f"no answer from node {self.node_id} in {timeout_s:g} s") from None
        finally:
            self._pending.pop(corr, None)

    def answer(self, corr: int, response: Any) -> None:
        fut = self._pending.get(corr)
        if fut is not None and not fut.done() and not self.closed:
            fut.set_result(response)

    def server_closed(self) -> None:
        """The node dropped the connection: every waiting call fails at once."""
        self.closed = True
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(Disconnected(f"node {self.node_id} dropped the connection"))

    def close(self) -> None:
        """The client gives up on this connection (after a timeout)."""
        self.closed = True
        if self.server is not None and not self.server.closed:
            # The node notices the close later; bytes it already has may still be handled.
            server = self.server
            self.network.loop.call_later(self.network.close_notice_s, server.close)


class SimNetwork:
    """Delivers frames between clients and the nodes of one `Broker`, with seeded faults."""

    def __init__(self, broker: Broker, rng: random.Random, trace: Trace, rates: FaultRates | None = None) -> None:
        self.broker = broker
        self.rng = rng
        self.trace = trace
        self.rates = rates or FaultRates()
        self.loop = asyncio.get_running_loop()
        self.observers: list[Observer] = []
        self.on_close: list[Callable[[ServerConnection], None]] = []  # told when a node's side closes
        self.close_notice_s = 0.05
        self._servers: dict[int, list[ServerConnection]] = {}
        self._peers = 0
        self.handled = 0  # requests nodes began to handle
        self.ghost_tokens: set[int] = set()  # tokens of duplicate deliveries
        self._cut_until: dict[int, float] = {}  # node id -> when its network partition heals
        self._dead = False  # the process died and its successor is not up: every connect is refused
        # every node-side connection task still running, in the order they began: a connection a node
        # crash closed may still be handling a request (the node stops; its handlers go on in-process)
        self.handling: dict[asyncio.Task[None], None] = {}

    def set_broker(self, broker: Broker) -> None:
        """After a whole-cluster restart: new connections reach the new broker's nodes."""
        self.broker = broker
        self._dead = False

    def connect(self, node_id: int, client: str) -> ClientConnection:
        return ClientConnection(self, node_id, client)

    def observe(self, node_id: int, token: int, api_key: int, version: int, request: Any, response: Any,
                phase: str) -> None:
        for observer in self.observers:
            observer(node_id, token, api_key, version, request, response, phase)

    def isolate(self, node_id: int, seconds: float) -> None:
        """A network partition: for ``seconds`` nothing reaches node ``node_id`` and nothing it
        sends arrives. Its connections stay open; clients find out by their timeouts."""
        self._cut_until[node_id] = max(self._cut_until.get(node_id, 0.0), self.loop.time() + seconds)
        self.trace.fault("network-partition", f"node {node_id} cut off for {seconds:.1f} s")

    def heal(self) -> None:
        """The network's faults stop: partitions heal, nothing more is lost, dropped or duplicated."""
        self._cut_until.clear()
        self.rates = FaultRates.none()

    def _cut(self, node_id: int) -> bool:
        return self.loop.time() < self._cut_until.get(node_id, 0.0)

    # ------------------------------------------------------------------ delivery
    def _delay(self) -> float:
        r = self.rates
        if r.slow and self.rng.random() < r.slow:
            delay = self.rng.uniform(*r.slow_delay_ms)
            self.trace.fault("delay", f"{delay:.0f} ms")
            return delay / 1000
        return self.rng.uniform(r.min_delay_ms, r.max_delay_ms) / 1000

    def _server_for(self, conn: ClientConnection) -> ServerConnection | None:
        node = self.broker.nodes.get(conn.node_id)
        if node is None or not node.running or self._dead:
            return None
        if conn.server is None or conn.server.node is not node:
            self._peers += 1
            server = ServerConnection(self, conn.node_id, f"10.0.{self._peers % 250}.1:{30000 + self._peers}")
            server.client = conn
            conn.server = server
            self._servers.setdefault(conn.node_id, []).append(server)
        return conn.server

    def send(self, conn: ClientConnection, corr: int, api_key: int, version: int, request: Any) -> None:
        r, rng, trace = self.rates, self.rng, self.trace
        name = api_spec(api_key).name
        if rng.random() < r.lose_request:
            trace.fault("lose-request", f"{conn.client} -> node {conn.node_id} {name}")
            return
        at = max(self.loop.time() + self._delay(), conn.last_delivery)
        conn.last_delivery = at
        drop = rng.random() < r.drop_connection
        if drop:
            trace.fault("drop-connection", f"{conn.client} -> node {conn.node_id} {name}")
        frame = bytearray(encode_request(api_key, version, corr, conn.client, request.encode(version))[4:])
        if rng.random() < r.duplicate:
            later = at + rng.uniform(0.2, 3.0)
            trace.fault("duplicate", f"{conn.client} -> node {conn.node_id} {name} again in {later - at:.2f} s")
            self.loop.call_at(later, self._deliver_ghost, conn.node_id, conn.client, bytearray(frame),
                              corr, api_key, version, request)
        self.loop.call_at(at, self._deliver, conn, conn.server, frame, corr, api_key, version, request, drop)

    def _deliver(self, conn: ClientConnection, sent_on: ServerConnection | None, frame: bytearray, corr: int,
                 api_key: int, version: int, request: Any, drop: bool) -> None:
        if self._cut(conn.node_id):
            return
        if sent_on is not None and sent_on.closed:
            return  # sent on a connection that has since died: TCP delivers it nowhere else (seed 76)
        if sent_on is None and conn.closed:
            # Sent before the connection was up (the node was down, or the connect is slow), and the
            # client gave up on it first: a connect abandoned carries no request (seeds 7290, 7327).
            return
        server = self._server_for(conn)
        if server is None:  # connection refused: the node is down
            conn.server_closed()
            return
        if server.closed:
            return  # the node already noticed the client closed this connection
        server.enqueue(frame, corr, api_key, version, request)
        if drop:
            server.close_after_response()

    def _deliver_ghost(self, node_id: int, client: str, frame: bytearray, corr: int, api_key: int,
                       version: int, request: Any) -> None:
        node = self.broker.nodes.get(node_id)
        if node is None or not node.running or self._dead or self._cut(node_id):
            return
        self._peers += 1
        ghost = ServerConnection(self, node_id, f"10.1.{self._peers % 250}.1:{30000 + self._peers}", ghost=True)
        self._servers.setdefault(node_id, []).append(ghost)
        ghost.enqueue(frame, corr, api_key, version, request)
        ghost.close_after_response()

    def respond(self, server: ServerConnection, corr: int, response: Any) -> None:
        conn = server.client
        if conn is None or conn.closed:
            return
        if self.rng.random() < self.rates.lose_response:
            self.trace.fault("lose-response", f"node {server.node_id} -> {conn.client}")
            return
        at = max(self.loop.time() + self.rng.uniform(self.rates.min_delay_ms, self.rates.max_delay_ms) / 1000,
                 conn.last_response)
        conn.last_response = at
        self.loop.call_at(at, self._answer, server.node_id, conn, corr, response)

    def _answer(self, node_id: int, conn: ClientConnection, corr: int, response: Any) -> None:
        if not self._cut(node_id):
            conn.answer(corr, response)

    # ------------------------------------------------------------------ nodes
    def node_stopped(self, node_id: int) -> None:
        """A node went down: every connection it had is dropped."""
        for server in self._servers.pop(node_id, []):
            server.close()

    def drop_all(self) -> None:
        for node_id in list(self._servers):
            self.node_stopped(node_id)

    def kill_all(self) -> list[asyncio.Task[None]]:
        """The process dies: every connection drops and requests being handled stop where they
        are (their tasks are cancelled; the caller awaits the returned tasks), those of connections
        closed earlier too (seed 15495: an acknowledgement on a crashed node's connection, still
        waiting to be written, was answered from the dead process after the power cut)."""
        tasks = list(self.handling)
        # nothing reaches the dying process while it closes (its nodes stop one by one): a request
        # handled then would be answered from state the dead process never wrote (seed 15495)
        self._dead = True
        self.drop_all()
        for task in tasks:
            task.cancel()
        return tasks
