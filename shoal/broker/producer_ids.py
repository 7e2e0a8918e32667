"""Producer ids for idempotent producers, unique across restarts.

Ids are handed out from blocks; the end of the current block is persisted
before any id in it is used (as Kafka's AllocateProducerIds does), so a
restart never reuses an id.
"""

from __future__ import annotations

from pathlib import Path

from shoal import fileio

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._next = int(path.read_text().strip()) if path.exists() else 0
        self._block_end = self._next

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            # synced: after a power cut an unsynced block end could come back older, or empty
            fileio.replace_file(self._path, str(self._block_end).encode(), fsync=True)
        pid = self._next
        self._next += 1
        return pid
