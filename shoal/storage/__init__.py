"""Partition logs: segments, offset & time indexes, recovery, retention, compaction."""

from shoal.storage.config import TOPIC_CONFIG_NAMES, LogConfig
from shoal.storage.errors import InvalidConfigError, OffsetOutOfRangeError, StorageError
from shoal.storage.log import AppendInfo, PartitionLog
from shoal.storage.manager import LogManager

__all__ = [
    "TOPIC_CONFIG_NAMES",
    "AppendInfo",
    "InvalidConfigError",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "StorageError",
]
