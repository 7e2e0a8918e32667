"""Fetching: the buffer of completed fetches, poll accounting, and the fetch requests."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

from google_crc32c import value as _crc32c

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_ABORT,
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    CorruptRecordError,
    control_type,
    iter_batches,
)

from .cluster import cancel_and_wait
from .errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from .protocol import request_class
from .records import FetchedBatch, RecordList
from .structs import TopicPartition, by_topic
from .subscription import SubscriptionState

log = logging.getLogger(__name__)

# Fetches buffered for one partition before it is fetched again: the one being consumed and the
# next (pipelining); each holds up to max.partition.fetch.bytes.
MAX_BUFFERED_FETCHES = 2

# Fetch errors that a metadata refresh (a new leader, a recreated topic) answers.
_METADATA_ERRORS = frozenset((
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_ID))


class CompletedFetch:
    """The record data one fetch returned for one partition, consumed lazily.

    Records before ``fetch_offset`` (a batch may start earlier) and control batches
    are skipped.  ``next_offset`` is where the next fetch must start once this is
    drained: past the last batch, even if its tail records were all skipped.

    At read_committed the broker lists the aborted transactions overlapping the
    data; as Kafka's client does, a producer's batches are dropped from its
    aborted transaction's first offset until its ABORT marker.

    A batch that fails its CRC (``check.crcs``) or cannot be read ends the data: the records
    before it are handed out, then ``corrupt`` is raised by ``poll`` with the position left at
    the batch, until the application seeks past it (as Kafka's client does).

    Only the batch headers are read here (one struct unpack a batch); ``take`` hands out
    records as :class:`RecordList` pieces, and a batch's records are decoded when the
    application first looks at them (see records.py).
    """

    def __init__(self, tp: TopicPartition, fetch_offset: int, data: Any,
                 aborted: list[tuple[int, int]] | None = None, check_crcs: bool = True) -> None:
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.next_offset = fetch_offset
        # The data batches with records to hand out, each with the end offset of the batch before
        # it: the position moves there once everything before the batch is consumed (as past
        # control batches and aborted or compacted-away records).
        self._segments: list[tuple[int, FetchedBatch]] = []
        self._seg = 0
        self.end_offset = fetch_offset  # past the last whole batch: where the following fetch starts
        # What the broker had to give when it answered (high watermark, or the last stable offset at
        # read_committed); None: unknown.
        self.available_to: int | None = None
        self.drained = False
        self.corrupt: KafkaError | None = None  # CORRUPT_MESSAGE, as Kafka's CorruptRecordException
        self._scan(data, sorted(aborted) if aborted else [], check_crcs)

    def _scan(self, data: Any, pending: list[tuple[int, int]], check_crcs: bool) -> None:
        tp = self.tp
        fetch_offset = self.fetch_offset
        aborted_pids: set[int] = set()
        i = 0
        prev_end = fetch_offset
        batches = iter_batches(data)
        mv = memoryview(data)
        while True:
            try:
                h = next(batches, None)
            except CorruptRecordError as e:  # an unreadable header: nothing after it can be found
                self.corrupt = error_for(ErrorCode.CORRUPT_MESSAGE,
                                         f"{tp.topic}-{tp.partition} at offset {prev_end}: {e}")
                break
            if h is None:
                break
            last = h.base_offset + h.last_offset_delta
            while i < len(pending) and pending[i][0] <= last:
                aborted_pids.add(pending[i][1])
                i += 1
            if last < fetch_offset:
                continue
            span = None
            if check_crcs:
                # The CRC's copy is where the records are decoded from later (FetchedBatch): one copy.
                span = bytes(mv[h.position + ATTRIBUTES_OFFSET:h.position + h.size])
                if _crc32c(span) != h.crc:
                    self.corrupt = error_for(
                        ErrorCode.CORRUPT_MESSAGE, f"{tp.topic}-{tp.partition}: the batch at offset {h.base_offset} "
                        "fails its CRC check (seek past it to go on)")
                    break
            attrs = h.attributes
            control = attrs & CONTROL_MASK
            skip = False
            if aborted_pids and attrs & TRANSACTIONAL_MASK and h.producer_id in aborted_pids:
                if control:
                    if control_type(data, h) == CONTROL_ABORT:
                        aborted_pids.discard(h.producer_id)
                else:
                    skip = True
            if not skip and not control and h.records_count > 0:
                self._segments.append((prev_end, FetchedBatch(data, h, tp.topic, tp.partition, span)))
            prev_end = last + 1
        self.end_offset = max(prev_end, fetch_offset)

    def take(self, n: int) -> RecordList:
        """Up to ``n`` records; advances ``next_offset``."""
        out = RecordList._lazy()
        segs = self._segments
        remaining = n
        while remaining > 0 and self._seg < len(segs):
            prev_end, b = segs[self._seg]
            if prev_end > self.next_offset:
                self.next_offset = prev_end
            lo = self.next_offset
            avail = b.count_between(lo, b.header.base_offset + b.header.last_offset_delta + 1)
            if avail <= 0:
                self._seg += 1
                continue
            k = min(avail, remaining)
            last = b.offset_after(lo, k - 1)
            out._add(b, lo, last + 1, k)
            remaining -= k
            self.next_offset = last + 1
            if k == avail:
                self._seg += 1
        self._look_ahead()
        return out

    def at_corrupt_batch(self) -> bool:
        """Every record before the corrupt batch is handed out: the next is the batch itself."""
        return self._seg >= len(self._segments)

    def _look_ahead(self) -> None:
        """Move past batches without records left, so that a fetch whose remaining batches hold
        no records counts as drained (and its position moves past them)."""
        segs = self._segments
        while self._seg < len(segs):
            prev_end, b = segs[self._seg]
            self.next_offset = max(self.next_offset, prev_end)
            if b.count_between(self.next_offset, b.header.base_offset + b.header.last_offset_delta + 1) > 0:
                return
            self._seg += 1
        self.next_offset = max(self.next_offset, self.end_offset)
        self.drained = self.corrupt is None  # a corrupt batch stays, for poll to raise at its offset


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

    def buffered_by_partition(self) -> dict[TopicPartition, list[CompletedFetch]]:
        """The undrained fetches of each partition, in order."""
        out: dict[TopicPartition, list[CompletedFetch]] = {}
        for cf in self._fetches:
            if not cf.drained:
                out.setdefault(cf.tp, []).append(cf)
        return out

    def __len__(self) -> int:
        return len(self._fetches)

    def clear(self) -> None:
        self._fetches.clear()

    def has_fetchable(self, subs: SubscriptionState) -> bool:
        return any(not cf.drained and subs.is_fetchable(cf.tp) for cf in self._fetches)

    def collect(self, subs: SubscriptionState, max_records: int) -> dict[TopicPartition, RecordList]:
        """Take up to ``max_records`` records, in fetch order, updating positions.

        Data for partitions no longer assigned, or whose position moved (seek), is
        dropped; data for paused partitions stays for later.
        """
        out: dict[TopicPartition, RecordList] = {}
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
            if cf.corrupt is not None and cf.at_corrupt_batch():
                kept.append(cf)
                if out:  # the records before it first; the next poll raises
                    break
                kept.extend(self._fetches)
                self._fetches = kept
                raise cf.corrupt
            recs = cf.take(remaining)
            st.position = cf.next_offset
            if recs:
                have = out.get(cf.tp)
                if have is None:
                    out[cf.tp] = recs
                else:  # a later fetch of the same partition (pipelined): one list, in offset order
                    have._merge(recs)
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
        self._closed = False

    def _fetch_offset(self, tp: TopicPartition, buffered: list[CompletedFetch] | None) -> int | None:
        """Where the next fetch of ``tp`` starts: its position, or (pipelining) the end of the one
        fetch still buffered for it; None: not now (enough buffered, or nothing to go on)."""
        if not buffered:
            return self.subs.assignment[tp].position
        if len(buffered) >= MAX_BUFFERED_FETCHES:
            return None
        last = buffered[-1]
        if last.end_offset <= last.fetch_offset or last.corrupt is not None:
            return None
        if last.available_to is not None and last.end_offset >= last.available_to:
            # It reached the end of the log: a fetch now would wait at the broker (fetch.max.wait.ms),
            # and hold back the fetches of the node's other partitions meanwhile.
            return None
        return last.end_offset

    def fetchable_by_node(self) -> dict[int, list[tuple[TopicPartition, int]]]:
        buffered = self.buffer.buffered_by_partition()
        by_node: dict[int, list[tuple[TopicPartition, int]]] = {}
        for tp in self.subs.assigned():
            if not self.subs.is_fetchable(tp):
                continue
            offset = self._fetch_offset(tp, buffered.get(tp))
            if offset is None:
                continue
            leader = self.client.cluster.leader_for(tp.topic, tp.partition)
            if leader < 0:
                self.needs_metadata = True
                continue
            if leader in self._in_flight:
                continue
            by_node.setdefault(leader, []).append((tp, offset))
        return by_node

    def send_fetches(self) -> None:
        """Start a fetch to every leader with fetchable partitions and none in flight.

        A partition whose buffered fetch is not consumed yet is fetched again from where that
        fetch's data ends, so that the next data is on its way while the application works
        through the current one (at most MAX_BUFFERED_FETCHES fetches are buffered a partition).
        """
        if self._closed:
            return
        by_node = self.fetchable_by_node()
        if not by_node:
            return
        # While records wait in the buffer, a fetch must not park at the broker (fetch.max.wait.ms)
        # for partitions at the end of the log: it would hold back the node's next fetch, of the
        # partitions being consumed, until it times out.
        wait = 0 if self.buffer.has_fetchable(self.subs) else self.config["fetch.max.wait.ms"]
        for node, tps in by_node.items():
            self._in_flight[node] = asyncio.get_running_loop().create_task(self._fetch(node, tps, wait))

    async def _fetch(self, node: int, tps: list[tuple[TopicPartition, int]], max_wait_ms: int) -> None:
        cfg = self.config
        cls = request_class(ApiKey.FETCH)
        again = False
        try:
            positions = dict(tps)
            topics = by_topic((tp, cls.FetchPartition(partition=tp.partition, fetch_offset=pos,
                                                      partition_max_bytes=cfg["max.partition.fetch.bytes"]))
                              for tp, pos in positions.items())
            req = cls(
                replica_id=-1,
                max_wait_ms=max_wait_ms,
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
            again = self._handle(resp, positions)
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
        if again:
            # Data came: fetch what follows it now (pipelining), not at the next poll.
            self.send_fetches()

    def _handle(self, resp: Any, positions: dict[TopicPartition, int]) -> bool:
        """Buffer the response's data; True if there was some."""
        if getattr(resp, "error_code", 0):
            self.needs_metadata = True
            return False
        got = False
        buffered = self.buffer.buffered_by_partition()
        for t in resp.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                st = self.subs.assignment.get(tp)
                if st is None or tp not in positions:
                    continue  # unassigned while in flight
                offset = positions[tp]
                before = buffered.get(tp)
                if (before[-1].end_offset if before else st.position) != offset:
                    continue  # seeked while in flight (or the data it was to follow is gone)
                code = p.error_code
                if code == 0:
                    data = p.records
                    if data is not None and len(data) > 0:
                        aborted = [(a.first_offset, a.producer_id) for a in p.aborted_transactions or ()]
                        cf = CompletedFetch(tp, offset, data, aborted, self.config.get("check.crcs", True))
                        lso = p.last_stable_offset
                        cf.available_to = lso if self.isolation and lso >= 0 else p.high_watermark
                        self.buffer.add(cf)
                        buffered.setdefault(tp, []).append(cf)
                        got = True
                elif st.position != offset:
                    # A pipelined fetch's error: the fetch from the position will meet it again.
                    if code in _METADATA_ERRORS:
                        self.needs_metadata = True
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self.reset_requests.append(tp)
                elif code in _METADATA_ERRORS:
                    self.needs_metadata = True
                else:
                    self.errors.append(error_for(code, f"fetch {tp}"))
        return got

    async def close(self) -> None:
        self._closed = True
        for t in list(self._in_flight.values()):
            await cancel_and_wait(t)
        self._in_flight.clear()
