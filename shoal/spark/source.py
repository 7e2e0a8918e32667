"""The Kafka source: batch reads and streaming reads (micro-batches), as Spark's Kafka source.

Planning runs on the driver (topics and partitions, start and end offsets);
each Spark partition reads one offset range of one topic-partition on an
executor, straight from record batches into Arrow.

Offsets, in the checkpoint and in ``startingOffsets``, are Spark-Kafka's JSON:
``{"topic": {"0": 23}}``. A streaming query:

- starts from ``startingOffsets`` / ``startingTimestamp`` /
  ``startingOffsetsByTimestamp`` (new queries only; a restart resumes from the
  checkpoint); partitions and pattern-matched topics that appear later are read
  from their earliest offset;
- limits a micro-batch to ``maxOffsetsPerTrigger`` records, spread over the
  partitions by their backlog, and waits for ``minOffsetsPerTrigger`` records up
  to ``maxTriggerDelay``; ``Trigger.AvailableNow`` reads what was there when the
  query started, in batches within those limits;
- with ``commitOffsetsToGroup``, commits each finished batch's end offsets to
  that consumer group, so lag tools see the query. Spark tells a source that a
  batch finished only when it plans the next one, so the commit happens there
  (and in ``commit``): the last batch is committed too, when the query
  checks for new data after it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from shoal.spark.options import EARLIEST, LATEST, OptionError, SourceOptions, source_options

_log = logging.getLogger(__name__)

Offsets = dict[tuple[str, int], int]


class KafkaRange(InputPartition):
    """One Spark partition: offsets [start, until) of one topic-partition."""

    def __init__(self, topic: str, partition: int, start: int, until: int) -> None:
        super().__init__((topic, partition, start, until))
        self.topic, self.partition, self.start, self.until = topic, partition, start, until


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = o
    return out


def from_json(data: dict[str, Any]) -> Offsets:
    return {(t, int(p)): int(o) for t, parts in data.items() for p, o in parts.items()}


class _Planner:
    """Driver-side planning shared by the batch and the streaming reader."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._io: Any = None

    @property
    def io(self) -> Any:
        if self._io is None:
            from shoal.spark.kafka_io import KafkaIO

            self._io = KafkaIO.shared(self.opts.client)
        return self._io

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_io"] = None  # connections stay in the process that opened them
        return state

    def _with_retries(self, call: Callable[[], Any]) -> Any:
        """Spark's ``fetchOffset.numRetries`` attempts, ``fetchOffset.retryIntervalMs`` apart, for the
        look-ups of partitions and offsets (a user's mistake in the options is not tried again)."""
        attempts = self.opts.fetch_offset_attempts
        for attempt in range(1, attempts + 1):
            try:
                return call()
            except OptionError:
                raise
            except Exception:
                if attempt >= attempts:
                    raise
                time.sleep(self.opts.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def topic_partitions(self) -> list[tuple[str, int]]:
        return self._with_retries(self._topic_partitions)

    def _topic_partitions(self) -> list[tuple[str, int]]:
        o = self.opts
        if o.strategy == "assign":
            counts = self.io.partitions(list(o.assign))
            missing = [(t, p) for t, ps in o.assign.items() for p in ps if p >= counts.get(t, 0)]
            if missing:
                raise OptionError(f"Assigned partitions do not exist: {sorted(missing)}")
            return sorted((t, p) for t, ps in o.assign.items() for p in ps)
        if o.strategy == "subscribe":
            counts = self.io.partitions(o.topics)
            missing = [t for t in o.topics if t not in counts]
            if missing:  # as Spark's connector, whose Admin describeTopics fails the query
                from shoal.client.errors import error_for
                from shoal.protocol.errors import ErrorCode

                raise error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"UnknownTopicOrPartitionException: subscribed topics do not exist: {missing}")
        else:
            counts = self.io.matching(o.pattern)
        return sorted((t, p) for t, n in counts.items() for p in range(n))

    def list_offsets(self, tps: list[tuple[str, int]], spec: int) -> Offsets:
        from shoal.client.structs import TopicPartition

        res = self._with_retries(lambda: self.io.list_offsets({TopicPartition(t, p): spec for t, p in tps},
                                                              self.opts.read_committed))
        return {(tp.topic, tp.partition): off for tp, off in res.items()}

    def resolve(self, tps: list[tuple[str, int]], which: str, late: bool = False) -> Offsets:
        """Offsets for ``startingOffsets`` (which="starting") or ``endingOffsets`` ("ending").

        ``late``: earliest and latest stay -2 and -1, for the executor to look up when it reads (as Spark's
        connector binds them in batch queries, so a retention pass between planning and reading does
        not fail the read); otherwise every offset is looked up now.
        """
        spec = self.opts.starting if which == "starting" else self.opts.ending
        if spec.kind in ("earliest", "latest"):
            bound = EARLIEST if spec.kind == "earliest" else LATEST
            return dict.fromkeys(tps, bound) if late else self.list_offsets(tps, bound)
        if spec.kind == "offsets":
            given = {(t, p): o for t, ps in spec.offsets.items() for p, o in ps.items()}
            if set(given) != set(tps):
                raise OptionError(f"{which}Offsets must name every partition read: it names {sorted(given)}, "
                                  f"the query reads {sorted(tps)}")
            out = dict(given)
            for spec_value in () if late else (EARLIEST, LATEST):
                special = [tp for tp, o in given.items() if o == spec_value]
                out.update(self.list_offsets(special, spec_value) if special else {})
            return out
        if spec.kind == "timestamp":
            times = dict.fromkeys(tps, spec.timestamp)
        else:
            times = {(t, p): ts for t, ps in spec.offsets.items() for p, ts in ps.items()}
            if set(times) != set(tps):
                raise OptionError(f"{which}OffsetsByTimestamp must name every partition read: it names "
                                  f"{sorted(times)}, the query reads {sorted(tps)}")
        out = {}
        for tp, ts in times.items():
            found = self.list_offsets([tp], ts)[tp]
            if found < 0:
                if which == "starting" and self.opts.timestamp_strategy == "error":
                    raise OptionError(f"No offset of {tp[0]}-{tp[1]} has a timestamp at or after {ts} "
                                      "(startingOffsetsByTimestampStrategy=error)")
                found = self.list_offsets([tp], LATEST)[tp]
            out[tp] = found
        return out

    def ranges(self, start: Offsets, end: Offsets) -> list[KafkaRange]:
        """Spark partitions for [start, end): one per topic-partition, split by ``minPartitions`` and
        ``maxRecordsPerPartition``."""
        # A partition not in `start` is new to a stream: its end is where it begins (see latestOffset).
        begin = {**{tp: o for tp, o in end.items() if tp not in start}, **start}
        gone = sorted(tp for tp in start if tp not in end)
        if gone:
            self._data_loss(f"{', '.join(f'{t}-{p}' for t, p in gone)} are gone")
        ranges = []
        for tp, until in sorted(end.items()):
            s = begin[tp]
            if s >= 0 and until >= 0:  # (-2 and -1 are bound when the range is read)
                if until < s:
                    self._data_loss(f"Partition {tp[0]}-{tp[1]}'s offset was changed from {s} to {until}, some "
                                    "data may have been missed")
                if until <= s:
                    continue
            ranges.append((tp, s, until))
        return self._split(ranges)

    def _data_loss(self, what: str) -> None:
        """Spark's reportDataLoss: fail the query (failOnDataLoss=true), or warn and go on."""
        from shoal.spark.kafka_io import DataLossError

        if self.opts.fail_on_data_loss:
            raise DataLossError(f"{what}. Some data may have been lost because they are not available in Kafka "
                                "any more; either the data was aged out by Kafka or the topic may have been "
                                "deleted before all the data in the topic was processed. If you don't want your "
                                "streaming query to fail on such cases, set the source option \"failOnDataLoss\" "
                                "to \"false\".")
        _log.warning("%s. Some data may have been lost (failOnDataLoss=false: going on).", what)

    def _split(self, ranges: list[tuple[tuple[str, int], int, int]]) -> list[KafkaRange]:
        want = self.opts.min_partitions
        total = sum(u - s for _, s, u in ranges)
        out = []
        most = self.opts.max_records_per_partition
        for (t, p), s, u in ranges:
            if s < 0 or u < 0:  # bound at read time: its size is not known here
                out.append(KafkaRange(t, p, s, u))
                continue
            parts = 1
            if want and want > len(ranges) and total:
                parts = max(round((u - s) / total * want), 1)
            if most:
                parts = max(parts, math.ceil((u - s) / most))
            step = math.ceil((u - s) / parts)
            for a in range(s, u, step):
                out.append(KafkaRange(t, p, a, min(a + step, u)))
        return out


