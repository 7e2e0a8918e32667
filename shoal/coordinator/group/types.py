"""Group types as plug-ins of the group shard (Kafka's `Group` interface and its managers).

A `Group` is what shared code (offsets, the admin APIs) may know of any
group, whatever its type. A `GroupTypeManager` is a plug-in of the shard:
the API keys it answers and the record key versions it replays; the shard
builds its dispatch and replay tables from the registered managers.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, NamedTuple, Protocol

from shoal.coordinator.group.records import OffsetAndMetadata
from shoal.coordinator.result import Record, ShardRequest
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_groups_response import DescribeGroupsResponse
from shoal.protocol.generated.list_groups_response import ListGroupsResponse

TopicPartition = tuple[str, int]


class GroupType(Enum):
    """Kafka's group types; `.value` is the name ListGroups reports and filters by."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"


class OffsetExpiration(NamedTuple):
    """How a group's offsets expire (Kafka's OffsetExpirationCondition): retention counts from
    `base(offset)`; offsets of `kept_topics` (topics the group consumes) never expire."""

    base: Callable[[OffsetAndMetadata], int]
    kept_topics: frozenset[str] | set[str] = frozenset()


class Group(Protocol):
    """Any group, as offsets and the admin APIs see it (Kafka's `Group`).

    `state_name` is what DescribeGroups / ListGroups report. A valid offset
    commit from a classic member counts as its heartbeat (the group sees to
    it; not so in the consumer protocol). `api_version` is the OffsetCommit
    version (consumer-protocol members must use v9+). `validate_offset_fetch`
    answers GROUP_ID_NOT_FOUND for a group that is gone (its fetch reads no
    offsets) and checks the member id and epoch OffsetFetch v9+ carries
    (None / -1: not a member). `validate_offset_delete` answers a
    whole-group error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) or each
    partition's: NONE (may be deleted) or GROUP_SUBSCRIBED_TO_TOPIC.
    `offset_expiration` is None while the offsets must not expire;
    `tombstone_records` delete the group (not its offsets); `list_entry` is
    None for a group not listed (Dead).
    """

    group_id: str

    @property
    def type(self) -> GroupType: ...
    @property
    def state_name(self) -> str: ...
    def is_empty(self) -> bool: ...
    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int, *,
                               transactional: bool, now_ms: int, api_version: int = 9) -> ErrorCode | None: ...
    def validate_offset_fetch(self, member_id: str | None = None, member_epoch: int = -1) -> ErrorCode | None: ...
    def validate_offset_delete(self, partitions: list[TopicPartition]
                               ) -> ErrorCode | dict[TopicPartition, ErrorCode]: ...
    def validate_delete_group(self) -> ErrorCode | None: ...
    def offset_expiration(self) -> OffsetExpiration | None: ...
    def tombstone_records(self) -> list[Record]: ...
    def describe(self) -> DescribeGroupsResponse.DescribedGroup: ...
    def list_entry(self) -> ListGroupsResponse.ListedGroup | None: ...


class GroupBase:
    """What every group type answers alike of the `Group` protocol: its type, its state's name, whether
    it is Empty, and whether it may be deleted. `States` is the type's state Enum (with EMPTY and DEAD)."""

    States: Any
    group_type: GroupType
    state: Any

    @property
    def type(self) -> GroupType:
        return self.group_type

    @property
    def state_name(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return self.state == self.States.EMPTY

    def validate_delete_group(self) -> ErrorCode | None:
        """Dead is not found, members make the group non-empty."""
        if self.state == self.States.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return None if self.state == self.States.EMPTY else ErrorCode.NON_EMPTY_GROUP


class GroupTypeManager(Protocol):
    """A plug-in of the group shard (a group type's protocol, or what all types share): `handle`
    answers requests of `api_keys` (None: later), `replay` applies records of `record_key_versions`
    (live and on load)."""

    api_keys: frozenset[ApiKey]
    record_key_versions: frozenset[int]

    def handle(self, ctx: ShardRequest, request: Any, now_ms: int) -> Any | None: ...
    def replay(self, key: bytes, value: bytes | None, producer_id: int) -> None: ...
    def on_loaded(self, now_ms: int) -> None: ...
    def unload(self) -> None: ...
