"""What the consumer group type (KIP-848, `consumer/`) and the share group type (KIP-932, `share/`)
have in common, as Kafka's `modern` package: `ModernGroup`, the state both groups keep and the part
of the `types.Group` protocol they answer alike, and `ModernGroupManager`, the skeleton of both shard
plug-ins. Each type's heartbeat, describe, records and replay stay in its own package.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from shoal.coordinator.group.consumer.member import Partitions, partitions_equal, partitions_of
from shoal.coordinator.group.consumer.topics import StaticTopics, TopicsView
from shoal.coordinator.group.consumer.validation import HeartbeatError
from shoal.coordinator.group.group import dead_group_description
from shoal.coordinator.group.records import sorted_pairs
from shoal.coordinator.group.responses import error_response
from shoal.coordinator.group.types import Group, GroupBase
from shoal.coordinator.result import Record, ShardRequest
from shoal.protocol.acl_operations import GROUP_OPERATIONS
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_groups_response import DescribeGroupsResponse
from shoal.protocol.generated.list_groups_response import ListGroupsResponse

if TYPE_CHECKING:
    from shoal.coordinator.group.consumer.group import ConsumerGroup
    from shoal.coordinator.group.shard import GroupCoordinatorShard
    from shoal.coordinator.group.share.group import ShareGroup

log = logging.getLogger(__name__)
E = ErrorCode
G = TypeVar("G", "ConsumerGroup", "ShareGroup")
# Kafka's ModernGroup starts every group (consumer and share) at epoch 1, and (Kafka 4.4, KAFKA-20268) its
# empty target assignment at epoch 1: the first computed one is epoch 2; 0 stays a joining member's epoch.
NEW_GROUP_EPOCH = 1


class ModernGroup(GroupBase):
    """A consumer or share group (Kafka's ModernGroup): members, the group epoch, the target assignment
    and its epoch. `States` is the type's state Enum (both have EMPTY and DEAD); `group_type` is its
    `GroupType`, whose value is also the protocol type ListGroups reports."""

    members: dict[str, Any]

    def __init__(self, group_id: str, epoch: int) -> None:
        self.group_id = group_id
        self.group_epoch = epoch
        self.assignment_epoch = epoch
        self.state = self.States.EMPTY
        self.target: dict[str, Partitions] = {}  # member id -> target assignment

    # ------------------------------------------------------------ reads
    def member_topics(self, member: Any, resolved: Mapping[str, frozenset[str]] | None = None) -> frozenset[str]:
        """A member's subscription (a consumer group adds the topics its regex resolves to)."""
        return frozenset(member.subscribed_topic_names)

    def subscribed_topic_names(self, old: Any = None, new: Any = None,
                               resolved: Mapping[str, frozenset[str]] | None = None) -> set[str]:
        """The topics the members subscribe to, with `old`'s subscription replaced by `new`'s (Kafka's
        computeSubscribedTopicNames)."""
        counts: Counter[str] = Counter()
        for m in self.members.values():
            counts.update(self.member_topics(m, resolved))
        if old is not None:
            counts.subtract(self.member_topics(old, resolved))
        if new is not None:
            counts.update(self.member_topics(new, resolved))
        return {t for t, n in counts.items() if n > 0}

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return any(topic in self.member_topics(m) for m in self.members.values())

    # ------------------------------------------------------------ changes (from replay only)
    def replay_target(self, member_id: str, v: Any) -> None:
        """A TargetAssignmentMember record (None: its tombstone)."""
        if v is None:
            self.target.pop(member_id, None)
        else:
            self.target[member_id] = partitions_of(v.topic_partitions)

    def drop(self, groups: dict[str, Group]) -> None:
        """The group epoch's tombstone: the group is Dead, and gone."""
        if self.members or self.target:
            log.warning("[GroupId %s] group tombstone while it still has members or targets", self.group_id)
        self.state = self.States.DEAD
        groups.pop(self.group_id, None)

    # ------------------------------------------------------------ the Group protocol
    def describe(self) -> DescribeGroupsResponse.DescribedGroup:
        """DescribeGroups (the classic API) describes neither consumer nor share groups: Kafka 4 answers
        Dead, as for a group it does not know (from v6 with GROUP_ID_NOT_FOUND: `admin.describe_group`)."""
        return dead_group_description(self.group_id)

    def list_entry(self) -> ListGroupsResponse.ListedGroup | None:
        if self.state == self.States.DEAD:
            return None
        return ListGroupsResponse.ListedGroup(group_id=self.group_id, protocol_type=self.type.value,
                                              group_state=self.state_name, group_type=self.type.value)


def persisted_group(groups: dict[str, Group], group_id: str, create: bool, cls: type[G],
                    replaceable: Callable[[Group], bool]) -> G | None:
    """The group of type `cls` a record is about; created for a value (Kafka's
    getOrMaybeCreatePersistedConsumerGroup, ...ShareGroup), None for a tombstone of a group not here.
    It replaces a group of another type, with a warning unless that group is `replaceable`."""
    group = groups.get(group_id)
    if isinstance(group, cls):
        return group
    if not create:
        return None
    if group is not None and not replaceable(group):
        log.warning("[GroupId %s] a %s group record replaces a %s group", group_id, cls.group_type.value,
                    group.type.value)
    new = cls(group_id)
    groups[group_id] = new
    return new


def changed_targets(group: ModernGroup, targets: Mapping[str, Partitions],
                    record: Callable[[str, str, Partitions], Record]) -> list[Record]:
    """A TargetAssignmentMember record for each member whose target changed (Kafka's TargetAssignmentBuilder)."""
    return [record(group.group_id, mid, new) for mid, new in targets.items()
            if (old := group.target.get(mid)) is None or not partitions_equal(old, new)]


def described_assignment(D: Any, partitions: Partitions, topics: TopicsView) -> Any:
    """A describe response's `D.Assignment`: the partitions with their topic names; a deleted topic is
    left out (Kafka: not in the metadata image)."""
    return D.Assignment(topic_partitions=[
        D.TopicPartitions(topic_id=t, topic_name=meta.name, partitions=ps)
        for t, ps in sorted_pairs(partitions) if (meta := topics.by_id(t)) is not None])


def with_operations(described: Any, include_authorized_operations: bool) -> Any:
    if include_authorized_operations:
        described.authorized_operations = GROUP_OPERATIONS  # every operation, as Kafka without an authorizer
    return described


@dataclass
class Step:
    """A heartbeat being computed: the records it will write and the timers it will set."""

    records: list[Record] = field(default_factory=list)
    after: list[Callable[[], None]] = field(default_factory=list)


class ModernGroupManager:
    """What the consumer and share group types' plug-ins of the shard (`types.GroupTypeManager`) do
    alike. As Kafka's GroupMetadataManager: a heartbeat is computed from the state as it is into a
    `Step`, its records are emitted (and so replayed) at the end, and an error changes nothing."""

    group_class: type[ModernGroup]

    def __init__(self, shard: GroupCoordinatorShard, topics: TopicsView | None,
                 handlers: dict[ApiKey, Callable[[ShardRequest, Any, int], Any]],
                 session_timeout_ms: Callable[[str], int], enabled: Callable[[], bool]) -> None:
        self.shard = shard
        self.config = shard.config
        self.timers = shard.timers
        self.session_timeout_ms = session_timeout_ms  # of a group, by its id
        self.enabled = enabled  # whether the type is served (the config may change)
        self.topics: TopicsView = topics if topics is not None else StaticTopics()
        self._handlers = handlers
        self.api_keys = frozenset(handlers)

    @property
    def groups(self) -> dict[str, Group]:
        return self.shard.groups

    def handle(self, ctx: ShardRequest, request: Any, now_ms: int) -> Any:
        if not self.enabled():  # as Kafka's KafkaApis: every request of a type not served is refused
            return error_response(ctx.api_key, ctx.api_version, request, E.UNSUPPORTED_VERSION)
        return self._handlers[ctx.api_key](ctx, request, now_ms)

    def own_groups(self) -> Iterator[Any]:
        """The groups of this manager's type."""
        return (g for g in list(self.groups.values()) if isinstance(g, self.group_class))

    def _run(self, api: str, req: Any, response_class: Any, compute: Callable[[Step], Any]) -> Any:
        """A heartbeat: `compute` on a new step, then the step applied; a HeartbeatError is answered
        and changes nothing."""
        step = Step()
        try:
            response = compute(step)
        except HeartbeatError as e:
            log.info("[GroupId %s] %s of member %r at epoch %d refused: %s (%s)", req.group_id, api,
                     req.member_id, req.member_epoch, e.code.name, e.message)
            return response_class(error_code=e.code, error_message=e.message)
        self._apply(step)
        return response

    @staticmethod
    def known_member(group: Any, member_id: str) -> Any:
        member = group.members.get(member_id)
        if member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                 f"{group.group_id}.")
        return member

    def _fence_records(self, group: Any, member: Any, step: Step, now_ms: int) -> None:
        raise NotImplementedError

    def fence_now(self, group: Any, member: Any, now_ms: int) -> None:
        """The member's fencing records, written now."""
        step = Step()
        self._fence_records(group, member, step, now_ms)
        self._apply(step)

    def fence(self, group_id: str, member_id: str, reason: str, now_ms: int, epoch: int | None = None) -> None:
        """Fence a member from a timer (nothing if it is gone, or moved on from `epoch`)."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if isinstance(group, self.group_class) else None
        if member is None or (epoch is not None and member.member_epoch != epoch):
            return
        log.info("[GroupId %s] Member %s fenced from the group because %s", group_id, member_id, reason)
        self.fence_now(group, member, now_ms)

    # ------------------------------------------------------------ timers
    def session_timer_key(self, group_id: str, member_id: str) -> tuple[str, str, str]:
        return (f"{self.group_class.group_type.value}-session", group_id, member_id)

    def schedule_session(self, group_id: str, member_id: str, now_ms: int, timeout_ms: int | None = None) -> None:
        """The member's session deadline: the type's session timeout for the group, unless `timeout_ms` (a
        classic member's own) is given."""
        timeout = self.session_timeout_ms(group_id) if timeout_ms is None else timeout_ms
        self.timers.schedule(self.session_timer_key(group_id, member_id), now_ms + timeout,
                             lambda t: self.fence(group_id, member_id, "the member session expired.", t))

    def _apply(self, step: Step) -> None:
        """Write a step's records (applied at once through the shard's replay), then its timer changes."""
        for key, value in step.records:
            self.shard.emit(key, value)
        for action in step.after:
            action()

    def unload(self) -> None:
        pass
