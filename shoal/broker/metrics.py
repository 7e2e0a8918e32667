"""Metrics in Prometheus' text format, and health answers: `GET /metrics`, `/health`, `/ready`.

Served on the broker property ``metrics.port`` (off when unset), on the first
listener's host. Names follow what the Prometheus JMX exporter makes of
Kafka's JMX beans (``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,
topic=T`` -> ``kafka_server_brokertopicmetrics_bytesin_total{topic="T"}``), so
dashboards and alerts written for Kafka read shoal unchanged; consumer lag uses
kafka_exporter's names (``kafka_consumergroup_lag``), which operators use for it.

Counters are bumped on the request path (a dict increment each); everything
else (partitions, log sizes, groups, lag) is read from the broker's state when
scraped. ``/health`` answers 200 while the process serves; ``/ready`` 200 once
every node listens and the coordinators have loaded their partitions, else 503.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from shoal.waits import within

if TYPE_CHECKING:
    from shoal.broker.broker import Broker

log = logging.getLogger(__name__)

# Request time buckets (ms), as Kafka's TotalTimeMs percentiles would be read.
LATENCY_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class BrokerMetrics:
    """What the request path counts; the rest is read at scrape time."""

    def __init__(self) -> None:
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.messages_in: dict[str, int] = defaultdict(int)
        self.bytes_out: dict[str, int] = defaultdict(int)
        self.produce_requests: dict[str, int] = defaultdict(int)
        self.failed_produce_requests: dict[str, int] = defaultdict(int)
        self.fetch_requests: dict[str, int] = defaultdict(int)
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.latency: dict[str, list[int]] = {}  # api -> count per bucket (+ the overflow)
        self.latency_sum: dict[str, float] = defaultdict(float)

    def request(self, api: str, version: int, elapsed_ms: float) -> None:
        self.requests[(api, version)] += 1
        buckets = self.latency.get(api)
        if buckets is None:
            buckets = self.latency[api] = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        buckets[bisect.bisect_left(LATENCY_BUCKETS_MS, elapsed_ms)] += 1
        self.latency_sum[api] += elapsed_ms

    def produced(self, topic: str, size: int, records: int) -> None:
        self.bytes_in[topic] += size
        self.messages_in[topic] += records

    def fetched(self, topic: str, size: int) -> None:
        self.fetch_requests[topic] += 1
        self.bytes_out[topic] += size


def _labels(**kv: Any) -> str:
    if not kv:
        return ""
    body = ",".join(f'{k}="{_escape(str(v))}"' for k, v in kv.items())
    return "{" + body + "}"


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: Iterable[tuple[dict[str, Any], float]]) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            self.lines.append(f"{name}{_labels(**labels)} {_num(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _num(v: float) -> str:
    if isinstance(v, int) or float(v).is_integer():
        return str(int(v))
    return repr(float(v))


def render(broker: Broker) -> str:
    """Every metric, in Prometheus' text exposition format."""
    m = broker.metrics
    out = _Out()
    topic_counter = [
        ("kafka_server_brokertopicmetrics_bytesin_total", "Bytes appended by producers (BytesInPerSec)", m.bytes_in),
        ("kafka_server_brokertopicmetrics_messagesin_total", "Records appended by producers (MessagesInPerSec)",
         m.messages_in),
        ("kafka_server_brokertopicmetrics_bytesout_total", "Bytes sent to consumers (BytesOutPerSec)", m.bytes_out),
        ("kafka_server_brokertopicmetrics_totalproducerequests_total", "Produce requests per topic",
         m.produce_requests),
        ("kafka_server_brokertopicmetrics_failedproducerequests_total", "Produce requests that failed, per topic",
         m.failed_produce_requests),
        ("kafka_server_brokertopicmetrics_totalfetchrequests_total", "Fetch requests per topic", m.fetch_requests),
    ]
    for name, help_text, values in topic_counter:
        out.family(name, "counter", help_text, (({"topic": t}, v) for t, v in sorted(values.items())))
    out.family("kafka_network_requestmetrics_requests_total", "counter", "Requests handled, per API and version",
               (({"request": api, "version": v}, n) for (api, v), n in sorted(m.requests.items())))
    name = "kafka_network_requestmetrics_totaltimems"
    out.lines.append(f"# HELP {name} Time from a request's arrival to its response, in ms (TotalTimeMs)")
    out.lines.append(f"# TYPE {name} histogram")
    for api in sorted(m.latency):
        counts = m.latency[api]
        running = 0
        for le, n in zip((*LATENCY_BUCKETS_MS, "+Inf"), counts, strict=True):
            running += n
            out.lines.append(f"{name}_bucket{_labels(request=api, le=le)} {running}")
        out.lines.append(f"{name}_sum{_labels(request=api)} {_num(round(m.latency_sum[api], 3))}")
        out.lines.append(f"{name}_count{_labels(request=api)} {running}")
    _partitions(broker, out)
    _groups(broker, out)
    _share_groups(broker, out)
    out.family("kafka_server_kafkaserver_brokerstate", "gauge", "3 while the node runs (RUNNING), 0 when stopped",
               (({"node": n}, 3 if node.running else 0) for n, node in sorted(broker.nodes.items())))
    return out.text()


