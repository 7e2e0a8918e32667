"""Invariants, checked while the run goes and once at its end; each failure names its step.

The checker watches every request a node handles and its answer (`SimNetwork.observe`), so it
judges what the broker *did*, including answers the network then lost, and it reads the real
partition logs for the final accounting.

- ``ack-durable``: a produce answered without error lies below the log end (acks=1) or the high
  watermark (acks=all) when it is answered: acknowledging before appending is caught here.
- ``acked-record-lost``: every acknowledged record is, for the rest of the run, at the offset it
  was acknowledged at (readers and the final scan check).
- ``idempotent-duplicate``: a record of an idempotent producer is in the log at most once.
- ``offsets-dense``: data offsets are consecutive (no compaction, no transactions in these
  topics), and reads of one offset always return the same record.
- ``hw-monotonic``: the high watermark a reader is told never goes back.
- ``epoch-fence``: in a partition's log a producer's epoch never goes back: a batch of an epoch
  older than one of the producer's earlier batches or markers is a fenced write that got in.
- ``committed-offset``: what OffsetFetch returns is what the last applied OffsetCommit or
  OffsetDelete of that partition left (or the value of one in flight meanwhile): a coordinator's
  state after a reload from its log equals its state before.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shoal.protocol import record_batch as rb
from shoal.protocol.generated.api_keys import ApiKey

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.sim.trace import Trace

TopicPartition = tuple[str, int]
ADMIN_TOPIC_PREFIX = "adm-"  # the topics of `shoal.sim.admin`


def log_batches(plog: Any, end: int) -> Iterator[tuple[bytes | memoryview, rb.BatchHeader]]:
    """(buffer, header) of every batch of ``plog`` from its start up to ``end``, read in process
    (the final scans and the compaction checks)."""
    offset = plog.log_start_offset
    while offset < end:
        buf = plog.read(offset, 1 << 20, max_offset=end)
        if not buf:
            return
        for h in rb.iter_batches(buf):
            yield buf, h
            offset = h.last_offset + 1


class EpochOrder:
    """The ``epoch-fence`` invariant over one partition's log, batch by batch in offset order."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.newest: dict[int, tuple[int, int]] = {}  # producer id -> (newest epoch so far, its offset)

    def went_back(self, h: rb.BatchHeader) -> str | None:
        """What is wrong with ``h`` (the next batch), or None."""
        if h.producer_id < 0:
            return None
        epoch, at = self.newest.get(h.producer_id, (-1, -1))
        if h.producer_epoch < epoch:
            return (f"{self.where}@{h.base_offset}: producer {h.producer_id} epoch {h.producer_epoch} after "
                    f"its epoch {epoch} at offset {at}")
        self.newest[h.producer_id] = (h.producer_epoch, h.base_offset)
        return None


@dataclass
class _OffsetOp:
    """One OffsetCommit (value) or OffsetDelete (None) a coordinator handled."""

    start: int
    value: int | None
    end: int | None = None
    ok: bool = False


