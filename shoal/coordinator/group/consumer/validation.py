"""Checks of a ConsumerGroupHeartbeat before it touches state (Kafka's
throwIfConsumerGroupHeartbeatRequestIsInvalid and throwIfConsumerGroupMemberEpochIsInvalid)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shoal.coordinator.group.consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerMember,
)
from shoal.coordinator.group.consumer.reconciliation import OwnedPartitions
from shoal.coordinator.group.consumer.regex import invalid_regex_message
from shoal.protocol.errors import ErrorCode

E = ErrorCode
# KIP-1082: from version 1 the consumer names itself (a UUID it keeps across rejoins).
MEMBER_ID_REQUIRED_VERSION = 1


class HeartbeatError(Exception):
    """A heartbeat refused with a Kafka error code; the group is left as it was."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _invalid(message: str) -> HeartbeatError:
    return HeartbeatError(E.INVALID_REQUEST, message)


def validate_heartbeat(api_version: int, req: Any, assignors: Mapping[str, Any]) -> None:
    """INVALID_REQUEST for a malformed request, UNSUPPORTED_ASSIGNOR for an assignor not served."""
    if req.group_id == "":
        raise _invalid("GroupId can't be empty.")
    if req.instance_id == "":
        raise _invalid("InstanceId can't be empty.")
    if req.rack_id == "":
        raise _invalid("RackId can't be empty.")
    if api_version >= MEMBER_ID_REQUIRED_VERSION and req.member_id == "":
        raise _invalid("MemberId can't be empty.")
    _validate_epoch_fields(req)
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise HeartbeatError(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported. "
                             f"Supported assignors: {', '.join(assignors)}.")


def _validate_epoch_fields(req: Any) -> None:
    """What a join (epoch 0), a heartbeat or a leave must carry."""
    epoch = req.member_epoch
    if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if req.member_id == "":
            raise _invalid("MemberId can't be empty.")
    elif epoch == JOIN_GROUP_MEMBER_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        # Kafka 4.1+: an empty list of names or an empty regex joins the group subscribed to nothing.
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.member_id == "":
            raise _invalid("MemberId can't be empty.")
        if req.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    else:
        raise _invalid("MemberEpoch is invalid.")


def _subset(owned: OwnedPartitions, assigned: Mapping[Any, frozenset[int]]) -> bool:
    if owned is None:
        return False
    return all(topic_id in assigned and set(ps) <= assigned[topic_id] for topic_id, ps in owned)


def check_epoch(member: ConsumerMember, received: int, owned: OwnedPartitions) -> None:
    """FENCED_MEMBER_EPOCH unless the epoch is the member's, or its previous one with no partition
    beyond its assignment (the answer that bumped it was lost). Epoch 0 is a rejoin, always allowed
    (KAFKA-19233: a fenced member that keeps its member id, as KIP-1082 clients do, rejoins so)."""
    check_member_epoch("consumer", member, received, _subset(owned, member.assigned))


def check_member_epoch(kind: str, member: Any, received: int, previous_ok: bool, smaller_detail: str = "") -> None:
    """Kafka's throwIf{Consumer,Share}GroupMemberEpochIsInvalid: FENCED_MEMBER_EPOCH unless the epoch
    is 0 (a join), the member's, or its previous one when `previous_ok`."""
    if received in (JOIN_GROUP_MEMBER_EPOCH, member.member_epoch) or (
            received == member.previous_member_epoch and received < member.member_epoch and previous_ok):
        return
    relation, detail = ("greater", "") if received > member.member_epoch else ("smaller", smaller_detail)
    raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The {kind} group member has a {relation} member epoch "
                         f"({received}) than the one known by the group coordinator ({member.member_epoch}){detail}. "
                         "The member must abandon all its partitions and rejoin.")


def check_regex(old: str | None, new: str | None) -> None:
    """INVALID_REGULAR_EXPRESSION for a new regex RE2/J would not compile (Kafka compiles a regex
    when a member brings it, after the member checks: `throwIfRegularExpressionIsInvalid`)."""
    if new and new != old:
        message = invalid_regex_message(new)
        if message is not None:
            raise HeartbeatError(E.INVALID_REGULAR_EXPRESSION, message)
