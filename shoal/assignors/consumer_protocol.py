"""The consumer protocol blobs carried opaquely by JoinGroup/SyncGroup ("consumer" protocol type).

Wire form: int16 version + the body of ConsumerProtocolSubscription / ConsumerProtocolAssignment
(generated codecs). Decoding follows Kafka's forward-compatibility rule: a version newer
than we know is read with the newest layout we know and trailing bytes are ignored. It
also accepts the shorter bodies some clients write (a trailing field missing: the body is
then read at the highest version whose fields are all present).
"""

from __future__ import annotations

import struct
from typing import Any

from shoal.protocol.generated.consumer_protocol_assignment import ConsumerProtocolAssignment
from shoal.protocol.generated.consumer_protocol_subscription import ConsumerProtocolSubscription

from .types import Assignment, Subscription, TopicPartition

SUBSCRIPTION_MAX_VERSION = 3
ASSIGNMENT_MAX_VERSION = 3

_I16 = struct.Struct(">h")
_new_tp = tuple.__new__
_SubTP = ConsumerProtocolSubscription.TopicPartition
_AsgTP = ConsumerProtocolAssignment.TopicPartition


def _group(partitions: object, cls: type) -> list:
    """[(topic, p)...] -> [cls(topic=, partitions=[...])], topics in first-seen order."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:  # type: ignore[attr-defined]
        lst = by_topic.get(topic)
        if lst is None:
            by_topic[topic] = [p]
        else:
            lst.append(p)
    return [cls(topic=t, partitions=ps) for t, ps in by_topic.items()]


def _flatten(groups: list) -> list[TopicPartition]:
    out: list[TopicPartition] = []
    for g in groups:
        t = g.topic
        out.extend(_new_tp(TopicPartition, (t, p)) for p in g.partitions)
    return out


def _check_version(version: int, max_version: int) -> None:
    if not 0 <= version <= max_version:
        raise ValueError(f"consumer protocol version {version} not in 0..{max_version}")


def _split(buf: bytes | bytearray | memoryview) -> tuple[int, memoryview]:
    mv = memoryview(buf)
    if len(mv) < 2:
        raise ValueError("consumer protocol blob shorter than its version")
    (version,) = _I16.unpack_from(mv, 0)
    if version < 0:
        raise ValueError(f"negative consumer protocol version {version}")
    return version, mv[2:]


def _decode_tolerant(cls: Any, body: memoryview, version: int, max_version: int):  # noqa: ANN202
    """Decode at min(version, max); on a short body retry at lower versions (fewer fields), and
    finally with a null UserData appended (old librdkafka left that trailing field out)."""
    first_error: ValueError | None = None
    for buf in (body, None):
        if buf is None:
            buf = memoryview(bytes(body) + b"\xff\xff\xff\xff")
        v = min(version, max_version)
        while v >= 0:
            try:
                return cls.decode_from(buf, 0, v)[0]  # decode_from: trailing bytes are left unread
            except ValueError as e:
                first_error = first_error or e
                v -= 1
    assert first_error is not None
    raise first_error


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_MAX_VERSION) -> bytes:
    """int16 version + ConsumerProtocolSubscription body (fields the version lacks are dropped)."""
    _check_version(version, SUBSCRIPTION_MAX_VERSION)
    msg = ConsumerProtocolSubscription(
        topics=list(sub.topics),
        user_data=None if sub.user_data is None else bytes(sub.user_data),
        owned_partitions=_group(sub.owned_partitions, _SubTP) if version >= 1 else [],
        generation_id=sub.generation_id if version >= 2 else -1,
        rack_id=sub.rack_id if version >= 3 else None,
    )
    return _I16.pack(version) + msg.encode(version)


def decode_subscription(buf: bytes | bytearray | memoryview) -> Subscription:
    """Parse a subscription blob of any version (newer ones read as v3). ValueError if malformed."""
    version, body = _split(buf)
    msg = _decode_tolerant(ConsumerProtocolSubscription, body, version, SUBSCRIPTION_MAX_VERSION)
    return Subscription(
        topics=list(msg.topics),
        user_data=msg.user_data,
        owned_partitions=_flatten(msg.owned_partitions),
        generation_id=msg.generation_id,
        rack_id=msg.rack_id,
    )


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_MAX_VERSION) -> bytes:
    """int16 version + ConsumerProtocolAssignment body (same layout in v0-v3)."""
    _check_version(version, ASSIGNMENT_MAX_VERSION)
    msg = ConsumerProtocolAssignment(
        assigned_partitions=_group(assignment.partitions, _AsgTP),
        user_data=None if assignment.user_data is None else bytes(assignment.user_data),
    )
    return _I16.pack(version) + msg.encode(version)


def decode_assignment(buf: bytes | bytearray | memoryview) -> Assignment:
    """Parse an assignment blob; an empty blob (sent by some clients for "nothing") is empty."""
    if len(buf) == 0:
        return Assignment([])
    version, body = _split(buf)
    msg = _decode_tolerant(ConsumerProtocolAssignment, body, version, ASSIGNMENT_MAX_VERSION)
    return Assignment(_flatten(msg.assigned_partitions), msg.user_data)