def _partitions(broker: Broker, out: _Out) -> None:
    md = broker.metadata
    count: dict[int, int] = defaultdict(int)
    leaders: dict[int, int] = defaultdict(int)
    for name, info in md.topics.items():
        for p, replicas in enumerate(info.replicas):
            for r in replicas:
                count[r] += 1
            leaders[md.leader(name, p)] += 1
    nodes = sorted(broker.nodes)
    out.family("kafka_server_replicamanager_partitioncount", "gauge", "Partitions with a replica on the node",
               (({"node": n}, count[n]) for n in nodes))
    out.family("kafka_server_replicamanager_leadercount", "gauge", "Partitions the node leads",
               (({"node": n}, leaders[n]) for n in nodes))
    logs = sorted(broker.logs.logs().items())
    out.family("kafka_log_log_size", "gauge", "Bytes on disk of a partition's log (Size)",
               (({"topic": t, "partition": p}, plog.size_bytes) for (t, p), plog in logs))
    out.family("kafka_log_log_logstartoffset", "gauge", "A partition's log start offset",
               (({"topic": t, "partition": p}, plog.log_start_offset) for (t, p), plog in logs))
    out.family("kafka_log_log_logendoffset", "gauge", "A partition's log end offset",
               (({"topic": t, "partition": p}, plog.log_end_offset) for (t, p), plog in logs))
    out.family("kafka_log_log_numlogsegments", "gauge", "Segments of a partition's log",
               (({"topic": t, "partition": p}, len(plog.segments)) for (t, p), plog in logs))


def _group_shards(broker: Broker) -> Iterable[Any]:
    for rt in broker.coordinators.runtimes.values():
        for p in sorted(rt.owned_partitions()):
            shard = rt.shard(p)
            if shard is not None:
                yield shard


def _groups(broker: Broker, out: _Out) -> None:
    from shoal.coordinator.group.state import GroupState

    by_state = {s: 0 for s in GroupState}
    rebalances = 0
    lag_rows: list[tuple[str, str, int, int, int]] = []
    for shard in _group_shards(broker):
        rebalances += shard.classic.completed_rebalances
        for g in shard.groups.values():
            if g.state in by_state:  # classic and consumer groups (share groups below)
                by_state[g.state] += 1
        for group_id, offsets in shard.offset_manager.offsets.items():
            for (topic, partition), om in offsets.items():
                plog = broker.logs.get(topic, partition)
                end = plog.log_end_offset if plog is not None else -1
                lag_rows.append((group_id, topic, partition, om.offset, end))
    base = "kafka_coordinator_group_groupmetadatamanager_numgroups"
    out.family(base, "gauge", "Consumer groups (NumGroups)", [({}, sum(by_state.values()))])
    for state in GroupState:
        out.family(base + state.value.lower(), "gauge", f"Consumer groups in state {state.value}",
                   [({}, by_state[state])])
    out.family("kafka_server_group_coordinator_metrics_group_completed_rebalance_count", "counter",
               "Rebalances completed (a new generation with members) since the coordinators loaded",
               [({}, rebalances)])
    lag_rows.sort()
    out.family("kafka_consumergroup_current_offset", "gauge", "A group's committed offset",
               (({"consumergroup": g, "topic": t, "partition": p}, off) for g, t, p, off, _ in lag_rows))
    out.family("kafka_consumergroup_lag", "gauge", "Log end offset minus the group's committed offset",
               (({"consumergroup": g, "topic": t, "partition": p}, max(end - off, 0))
                for g, t, p, off, end in lag_rows if end >= 0))


