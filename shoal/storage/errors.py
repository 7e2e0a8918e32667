"""Storage-layer exceptions, each carrying the Kafka error the broker answers with (CodedError)."""

from __future__ import annotations

from shoal.protocol.errors import CodedError, ErrorCode


class StorageError(CodedError):
    """A log could not be read or written (KAFKA_STORAGE_ERROR)."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class OffsetOutOfRangeError(StorageError):
    """The requested offset is below the log start offset or above the log end offset."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class InvalidConfigError(CodedError, ValueError):
    """A topic/log configuration value is invalid (INVALID_CONFIG)."""

    error_code = ErrorCode.INVALID_CONFIG
