"""Client-side exceptions.  Broker error codes surface as ``shoal.protocol.errors.KafkaError``."""

from __future__ import annotations

from shoal.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "ErrorCode",
    "KafkaError",
    "ClientError",
    "KafkaTimeoutError",
    "KafkaConnectionError",
    "NoBrokersAvailableError",
    "CommitFailedError",
    "RebalanceInProgressError",
    "NoOffsetForPartitionError",
    "IllegalStateError",
    "ClosedError",
    "AuthenticationError",
    "SaslAuthenticationFailed",
    "SslAuthenticationFailed",
    "error_for",
]


class ClientError(Exception):
    """Base class of errors raised by the client itself (not a broker error code)."""


class KafkaTimeoutError(ClientError, TimeoutError):
    """An operation did not complete within its configured time."""


class KafkaConnectionError(ClientError, ConnectionError):
    """A broker connection failed or was closed while a request was in flight."""


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap servers could be reached."""


class CommitFailedError(ClientError):
    """The commit cannot complete: this member is no longer part of the group's generation."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(
            message
            or "Commit cannot be completed since the group has already rebalanced and assigned "
            "the partitions to another member. This means that the time between subsequent "
            "calls to poll() was longer than max.poll.interval.ms, or that the member was "
            "removed from the group. Rejoin by calling poll() again."
        )


class RebalanceInProgressError(CommitFailedError):
    """The commit hit a rebalance in progress; poll() to complete it, then commit again."""


class NoOffsetForPartitionError(ClientError):
    """No committed offset and auto.offset.reset is 'none'."""

    def __init__(self, partitions: list) -> None:
        super().__init__(f"Undefined offset with no reset policy for partitions: {partitions}")
        self.partitions = partitions


class IllegalStateError(ClientError):
    """The call is not valid in the client's current state."""


class ProducerFencedError(KafkaError):
    """A newer producer with the same transactional.id (or a transaction timeout) fenced this one: fatal."""


class TransactionAbortedError(ClientError):
    """The record was not sent: its transaction was aborted first."""


class ClosedError(IllegalStateError):
    """The client is closed."""


class AuthenticationError(ClientError):
    """Authenticating to a broker failed (Kafka's AuthenticationException): fatal for the call,
    never retried as a lost connection would be."""


class SaslAuthenticationFailed(AuthenticationError):
    """SASL authentication failed; the message is the broker's (Kafka's SaslAuthenticationException).

    ``error_code`` is the broker's (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ...), or
    SASL_AUTHENTICATION_FAILED when the client itself refused the broker's answer.
    """

    def __init__(self, message: str, error_code: int = ErrorCode.SASL_AUTHENTICATION_FAILED) -> None:
        super().__init__(message)
        self.error_code = int(error_code)


class SslAuthenticationFailed(AuthenticationError):
    """The TLS handshake failed: an untrusted or misnamed broker certificate, or a refused client
    certificate (Kafka's SslAuthenticationException)."""


def error_for(code: int, message: str | None = None) -> KafkaError:
    """The KafkaError for a non-zero broker error code."""
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"UNKNOWN_ERROR_CODE_{code}"
    return KafkaError(code, message or name)