def _share_groups(broker: Broker, out: _Out) -> None:
    """Share groups by state, and each share partition's in-flight records and lag (KIP-932, KIP-1103)."""
    from shoal.coordinator.group.share.group import ShareGroup

    states: dict[str, int] = defaultdict(int)
    for shard in _group_shards(broker):
        for g in shard.groups.values():
            if isinstance(g, ShareGroup):
                states[g.state_name] += 1
    out.family("kafka_server_group_coordinator_metrics_share_group_count", "gauge", "Share groups, per state",
               (({"state": st}, n) for st, n in sorted(states.items())))
    rows = []
    for (group, topic, partition), sp in sorted(broker.share.states().items()):
        plog = broker.logs.get(topic, partition)
        lag = sp.lag(plog.high_watermark) if plog is not None else -1
        rows.append(({"group": group, "topic": topic, "partition": partition}, sp, lag))
    out.family("kafka_server_sharepartitionmetrics_inflightmessagecount", "gauge",
               "Records in flight in a share partition (from its start offset to its end offset)",
               ((labels, sp.in_flight_count()) for labels, sp, _ in rows))
    out.family("kafka_server_sharepartitionmetrics_acquiredmessagecount", "gauge",
               "Records of a share partition acquired by a consumer now", ((labels, sp.acquired_count()) for labels, sp, _ in rows))
    out.family("kafka_sharegroup_start_offset", "gauge", "A share partition's start offset",
               ((labels, sp.start_offset) for labels, sp, _ in rows))
    out.family("kafka_sharegroup_lag", "gauge", "Records from a share partition's start offset to the high "
               "watermark not yet acknowledged or archived", ((labels, lag) for labels, _, lag in rows if lag >= 0))


def ready(broker: Broker) -> tuple[bool, str]:
    """Every node listening and every coordinator partition loaded."""
    down = [n for n, node in broker.nodes.items() if not node.running]
    if down:
        return False, f"nodes not running: {down}"
    if broker.coordinators._loads or broker.txn_coordinators._loads:
        return False, "coordinators loading"
    return True, "ready"


class MetricsServer:
    """A minimal HTTP/1.1 server for /metrics, /health and /ready (GET only, one response per connection)."""

    def __init__(self, broker: Broker, host: str, port: int) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        if self.port == 0:
            self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await within(reader.readuntil(b"\r\n\r\n"), 10)
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            if len(request_line) < 2:
                status, body, ctype = 400, "bad request\n", "text/plain"
            else:
                status, body, ctype = self._answer(request_line[0], request_line[1].split("?", 1)[0])
            data = body.encode()
            writer.write(f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {ctype}\r\n"
                         f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass
        except Exception:  # a scrape must never hurt the broker
            log.exception("metrics request failed")
        finally:
            writer.close()

    def _answer(self, method: str, path: str) -> tuple[int, str, str]:
        if method not in ("GET", "HEAD"):
            return 405, "only GET\n", "text/plain"
        if path == "/metrics":
            return 200, render(self.broker), "text/plain; version=0.0.4; charset=utf-8"
        if path in ("/health", "/healthz", "/live"):
            return 200, "ok\n", "text/plain"
        if path in ("/ready", "/readyz"):
            ok, why = ready(self.broker)
            return (200 if ok else 503), why + "\n", "text/plain"
        return 404, "not found: try /metrics, /health or /ready\n", "text/plain"


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
