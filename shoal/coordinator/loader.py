"""Reading a coordinator's partition back for replay (see ``shoal.protocol.compacted``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from shoal.protocol import record_batch as rb
from shoal.protocol.compacted import LatestValues

_READ_CHUNK = 8 * 1024 * 1024


def iter_log_chunks(log, start: int, end: int) -> Iterator[tuple[bytes | memoryview, int]]:
    """(buffer of whole batches, next offset) from `start` up to `end`."""
    offset = start
    while offset < end:
        buf = log.read(offset, _READ_CHUNK)
        if not buf:
            return
        last = None
        for h in rb.iter_batches(buf):
            last = h
        if last is None:
            return
        yield buf, last.base_offset + last.last_offset_delta + 1
        offset = last.base_offset + last.last_offset_delta + 1


@dataclass
class LoadedOffsets:
    """`__consumer_offsets` read back: the last committed value per key, and the records of
    transactions still open (per producer id) that a marker has not yet decided."""

    latest: dict[bytes, bytes | None]
    pending: dict[int, dict[bytes, bytes | None]]


def _read(log, transactional: bool) -> LatestValues:
    values = LatestValues(transactional)
    for buf, _next in iter_log_chunks(log, log.log_start_offset, log.log_end_offset):
        values.add(buf)
    return values


def load_offsets_log(log) -> LoadedOffsets:
    """Transaction-aware replay of an offsets partition, in log order."""
    values = _read(log, transactional=True)
    return LoadedOffsets(values.latest, values.pending)


def latest_records(log) -> dict[bytes, bytes | None]:
    """Last value of every key in the log (control batches skipped), in first-seen key order."""
    return _read(log, transactional=False).latest
