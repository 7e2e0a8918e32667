"""LogManager: every partition log of a broker, over one or more log directories."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from shoal import fileio
from shoal.storage.config import LogConfig
from shoal.storage.log import PartitionLog


def partition_dir_name(topic: str, partition: int) -> str:
    """Kafka's partition directory name ``<topic>-<partition>``."""
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``"my-topic-3"`` -> ``("my-topic", 3)``; None for anything else (topic names may hold '-')."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


class LogManager:
    """Creates, loads, finds and deletes PartitionLogs; runs retention, compaction and timed flushes.

    Layout: ``<log_dir>/<topic>-<partition>/``; a new partition goes to the
    log dir holding the fewest partitions (as Kafka picks).
    """

    def __init__(
        self,
        log_dirs: list[Path],
        defaults: LogConfig,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self.defaults = defaults
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._per_dir: dict[Path, int] = {d: 0 for d in self.log_dirs}  # open logs per log dir
        self.records_compacted = 0  # records compaction removed since this manager started

    def load_existing(
        self, config_for: Callable[[str], LogConfig | None] | None = None, *, now_ms: int | None = None
    ) -> list[tuple[str, int]]:
        """Open every ``<topic>-<partition>`` directory under the log dirs (recovering each).

        ``config_for(topic)`` supplies a topic's LogConfig (None: the defaults).
        Returns the partitions loaded.
        """
        loaded = []
        for d in self.log_dirs:
            for child in sorted(d.iterdir()):
                parsed = parse_partition_dir_name(child.name) if child.is_dir() else None
                if parsed is None or parsed in self._logs:
                    continue
                cfg = (config_for(parsed[0]) if config_for else None) or self.defaults
                self._logs[parsed] = PartitionLog(child, cfg, now_ms=now_ms)
                self._per_dir[d] += 1
                loaded.append(parsed)
        return loaded

    def get_or_create(
        self, topic: str, partition: int, config: LogConfig | None = None, *, now_ms: int | None = None
    ) -> PartitionLog:
        """The log of ``topic``/``partition``, created (in the emptiest log dir) if needed.

        A ``config`` given for an existing log replaces its config.
        """
        key = (topic, partition)
        log = self._logs.get(key)
        if log is not None:
            if config is not None and config != log.config:
                log.update_config(config)
            return log
        name = partition_dir_name(topic, partition)
        existing = [d / name for d in self.log_dirs if (d / name).is_dir()]
        if existing:
            path = existing[0]
        else:
            path = min(self.log_dirs, key=lambda d: self._per_dir[d]) / name
        log = PartitionLog(path, config or self.defaults, now_ms=now_ms)
        self._logs[key] = log
        self._count(log, 1)
        return log

    def _count(self, log: PartitionLog, delta: int) -> None:
        parent = log.dir.parent
        if parent in self._per_dir:
            self._per_dir[parent] += delta

    def move(self, topic: str, partition: int, target_dir: Path) -> PartitionLog | None:
        """Move a partition's files to another of the log dirs (AlterReplicaLogDirs): closed
        cleanly, renamed (copied when the dirs are on different file systems), reopened."""
        target_dir = Path(target_dir)
        if target_dir not in self._per_dir:
            raise ValueError(f"{target_dir} is not a log dir")
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None or log.dir.parent == target_dir:
            return log
        config = log.config
        source = log.dir
        log.close()
        self._count(log, -1)
        destination = target_dir / source.name
        shutil.move(str(source), str(destination))
        moved = PartitionLog(destination, config)
        self._logs[key] = moved
        self._count(moved, 1)
        return moved

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        """A snapshot of all open logs keyed by (topic, partition)."""
        return dict(self._logs)

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """Apply a topic's new LogConfig to all its open partitions."""
        for (t, _), log in self._logs.items():
            if t == topic:
                log.update_config(config)

    def delete_topic(self, topic: str) -> int:
        """Close and remove every partition directory of ``topic``; return how many."""
        keys = [k for k in self._logs if k[0] == topic]
        for key in keys:
            log = self._logs.pop(key)
            self._count(log, -1)
            log.delete()
        # Directories on disk that were never opened (e.g. load_existing not called).
        for d in self.log_dirs:
            for child in d.iterdir():
                parsed = parse_partition_dir_name(child.name) if child.is_dir() else None
                if parsed is not None and parsed[0] == topic:
                    fileio.rmtree(child)
        return len(keys)

    def run_periodic(self, now_ms: int) -> dict[str, int]:
        """Retention for every log, compaction for compacted ones, flush.ms flushes.

        The broker calls this on a timer. Returns counters of what happened.
        """
        stats = {"segments_deleted": 0, "records_compacted": 0, "logs_flushed": 0}
        for log in list(self._logs.values()):
            stats["segments_deleted"] += log.enforce_retention(now_ms)
            if log.needs_compaction(now_ms):
                removed = log.compact(now_ms)
                stats["records_compacted"] += removed
                self.records_compacted += removed
            if log.maybe_flush(now_ms):
                stats["logs_flushed"] += 1
            log.expire_producers(now_ms)
        return stats

    def flush_all(self) -> None:
        for log in self._logs.values():
            log.flush()

    def close(self) -> None:
        """Close every log cleanly (fsync + clean-shutdown marker)."""
        for log in self._logs.values():
            log.close()
        self._logs.clear()