@dataclass
class Checker:
    """Watches the broker through the network; `final_check` scans the logs at the end."""

    trace: Trace
    acked_at: dict[tuple[TopicPartition, int], bytes] = field(default_factory=dict)
    acked_where: dict[bytes, tuple[TopicPartition, int]] = field(default_factory=dict)
    read_at: dict[tuple[TopicPartition, int], bytes] = field(default_factory=dict)
    read_where: dict[bytes, tuple[TopicPartition, int]] = field(default_factory=dict)
    max_hw: dict[TopicPartition, int] = field(default_factory=dict)
    broker: Broker | None = None
    _clock: int = 0  # orders the start and end of requests handled
    _offset_ops: dict[tuple[str, str, int], list[_OffsetOp]] = field(default_factory=dict)
    _open_ops: dict[int, list[tuple[tuple[str, str, int], _OffsetOp]]] = field(default_factory=dict)
    _fetching: dict[int, int] = field(default_factory=dict)
    acked_records: int = 0
    truncated: dict[TopicPartition, int] = field(default_factory=dict)  # where a lying disk cut the log
    unchecked_topics: set[str] = field(default_factory=set)  # judged by a checker of their own (compaction)

    def lost_to_a_lie(self, broker: Broker, partition_dirs: list[str]) -> None:
        """A power cut took acknowledged records from these partitions, which a lying fsync had
        claimed durable: no broker can keep them, so the records from each log's new end on are
        forgotten (and the high watermark may go back to it). Nothing else is excused."""
        for name in partition_dirs:
            topic, _, p = name.rpartition("-")
            tp = (topic, int(p))
            plog = broker.logs.get(*tp)
            end = 0 if plog is None else plog.log_end_offset
            self.truncated[tp] = end
            for table, where in ((self.acked_at, self.acked_where), (self.read_at, self.read_where)):
                for key in [k for k in table if k[0] == tp and k[1] >= end]:
                    value = table.pop(key)
                    if where.get(value) == key:
                        del where[value]
            self.max_hw[tp] = min(self.max_hw.get(tp, -1), end)
            self.trace.emit(f"{tp[0]}-{tp[1]} lost acknowledged records from offset {end} (a lying fsync)")

    def fail(self, invariant: str, detail: str) -> None:
        self.trace.violation(invariant, detail)

    # ------------------------------------------------------------------ observer
    def observe(self, node_id: int, token: int, api_key: int, version: int, request: Any, response: Any,
                phase: str) -> None:
        self._clock += 1
        if api_key == ApiKey.PRODUCE and phase == "end" and response is not None:
            self._produced(request, response)
        elif api_key in (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_DELETE):
            self._offset_op(token, api_key, request, response, phase)
        elif api_key == ApiKey.OFFSET_FETCH:
            if phase == "start":
                self._fetching[token] = self._clock
            elif response is not None:
                self._offset_fetched(request, response, self._fetching.pop(token, self._clock))

    # ------------------------------------------------------------------ produce
    def _produced(self, request: Any, response: Any) -> None:
        sent = {(t.name, p.index): p.records for t in request.topic_data for p in t.partition_data}
        for t in response.responses:
            for p in t.partition_responses:
                if p.error_code != 0:
                    continue
                tp = (t.name, p.index)
                records = [r.value for _, r in rb.iter_all_records(sent[tp])]
                self._check_durable(tp, p.base_offset + len(records) - 1, request.acks)
                if t.name.startswith(ADMIN_TOPIC_PREFIX) or t.name in self.unchecked_topics:
                    continue  # an admin deletes records and topics of its own: nothing there must stay
                for i, value in enumerate(records):
                    self._acked(tp, p.base_offset + i, bytes(value or b""))

    def _check_durable(self, tp: TopicPartition, last: int, acks: int) -> None:
        if self.broker is None:
            return
        plog = self.broker.logs.get(*tp)
        if plog is None:
            self.fail("ack-durable", f"{tp[0]}-{tp[1]} acknowledged offset {last} but has no log")
            return
        bound, what = (plog.high_watermark, "high watermark") if acks == -1 else (plog.log_end_offset, "log end")
        if last >= bound:
            self.fail("ack-durable", f"{tp[0]}-{tp[1]} acknowledged up to offset {last} (acks={acks}) "
                                     f"with its {what} at {bound}")

    def _acked(self, tp: TopicPartition, offset: int, value: bytes) -> None:
        where = self.acked_where.get(value)
        if where is not None and where != (tp, offset):
            self.fail("idempotent-duplicate", f"{value!r} acknowledged at {where[0]}@{where[1]} and {tp}@{offset}")
        prior = self.acked_at.get((tp, offset))
        if prior is not None and prior != value:
            self.fail("acked-record-lost", f"{tp}@{offset} acknowledged as {prior!r}, then as {value!r}")
        if where is None:
            self.acked_records += 1
        self.acked_at[(tp, offset)] = value
        self.acked_where[value] = (tp, offset)
        seen = self.read_at.get((tp, offset))
        if seen is not None and seen != value:
            self.fail("acked-record-lost", f"{tp}@{offset} acknowledged as {value!r} but reads as {seen!r}")

    # ------------------------------------------------------------------ reads
    def record_read(self, tp: TopicPartition, offset: int, value: bytes, who: str) -> None:
        """A reader got ``value`` at ``offset`` of ``tp``."""
        prior = self.read_at.get((tp, offset))
        if prior is not None and prior != value:
            self.fail("offsets-dense", f"{who}: {tp}@{offset} read as {value!r}, earlier as {prior!r}")
        acked = self.acked_at.get((tp, offset))
        if acked is not None and acked != value:
            self.fail("acked-record-lost", f"{who}: {tp}@{offset} acknowledged as {acked!r}, reads as {value!r}")
        where = self.read_where.get(value)
        if where is not None and where != (tp, offset):
            self.fail("idempotent-duplicate", f"{who}: {value!r} at {where[0]}@{where[1]} and {tp}@{offset}")
        self.read_at[(tp, offset)] = value
        self.read_where.setdefault(value, (tp, offset))

    def high_watermark(self, tp: TopicPartition, hw: int, who: str) -> None:
        before = self.max_hw.get(tp, -1)
        if hw < before:
            self.fail("hw-monotonic", f"{who}: {tp} high watermark {hw} after {before}")
        else:
            self.max_hw[tp] = hw

    # ------------------------------------------------------------------ committed offsets
    def _offset_op(self, token: int, api_key: int, request: Any, response: Any, phase: str) -> None:
        if phase == "start":
            ops = []
            for t in request.topics:
                for p in t.partitions:
                    value = p.committed_offset if api_key == ApiKey.OFFSET_COMMIT else None
                    key = (request.group_id, t.name, p.partition_index)
                    op = _OffsetOp(self._clock, value)
                    self._offset_ops.setdefault(key, []).append(op)
                    ops.append((key, op))
            self._open_ops[token] = ops
            return
        ops = self._open_ops.pop(token, [])
        codes = _partition_codes(api_key, response)
        for key, op in ops:
            op.end = self._clock
            op.ok = codes.get(key[1:]) == 0

    def _offset_fetched(self, request: Any, response: Any, start: int) -> None:
        if response.error_code != 0:
            return
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != 0:
                    continue
                key = (request.group_id, t.name, p.partition_index)
                got = None if p.committed_offset < 0 else p.committed_offset
                allowed = self._allowed_offsets(key, start, self._clock)
                if got not in allowed:
                    self.fail("committed-offset", f"group {key[0]} {key[1]}-{key[2]}: OffsetFetch returned "
                                                  f"{got}, but the commits and deletes applied allow only "
                                                  f"{sorted(allowed, key=lambda v: -1 if v is None else v)}")

    def _allowed_offsets(self, key: tuple[str, str, int], start: int, end: int) -> set[int | None]:
        """Values a read between ``start`` and ``end`` may see: the last op applied before it began,
        and every op that overlapped it (whether or not it ended well)."""
        last: _OffsetOp | None = None
        allowed: set[int | None] = set()
        for op in self._offset_ops.get(key, []):
            if op.end is not None and op.end < start:
                if op.ok and (last is None or op.end > (last.end or 0)):
                    last = op
            elif op.start < end:
                allowed.add(op.value)
        allowed.add(None if last is None else last.value)
        return allowed

    # ------------------------------------------------------------------ the end
    def final_check(self, broker: Broker, topics: dict[str, int]) -> None:
        """Scan every data partition's log: dense offsets, no duplicates, every ack present."""
        for topic, partitions in topics.items():
            for p in range(partitions):
                self._scan((topic, p), broker.partition_log(topic, p))

    def _scan(self, tp: TopicPartition, plog: Any) -> None:
        found: dict[int, bytes] = {}
        where: dict[bytes, int] = {}
        epochs = EpochOrder(f"{tp[0]}-{tp[1]}")
        expected = plog.log_start_offset
        for buf, h in log_batches(plog, plog.log_end_offset):
            if (wrong := epochs.went_back(h)) is not None:
                self.fail("epoch-fence", wrong)
            if h.base_offset != expected:
                self.fail("offsets-dense", f"{tp}: batch at {h.base_offset}, expected {expected}")
            expected = h.base_offset + h.last_offset_delta + 1
            for r in rb.iter_records(buf, h):
                value = bytes(r.value or b"")
                if value in where:
                    self.fail("idempotent-duplicate", f"{tp}: {value!r} at {where[value]} and {r.offset}")
                where[value] = r.offset
                found[r.offset] = value
        for (atp, off), value in self.acked_at.items():
            if atp == tp and found.get(off) != value:
                self.fail("acked-record-lost", f"{tp}@{off}: acknowledged {value!r}, log has {found.get(off)!r}")


def _partition_codes(api_key: int, response: Any) -> dict[tuple[str, int], int]:
    if response is None:
        return {}
    top = getattr(response, "error_code", 0) if api_key == ApiKey.OFFSET_DELETE else 0
    codes = {}
    for t in response.topics:
        for p in t.partitions:
            codes[(t.name, p.partition_index)] = top or p.error_code
    return codes
