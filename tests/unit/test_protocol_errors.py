"""Error codes: Kafka's names and numbers, retriability, exception shape."""

from __future__ import annotations

import pickle

import kafka.errors as kerr

from shoal.protocol.errors import DecodeError, ErrorCode, KafkaError, UnsupportedVersionError, is_retriable


def test_known_codes() -> None:
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1 and ErrorCode.NONE == 0
    assert ErrorCode.OFFSET_OUT_OF_RANGE == 1 and ErrorCode.CORRUPT_MESSAGE == 2
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3 and ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.NOT_COORDINATOR == 16 and ErrorCode.ILLEGAL_GENERATION == 22
    assert ErrorCode.UNKNOWN_MEMBER_ID == 25 and ErrorCode.REBALANCE_IN_PROGRESS == 27
    assert ErrorCode.UNSUPPORTED_VERSION == 35 and ErrorCode.MEMBER_ID_REQUIRED == 79
    assert ErrorCode.FENCED_INSTANCE_ID == 82 and ErrorCode.PRODUCER_FENCED == 90
    assert ErrorCode.SHARE_SESSION_LIMIT_REACHED == 133


def test_codes_are_contiguous_and_match_kafka_python_numbers() -> None:
    values = sorted(int(c) for c in ErrorCode)
    assert values == list(range(-1, 134))
    known = {
        cls.errno
        for cls in vars(kerr).values()
        if isinstance(cls, type) and issubclass(cls, kerr.BrokerResponseError) and cls.errno is not None
    }
    assert known <= set(values)


def test_retriable() -> None:
    for code in (
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    ):
        assert is_retriable(code), code
    for code in (
        ErrorCode.NONE,
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.OFFSET_OUT_OF_RANGE,
        ErrorCode.UNKNOWN_SERVER_ERROR,
    ):
        assert not is_retriable(code), code
    assert not is_retriable(9999)


def test_kafka_error() -> None:
    e = KafkaError(ErrorCode.NOT_COORDINATOR, "moved")
    assert e.code is ErrorCode.NOT_COORDINATOR and e.message == "moved" and e.retriable
    assert "NOT_COORDINATOR" in str(e)
    e2 = KafkaError(27)
    assert e2.code == ErrorCode.REBALANCE_IN_PROGRESS and not e2.retriable and e2.message
    odd = KafkaError(5000, "x")
    assert odd.code == 5000 and not odd.retriable
    back = pickle.loads(pickle.dumps(e))
    assert back.code == e.code and back.message == e.message
    assert issubclass(DecodeError, ValueError) and issubclass(UnsupportedVersionError, ValueError)
