"""Fetching: the buffer of completed fetches, poll accounting, and the fetch requests."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterator
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.record_batch import CONTROL_ABORT, control_type, iter_batches, iter_records

from .cluster import cancel_and_wait
from .errors import KafkaConnectionError, KafkaTimeoutError, error_for
from .protocol import request_class
from .structs import ConsumerRecord, TopicPartition, by_topic
from .subscription import SubscriptionState

log = logging.getLogger(__name__)


class CompletedFetch:
    """The record data one fetch returned for one partition, consumed lazily.

    Records before ``fetch_offset`` (a batch may start earlier) and control batches
    are skipped.  ``next_offset`` is where the next fetch must start once this is
    drained: past the last batch, even if its tail records were all skipped.

    At read_committed the broker lists the aborted transactions overlapping the
    data; as Kafka's client does, a producer's batches are dropped from its
    aborted transaction's first offset until its ABORT marker.
    """

    def __init__(self, tp: TopicPartition, fetch_offset: int, data: Any,
                 aborted: list[tuple[int, int]] | None = None) -> None:
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.next_offset = fetch_offset
        self._aborted = sorted(aborted) if aborted else []  # (first offset, producer id)
        self._data = data
        self._iter: Iterator[ConsumerRecord | int] = self._records()
        self._peeked: ConsumerRecord | None = None
        self.drained = False

    def _records(self) -> Iterator[ConsumerRecord | int]:
        tp = self.tp
        pending = self._aborted
        aborted_pids: set[int] = set()
        for h in iter_batches(self._data):
            while pending and pending[0][0] <= h.last_offset:
                aborted_pids.add(pending.pop(0)[1])
            if h.last_offset < self.fetch_offset:
                continue
            skip = False
            if aborted_pids and h.is_transactional and h.producer_id in aborted_pids:
                if h.is_control:
                    if control_type(self._data, h) == CONTROL_ABORT:
                        aborted_pids.discard(h.producer_id)
                else:
                    skip = True
            if not skip and not h.is_control:
                for r in iter_records(self._data, h):
                    if r.offset < self.next_offset:
                        continue
                    yield ConsumerRecord(tp.topic, tp.partition, r.offset, r.timestamp, h.timestamp_type,
                                         r.key, r.value, r.headers)
            # The int marks "everything up to here consumed" (control/compacted tails).
            yield h.last_offset + 1

    def take(self, n: int) -> list[ConsumerRecord]:
        """Up to ``n`` records; advances ``next_offset``."""
        out: list[ConsumerRecord] = []
        if self._peeked is not None and n > 0:
            out.append(self._peeked)
            self.next_offset = self._peeked.offset + 1
            self._peeked = None
        while len(out) < n:
            item = self._next_record(advance=True)
            if item is None:
                break
            out.append(item)
            self.next_offset = item.offset + 1
        if len(out) == n and not self.drained:
            # Look ahead so that a fetch whose remaining batches hold no records counts as drained.
            item = self._next_record(advance=self._peeked is None)
            if item is not None:
                self._peeked = item
        return out

    def _next_record(self, advance: bool) -> ConsumerRecord | None:
        """The next record (None: drained); the offsets past batches without records advance
        ``next_offset`` when ``advance``."""
        for item in self._iter:
            if not isinstance(item, int):
                return item
            if advance:
                self.next_offset = max(self.next_offset, item)
        self.drained = True
        return None


class FetchBuffer:
    """Completed fetches waiting for ``poll``; ``collect`` applies ``max.poll.records``."""

    def __init__(self) -> None:
        self._fetches: deque[CompletedFetch] = deque()
        self.wakeup = asyncio.Event()  # set when records arrive (binds to a loop when first awaited)

    def add(self, cf: CompletedFetch) -> None:
        self._fetches.append(cf)
        self.wakeup.set()

    def buffered_partitions(self) -> set[TopicPartition]:
        return {cf.tp for cf in self._fetches if not cf.drained}

    def __len__(self) -> int:
        return len(self._fetches)

    def clear(self) -> None:
        self._fetches.clear()

    def has_fetchable(self, subs: SubscriptionState) -> bool:
        return any(not cf.drained and subs.is_fetchable(cf.tp) for cf in self._fetches)

    def collect(self, subs: SubscriptionState, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Take up to ``max_records`` records, in fetch order, updating positions.

        Data for partitions no longer assigned, or whose position moved (seek), is
        dropped; data for paused partitions stays for later.
        """
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        remaining = max_records
        kept: deque[CompletedFetch] = deque()
        while self._fetches and remaining > 0:
            cf = self._fetches.popleft()
            st = subs.assignment.get(cf.tp)
            if st is None or cf.drained:
                continue
            if st.paused:
                kept.append(cf)
                continue
            if st.position != cf.next_offset:
                continue  # stale: the application seeked away
            recs = cf.take(remaining)
            st.position = cf.next_offset
            if recs:
                out.setdefault(cf.tp, []).extend(recs)
                remaining -= len(recs)
            if not cf.drained:
                kept.append(cf)
        kept.extend(self._fetches)
        self._fetches = kept
        if not self.has_fetchable(subs):
            self.wakeup.clear()
        return out


