"""The compacted topic: producers of values and tombstones over a few keys, and its invariants.

The topic rolls a segment every kilobyte and the broker looks for cleaning work every few hundred
milliseconds, so compaction (and the removal of old tombstones) runs many times in a run, beside
crashes, power cuts and leadership moves. Checked from a snapshot of each partition's log, taken
in process between two events (so no cleaning pass is half seen), now and then and at the end:

- ``compaction-view``: reading the log from its start to the high watermark and applying each
  record (a tombstone deletes its key) gives, per key, the value of the newest record written
  for it: compaction keeps the last value of every key and never drops a key that was not
  deleted. Keys with a write of unknown outcome (a producer gave up unanswered) are not judged.
- ``compaction-offsets``: a record is only ever seen at the offset it was written at, with the
  key and value it was written with (compaction never moves or alters a record).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from shoal.clock import now_ms
from shoal.protocol import record_batch as rb
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.record_encode import build_batch
from shoal.sim.invariants import log_batches
from shoal.sim.workload import IdempotentProducer
from shoal.storage import StorageError

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.sim.trace import Trace

Record = tuple[bytes, bytes | None]  # key, value (None: a tombstone)

# The compacted topic's configs: small segments so there is something to clean, cleaned as soon as
# anything is dirty, tombstones kept two seconds.
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01",
                 "delete.retention.ms": "2000", "min.compaction.lag.ms": "0"}


class CompactionChecker:
    """Knows every record written to the compacted topic (from the acknowledgements and from the
    logs it has scanned) and judges the logs against them."""

    def __init__(self, trace: Trace, topic: str, partitions: int) -> None:
        self.trace, self.topic, self.partitions = trace, topic, partitions
        self.known: dict[int, dict[int, Record]] = defaultdict(dict)  # partition -> offset -> record
        self.uncertain: set[tuple[int, bytes]] = set()  # (partition, key) with a write of unknown outcome
        self.scans = 0

    def observe(self, node_id: int, token: int, api_key: int, version: int, request: Any, response: Any,
                phase: str) -> None:
        if api_key != ApiKey.PRODUCE or phase != "end" or response is None:
            return
        sent = {(t.name, p.index): p.records for t in request.topic_data for p in t.partition_data}
        for t in response.responses:
            if t.name != self.topic:
                continue
            for p in t.partition_responses:
                if p.error_code == 0:
                    for i, (_h, r) in enumerate(rb.iter_all_records(sent[(t.name, p.index)])):
                        self._saw(p.index, p.base_offset + i, (bytes(r.key or b""), _value(r.value)), "acknowledged")

    def _saw(self, p: int, offset: int, record: Record, how: str) -> None:
        before = self.known[p].setdefault(offset, record)
        if before != record:
            self.trace.violation("compaction-offsets", f"{self.topic}-{p}@{offset}: {how} {record!r}, "
                                                       f"known as {before!r}")

    def check(self, broker: Broker) -> None:
        """Scan every partition's log (if it is open) and judge it."""
        for p in range(self.partitions):
            plog = broker.logs.get(self.topic, p)
            if plog is None or plog.offline:
                continue
            try:
                scanned = _scan(plog)
            except StorageError:
                continue  # closed under a restart
            self.scans += 1
            hw = plog.high_watermark
            actual: dict[bytes, bytes | None] = {}
            for offset, record in scanned:
                self._saw(p, offset, record, "read")
                actual[record[0]] = record[1]
            expected: dict[bytes, bytes | None] = {}
            for offset in sorted(o for o in self.known[p] if o < hw):
                key, value = self.known[p][offset]
                expected[key] = value
            for key in sorted(set(expected) | set(actual)):
                if (p, key) in self.uncertain:
                    continue
                if expected.get(key) != actual.get(key):
                    self.trace.violation("compaction-view", f"{self.topic}-{p} key {key!r}: the log reads "
                                                            f"{actual.get(key)!r}, the newest write was "
                                                            f"{expected.get(key)!r}")

    async def keep_checking(self, broker_of: Any, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s)
            self.check(broker_of())


def _value(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _scan(plog: Any) -> list[tuple[int, Record]]:
    """(offset, record) of every data record from the log start to the high watermark."""
    return [(r.offset, (bytes(r.key or b""), _value(r.value)))
            for buf, h in log_batches(plog, plog.high_watermark) if not h.is_control
            for r in rb.iter_records(buf, h) if r.offset >= plog.log_start_offset]


class KeyedProducer(IdempotentProducer):
    """An idempotent producer of values and tombstones over a few keys of the compacted topic."""

    def __init__(self, *args: Any, compaction: CompactionChecker, keys: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.compaction, self.keys = compaction, keys

    async def run(self) -> None:
        pid, epoch = await self._init()
        seqs: dict[int, int] = defaultdict(int)
        for i in range(self.records):
            p = self.rng.randrange(self.partitions)
            key = f"k{self.rng.randrange(self.keys)}".encode()
            value = None if self.rng.random() < 0.2 else f"{self.name}:{i}".encode()
            batch = build_batch([(now_ms(), key, value, [])], producer_id=pid, producer_epoch=epoch,
                                base_sequence=seqs[p])
            outcome = await self._send(p, batch, f"{self.name}:{i}{'' if value else ' (tombstone)'}".encode())
            if outcome == "refused":
                return
            if outcome == "expired":  # it may have landed or not: that key is not judged from here on
                self.compaction.uncertain.add((p, key))
                epoch, seqs = epoch + 1, defaultdict(int)
            else:
                seqs[p] += 1
            await asyncio.sleep(self.rng.uniform(0.0, 0.2))
