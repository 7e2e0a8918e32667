"""The cluster metadata log: one record per change, appended, replayed on start.

As Kafka's KRaft metadata log (`__cluster_metadata`), a change costs one
append of its own records, never a rewrite of the whole state: creating the
ten-thousandth topic costs what creating the first did. Each line is
``<crc32 hex> <json>``; a torn or corrupt tail (a crash mid-append) is cut
off at the last whole record on load. When the log has grown well past the
state it describes, it is rewritten as a snapshot of that state (atomically:
a new file renamed over the old), as KRaft's snapshots bound replay time.

Records (``t`` is the type):
- ``topic``: name, id, replicas (a list per partition), configs
- ``partitions``: name, the replicas of the partitions added
- ``replicas``: name, partition, its new replicas (a reassignment)
- ``delete``: name
- ``topic_configs``: name, configs (the whole set)
- ``broker_configs``: resource ("" the cluster default, or a node id), configs
- ``group_configs``: group, configs (the whole set of a group's dynamic configs)
- ``scram``: op (upsert or delete), user, mechanism, and the salt, keys and iterations
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from shoal import fileio

log = logging.getLogger(__name__)

LOG_NAME = "__cluster_metadata.log"
LEGACY_JSON = "__cluster_metadata.json"  # shoal before the log: a whole-state JSON file


def _line(record: dict[str, Any]) -> bytes:
    body = json.dumps(record, separators=(",", ":")).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


class MetadataLog:
    """Append-only, checksummed metadata records in one file."""

    def __init__(self, directory: Path, fsync: bool = True) -> None:
        self.path = directory / LOG_NAME
        self.legacy = directory / LEGACY_JSON
        self.fsync = fsync
        self.records = 0  # records in the file now (what replay would read)
        self._fd: int | None = None

    def replay(self) -> Iterator[dict[str, Any]]:
        """Every whole record in order; a torn or corrupt tail is truncated away."""
        if not self.path.exists():
            return
        good = 0
        with open(self.path, "rb") as f:
            for raw in f:
                record = self._parse(raw)
                if record is None:
                    log.warning("cluster metadata log: dropping a torn or corrupt tail at byte %d of %s",
                                good, self.path)
                    break
                good += len(raw)
                self.records += 1
                yield record
        if good != self.path.stat().st_size:
            fileio.truncate(self.path, good)

    @staticmethod
    def _parse(raw: bytes) -> dict[str, Any] | None:
        if not raw.endswith(b"\n") or len(raw) < 10 or raw[8:9] != b" ":
            return None
        body = raw[9:-1]
        try:
            if int(raw[:8], 16) != zlib.crc32(body):
                return None
            record = json.loads(body)
        except ValueError:
            return None
        return record if isinstance(record, dict) else None

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Append records as one write (and fsync): a change is on disk when this returns."""
        lines = [_line(r) for r in records]
        if not lines:
            return
        if self._fd is None:
            self._fd = fileio.open_fd(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        fileio.write_all(self._fd, b"".join(lines))
        if self.fsync:
            fileio.fsync(self._fd)
        self.records += len(lines)

    def rewrite(self, records: Iterable[dict[str, Any]]) -> None:
        """Replace the log with ``records`` (a snapshot of the state), atomically."""
        lines = [_line(r) for r in records]
        self.close()
        fileio.replace_file(self.path, b"".join(lines), fsync=self.fsync)
        self.records = len(lines)

    def close(self) -> None:
        if self._fd is not None:
            fileio.close(self._fd)
            self._fd = None

    def read_legacy(self) -> dict[str, Any] | None:
        """The whole-state JSON file older shoal versions wrote, if it is there."""
        if not self.legacy.exists():
            return None
        return json.loads(self.legacy.read_text())