class Fetcher:
    """Sends FetchRequests to partition leaders and fills the FetchBuffer."""

    def __init__(self, client: Any, subs: SubscriptionState, config: dict[str, Any]) -> None:
        self.client = client
        self.subs = subs
        self.config = config
        self.buffer = FetchBuffer()
        self._in_flight: dict[int, asyncio.Task] = {}
        self.isolation = 1 if config["isolation.level"] == "read_committed" else 0
        self.needs_metadata = False
        self.reset_requests: list[TopicPartition] = []
        self.errors: list[BaseException] = []

    def fetchable_by_node(self) -> dict[int, list[TopicPartition]]:
        buffered = self.buffer.buffered_partitions()
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in self.subs.assigned():
            if tp in buffered or not self.subs.is_fetchable(tp):
                continue
            leader = self.client.cluster.leader_for(tp.topic, tp.partition)
            if leader < 0:
                self.needs_metadata = True
                continue
            if leader in self._in_flight:
                continue
            by_node.setdefault(leader, []).append(tp)
        return by_node

    def send_fetches(self) -> None:
        """Start a fetch to every leader with fetchable partitions and none in flight."""
        for node, tps in self.fetchable_by_node().items():
            self._in_flight[node] = asyncio.get_running_loop().create_task(self._fetch(node, tps))

    async def _fetch(self, node: int, tps: list[TopicPartition]) -> None:
        cfg = self.config
        cls = request_class(ApiKey.FETCH)
        try:
            positions = {tp: self.subs.assignment[tp].position for tp in tps}
            topics = by_topic((tp, cls.FetchPartition(partition=tp.partition, fetch_offset=pos,
                                                      partition_max_bytes=cfg["max.partition.fetch.bytes"]))
                              for tp, pos in positions.items())
            req = cls(
                replica_id=-1,
                max_wait_ms=cfg["fetch.max.wait.ms"],
                min_bytes=cfg["fetch.min.bytes"],
                max_bytes=cfg["fetch.max.bytes"],
                isolation_level=self.isolation,
                session_id=0,
                session_epoch=-1,
                topics=[cls.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
                rack_id=cfg.get("client.rack") or "",
            )
            conn = await self.client.conn(node)
            timeout = cfg["request.timeout.ms"] + cfg["fetch.max.wait.ms"]
            resp = await conn.send(req, timeout_ms=timeout)
            self._handle(resp, positions)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
            log.debug("fetch from node %s failed: %r", node, e)
            self.needs_metadata = True
            await asyncio.sleep(cfg["retry.backoff.ms"] / 1000)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - surfaced to the application by poll
            log.exception("fetch from node %s failed", node)
            self.errors.append(e)
        finally:
            self._in_flight.pop(node, None)
            self.buffer.wakeup.set()

    def _handle(self, resp: Any, positions: dict[TopicPartition, int | None]) -> None:
        if getattr(resp, "error_code", 0):
            self.needs_metadata = True
            return
        for t in resp.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                st = self.subs.assignment.get(tp)
                if st is None or tp not in positions or st.position != positions[tp]:
                    continue  # unassigned or seeked while in flight
                code = p.error_code
                if code == 0:
                    data = p.records
                    if data is not None and len(data) > 0:
                        aborted = [(a.first_offset, a.producer_id) for a in p.aborted_transactions or ()]
                        self.buffer.add(CompletedFetch(tp, st.position, data, aborted))
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self.reset_requests.append(tp)
                elif code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
                              ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
                              ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_ID):
                    self.needs_metadata = True
                else:
                    self.errors.append(error_for(code, f"fetch {tp}"))

    async def close(self) -> None:
        for t in list(self._in_flight.values()):
            await cancel_and_wait(t)
        self._in_flight.clear()