def read_range(opts: SourceOptions, part: KafkaRange) -> Iterator[Any]:
    """Executor side: the rows of one offset range, as Arrow record batches."""
    from shoal.client.cluster import now_ms
    from shoal.client.errors import KafkaTimeoutError, error_for
    from shoal.client.structs import TopicPartition
    from shoal.protocol.errors import ErrorCode
    from shoal.spark.arrow_records import decode_fetch
    from shoal.spark.kafka_io import DataLossError, KafkaIO

    if not isinstance(part, KafkaRange):
        return  # Spark's one placeholder partition when a plan has no ranges (no topic matched)
    io = KafkaIO.shared(opts.client)
    tp = TopicPartition(part.topic, part.partition)
    offset, until = part.start, part.until
    for bound in {offset, until} & {EARLIEST, LATEST}:  # bound now, at read time (a batch query)
        found = io.list_offsets({tp: bound}, opts.read_committed)[tp]
        offset, until = (found if offset == bound else offset), (found if until == bound else until)
    last_progress = now_ms()
    ahead: tuple[int, Any] | None = None  # (offset, future of its fetch)
    while offset < until:
        if ahead is not None and ahead[0] == offset:
            f = ahead[1].result()
        else:
            f = io.fetch(tp, offset, opts.max_bytes, opts.read_committed)
        ahead = None
        if f.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            # Apache Kafka answers OFFSET_OUT_OF_RANGE with log_start_offset and high_watermark at -1
            # (only shoal fills them in), so the log's bounds come from ListOffsets, as in Spark's connector.
            earliest = io.list_offsets({tp: EARLIEST}, opts.read_committed)[tp]
            if 0 <= offset < earliest:
                if opts.fail_on_data_loss:
                    raise DataLossError(f"{tp.topic}-{tp.partition}: offsets {offset}-{earliest - 1} "
                                        "were deleted before they were read (failOnDataLoss=false skips them)")
                offset = earliest
                continue
            latest = io.list_offsets({tp: LATEST}, opts.read_committed)[tp]
            raise DataLossError(f"{tp.topic}-{tp.partition}: offset {offset} is past the log end "
                                f"{latest}: the topic may have been recreated")
        if f.error:
            raise error_for(f.error, f"fetch {tp.topic}-{tp.partition}")
        if len(f.records):
            d = decode_fetch(f.records, tp.topic, tp.partition, offset, until, aborted=f.aborted,
                             include_headers=opts.include_headers)
            if d.next_offset > offset:
                offset = d.next_offset
                last_progress = now_ms()
                if offset < until:
                    ahead = offset, io.fetch_ahead(tp, offset, opts.max_bytes, opts.read_committed)
                if d.batch is not None:
                    yield d.batch
                continue
            if d.batch is not None:
                yield d.batch
        if now_ms() - last_progress > opts.poll_timeout_ms:
            raise KafkaTimeoutError(f"{tp.topic}-{tp.partition}: nothing at offset {offset} for "
                                    f"{opts.poll_timeout_ms} ms, although the plan reads up to {until}")
        time.sleep(0.05)


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.opts = source_options(options, streaming=False)
        self._planner = _Planner(self.opts)

    def partitions(self) -> list[KafkaRange]:
        tps = self._planner.topic_partitions()
        # Splitting a range needs its size: with minPartitions or maxRecordsPerPartition the offsets are
        # looked up here; otherwise earliest and latest are bound by the executor that reads them.
        late = not (self.opts.min_partitions or self.opts.max_records_per_partition)
        start = self._planner.resolve(tps, "starting", late)
        end = self._planner.resolve(tps, "ending", late)
        return self._planner.ranges(start, end)

    def read(self, partition: KafkaRange) -> Iterator[Any]:
        return read_range(self.opts, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        self.opts = source_options(options, streaming=True)
        self._planner = _Planner(self.opts)
        self._latest: Offsets = {}
        self._target: Offsets | None = None  # Trigger.AvailableNow: read up to here
        self._committed: Offsets | None = None
        self._last_trigger_ms: float | None = None  # when the last batch was let through (minOffsetsPerTrigger)

    # -- offsets ------------------------------------------------------------------
    def initialOffset(self) -> dict:
        tps = self._planner.topic_partitions()
        return to_json(self._planner.resolve(tps, "starting"))

    def getDefaultReadLimit(self) -> ReadLimit:
        # PySpark has no composite limit: with both options set the minimum is applied in latestOffset.
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._planner.topic_partitions()
        self._target = self._planner.list_offsets(tps, LATEST)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        tps = self._planner.topic_partitions()
        existing = set(tps)
        # `start` is the end of the last finished batch: published for the partitions that still exist
        self._commit_group({tp: o for tp, o in begin.items() if tp in existing})
        latest = self._planner.list_offsets(tps, LATEST)
        self._latest = dict(latest)
        if self._target is not None:
            latest = {tp: min(o, self._target[tp]) for tp, o in latest.items() if tp in self._target}
        # As Spark's connector, the end is what the partitions hold now, even below `start` (a topic
        # deleted and recreated): planning the batch then reports the loss (failOnDataLoss), and a
        # partition that vanished is left out of the end.
        end = dict(latest)
        new = [tp for tp in latest if tp not in begin]
        if new:
            # A partition seen for the first time ends this batch at its earliest offset, so that its
            # start is in the offset log: a replayed batch reads the same rows (looking earliest up
            # again after a retention pass would not), and the exactly-once sink relies on that.
            first = self._planner.list_offsets(new, EARLIEST)
            begin, end = {**begin, **first}, {**end, **first}
        if isinstance(limit, ReadAllAvailable):  # Trigger.Once, or no limit set
            return to_json(end)
        backlog = sum(end[tp] - begin[tp] for tp in end)
        if self._target is None and self.opts.min_offsets_per_trigger and self._delay_batch(backlog):
            return start  # not enough yet: no batch until there is, or maxTriggerDelay passed
        if isinstance(limit, ReadMaxRows) and backlog > limit.max_rows:
            end = _rate_limit(begin, end, limit.max_rows)
        return to_json(end)

    def _delay_batch(self, backlog: int) -> bool:
        """Spark's minOffsetsPerTrigger: hold the next batch while fewer records wait, unless
        maxTriggerDelay has passed since the last batch (so the first batch fires at once)."""
        now = time.monotonic() * 1000
        if self._last_trigger_ms is not None and now - self._last_trigger_ms < self.opts.max_trigger_delay_ms:
            if backlog < (self.opts.min_offsets_per_trigger or 0):
                return True
        self._last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> list[KafkaRange]:
        return self._planner.ranges(from_json(start), from_json(end))

    def read(self, partition: KafkaRange) -> Iterator[Any]:
        return read_range(self.opts, partition)

    def commit(self, end: dict) -> None:
        self._commit_group(from_json(end))

    def _commit_group(self, offsets: Offsets) -> None:
        group = self.opts.commit_group
        if not group or not offsets or offsets == self._committed:
            return
        from shoal.client.structs import TopicPartition

        self._planner.io.commit(group, {TopicPartition(t, p): o for (t, p), o in offsets.items()})
        self._committed = dict(offsets)

    def stop(self) -> None:
        pass


def _rate_limit(begin: Offsets, end: Offsets, limit: int) -> Offsets:
    """Spark-Kafka's rate limit: ``limit`` records spread over partitions in proportion to their backlog."""
    sizes = {tp: end[tp] - begin[tp] for tp in end}
    total = sum(sizes.values())
    out = {}
    for tp, size in sizes.items():
        if size <= 0:
            out[tp] = end[tp]
            continue
        prorate = limit * (size / total)
        n = math.ceil(prorate) if prorate < 1 else math.floor(prorate)  # do not starve small partitions
        out[tp] = min(end[tp], begin[tp] + n)
    return out
