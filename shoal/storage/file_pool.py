"""A bound on the segment files a process keeps open.

Kafka keeps every segment of every partition open (and mmaps its indexes),
which ties open files to partitions: at 200,000 partitions a broker reaches
the process's file limit and refuses connections. Here a segment's log file
is opened when it is used and closed, with its index files, when it has been
used less recently than the ``limit`` others (an LRU); the next use opens it
again. Segments of the internal topics are pinned open: the coordinators
read them off the event loop.
"""

from __future__ import annotations

import resource
from collections import OrderedDict
from typing import Protocol


class PooledFile(Protocol):
    def release(self) -> None:
        """Close the file descriptors; they are reopened on the next use."""


def default_limit() -> int:
    """An eighth of the process's open-file limit (connections need the rest), at least 64."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 65536
    return max(64, soft // 8)


class FilePool:
    """LRU of open segments; opening one more than ``limit`` closes the least recently used."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit if limit is not None else default_limit()
        self._open: OrderedDict[PooledFile, None] = OrderedDict()
        self.reopened = 0  # how often a released file was opened again

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, f: PooledFile, again: bool = False) -> None:
        self._open[f] = None
        if again:
            self.reopened += 1
        while len(self._open) > self.limit:
            victim, _ = self._open.popitem(last=False)
            victim.release()

    def used(self, f: PooledFile) -> None:
        try:
            self._open.move_to_end(f)
        except KeyError:
            pass

    def closed(self, f: PooledFile) -> None:
        self._open.pop(f, None)


POOL = FilePool()
