"""Storage-layer exceptions. ``error_code`` holds the Kafka error code the broker answers with."""

from __future__ import annotations


class StorageError(Exception):
    """A log could not be read or written (KAFKA_STORAGE_ERROR, 56)."""

    error_code = 56


class OffsetOutOfRangeError(StorageError):
    """The requested offset is below the log start offset or above the log end offset (1)."""

    error_code = 1


class InvalidConfigError(ValueError):
    """A topic/log configuration value is invalid (INVALID_CONFIG, 40)."""

    error_code = 40
