"""ConsumerGroupManager: the consumer group type's plug-in of the group shard (KIP-848).

ConsumerGroupHeartbeat (join with epoch 0, heartbeat, leave with -1, static leave with -2),
ConsumerGroupDescribe, the session and rebalance (revocation) timers, and the replay of key
versions 3-8. As Kafka's GroupMetadataManager: a heartbeat is computed from the state as it is,
its records are emitted (and so replayed) at the end, and an error changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from shoal.assignors.server import ServerAssignor
from shoal.coordinator.group.consumer import records as R
from shoal.coordinator.group.consumer.describe import describe_group, heartbeat_assignment
from shoal.coordinator.group.consumer.group import ConsumerGroup
from shoal.coordinator.group.consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerMember,
    MemberState,
    Partitions,
)
from shoal.coordinator.group.consumer.reconciliation import FencedMemberEpoch, OwnedPartitions, reconcile
from shoal.coordinator.group.consumer.regex import resolve
from shoal.coordinator.group.consumer.replay import replay_record
from shoal.coordinator.group.consumer.target import AssignorFailed, compute_target, subscription_metadata
from shoal.coordinator.group.consumer.topics import TopicsView
from shoal.coordinator.group.consumer.validation import (
    HeartbeatError,
    check_epoch,
    check_regex,
    validate_heartbeat,
)
from shoal.coordinator.group.group import ClassicGroup
from shoal.coordinator.group.modern import NEW_GROUP_EPOCH, ModernGroupManager, Step
from shoal.coordinator.group.types import GroupType
from shoal.coordinator.result import ShardRequest
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from shoal.protocol.generated.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse

if TYPE_CHECKING:
    from shoal.coordinator.group.shard import GroupCoordinatorShard

log = logging.getLogger(__name__)
E = ErrorCode
Resolved = dict[str, frozenset[str]]  # regex -> the topics it matches


def rebalance_timer_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-rebalance", group_id, member_id)


class ConsumerGroupManager(ModernGroupManager):
    """The consumer group type of one shard (a `types.GroupTypeManager`; what it shares with the share
    group type is in `modern.ModernGroupManager`)."""

    record_key_versions = R.KEY_VERSIONS
    group_class = ConsumerGroup

    def __init__(self, shard: GroupCoordinatorShard, topics: TopicsView | None = None,
                 assignors: Mapping[str, ServerAssignor] | None = None) -> None:
        super().__init__(shard, topics, {ApiKey.CONSUMER_GROUP_HEARTBEAT: self.heartbeat,
                                         ApiKey.CONSUMER_GROUP_DESCRIBE: self.describe},
                         shard.config.consumer_session_timeout_ms, lambda: self.config.consumer_protocol_enabled)
        if assignors is None:
            from shoal.coordinator.group.consumer.target import resolve_assignors
            assignors = resolve_assignors(self.config.group_consumer_assignors)
        self.assignors: dict[str, ServerAssignor] = dict(assignors)

    @property
    def default_assignor(self) -> str:
        """The first of group.consumer.assignors that exists here."""
        for name in self.config.group_consumer_assignors:
            if name in self.assignors:
                return name
        return next(iter(self.assignors), "")

    # ================================================================ ConsumerGroupHeartbeat
    def heartbeat(self, ctx: ShardRequest, req: Any, now_ms: int) -> ConsumerGroupHeartbeatResponse:
        def compute(step: Step) -> ConsumerGroupHeartbeatResponse:
            validate_heartbeat(ctx.api_version, req, self.assignors)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req, step, now_ms)
            return self._heartbeat(ctx, req, step, now_ms)

        return self._run(f"ConsumerGroupHeartbeat v{ctx.api_version}", req, ConsumerGroupHeartbeatResponse, compute)

    def _heartbeat(self, ctx: ShardRequest, req: Any, step: Step, now_ms: int) -> ConsumerGroupHeartbeatResponse:
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._group_for_heartbeat(req.group_id, joining, step, now_ms)
        member_id = req.member_id
        if len(group.members) >= self.config.group_consumer_max_size and (
                member_id == "" or member_id not in group.members):
            raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of "
                                 f"{self.config.group_consumer_max_size} members.")
        if member_id == "":
            member_id = self.shard.member_id_suffix()  # v0: the coordinator names the member
        owned = _owned(req.topic_partitions)
        if req.instance_id is None:
            member = self._dynamic_member(group, member_id, req.member_epoch, owned, joining)
        else:
            member = self._static_member(group, member_id, req.member_epoch, req.instance_id, owned, joining, step)
        updated = self._updated_member(ctx, req, member)
        check_regex(member.subscribed_topic_regex, updated.subscribed_topic_regex)
        resolved = self._resolve(group, member, updated, step, now_ms)
        group_epoch = self._maybe_bump_epoch(group, member, updated, resolved, step)
        target_epoch, target = self._target(group, group_epoch, member, updated, resolved, step)
        final = self._reconcile(group, updated, target_epoch, target, owned, step, now_ms)
        step.after.append(lambda: self.schedule_session(group.group_id, member_id, now_ms))
        response = ConsumerGroupHeartbeatResponse(error_code=0, member_id=final.member_id,
                                                  member_epoch=final.member_epoch,
                                                  heartbeat_interval_ms=self.config.consumer_heartbeat_interval_ms(
                                                      group.group_id))
        full = joining or (req.rebalance_timeout_ms != -1 and req.topic_partitions is not None and (
            req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        if full or final.assigned != member.assigned:
            response.assignment = heartbeat_assignment(final)
        return response

    def _group_for_heartbeat(self, group_id: str, create: bool, step: Step, now_ms: int) -> ConsumerGroup:
        """Kafka's getOrMaybeCreateConsumerGroup: an Empty classic group is deleted to make room, a
        non-empty one is converted when the migration policy allows it (`migration.py`), else it is
        not this type's (GROUP_ID_NOT_FOUND)."""
        group = self.groups.get(group_id)
        if group is None and not create:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        if group is None:  # exists once its records are replayed
            return ConsumerGroup(group_id, NEW_GROUP_EPOCH)
        if isinstance(group, ConsumerGroup):
            return group
        if create and group.type == GroupType.CLASSIC and group.is_empty():
            step.records.extend(group.tombstone_records())
            return ConsumerGroup(group_id, NEW_GROUP_EPOCH)
        migration = self.shard.migration
        if create and isinstance(group, ClassicGroup) and migration.can_upgrade(group):
            return migration.upgrade(group, now_ms, step.records, step.after)
        raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _dynamic_member(self, group: ConsumerGroup, member_id: str, epoch: int, owned: OwnedPartitions,
                        create: bool) -> ConsumerMember:
        member = group.members.get(member_id) if create else self.known_member(group, member_id)
        if member is None:
            log.info("[GroupId %s] Member %s joins the consumer group using the consumer protocol.",
                     group.group_id, member_id)
            member = ConsumerMember(member_id)
        check_epoch(member, epoch, owned)
        return member

    def _static_member(self, group: ConsumerGroup, member_id: str, epoch: int, instance_id: str,
                       owned: OwnedPartitions, create: bool, step: Step) -> ConsumerMember:
        existing = group.static_member(instance_id)
        if create:
            if existing is None:
                log.info("[GroupId %s] Static member %s with instance id %s joins the consumer group.",
                         group.group_id, member_id, instance_id)
                return group.members.get(member_id) or ConsumerMember(member_id)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise HeartbeatError(E.UNRELEASED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                     f"{instance_id} cannot join the group because the instance id is owned by "
                                     f"{existing.member_id} member.")
            # The rejoining instance takes the old member's place, its target and its partitions.
            new = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            step.records += R.remove_member_records(group.group_id, existing.member_id)
            step.records += [R.member_subscription_record(group.group_id, new),
                             R.target_assignment_record(group.group_id, member_id,
                                                        group.target.get(existing.member_id, {})),
                             R.current_assignment_record(group.group_id, new)]
            step.after.append(lambda: self.cancel_timers(group.group_id, existing.member_id))
            log.info("[GroupId %s] Static member with instance id %s re-joins the consumer group: member %s "
                     "replaces %s.", group.group_id, instance_id, member_id, existing.member_id)
            return new
        if existing is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise HeartbeatError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                 f"{instance_id} was fenced by member {existing.member_id}.")
        check_epoch(existing, epoch, owned)
        return existing

    @staticmethod
    def _updated_member(ctx: ShardRequest, req: Any, member: ConsumerMember) -> ConsumerMember:
        names = member.subscribed_topic_names
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
        regex = member.subscribed_topic_regex
        if req.subscribed_topic_regex is not None:  # "" is no regex (librdkafka sends it with names)
            regex = req.subscribed_topic_regex or None
        return replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=names, subscribed_topic_regex=regex, client_id=ctx.client_id,
            client_host=ctx.client_host)

    # ================================================================ regex subscriptions
    def _resolve(self, group: ConsumerGroup, old: ConsumerMember | None, new: ConsumerMember | None,
                 step: Step, now_ms: int) -> Resolved:
        """The group's regexes (`old`'s replaced by `new`'s) resolved against the topics as they are, and
        a ConsumerGroupRegularExpression record for each resolution that changed (a tombstone for a
        regex no member uses any more).

        Kafka resolves off the coordinator thread, at most every 10s and when the metadata image has
        new topics, then bumps the epoch in a later write; here the topics are an in-memory view, so
        every heartbeat resolves at once and a topic created, deleted or matched by a new regex
        changes the subscription (and the epoch) in the heartbeat that sees it."""
        regexes = group.subscribed_regexes(old, new)
        resolved = resolve(regexes, self.topics.names()) if regexes else {}
        gid = group.group_id
        for regex, topics in sorted(resolved.items()):
            if group.resolved_regexes.get(regex) != topics:
                step.records.append(R.regex_record(gid, regex, topics, now_ms))
        step.records += [R.regex_tombstone(gid, regex) for regex in sorted(group.resolved_regexes)
                         if regex not in resolved]
        return resolved

    def _maybe_bump_epoch(self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
                          resolved: Resolved, step: Step) -> int:
        """Write the member's subscription if it changed; bump the group epoch when the subscriptions
        (names or regex) or the subscribed topics (created, deleted, grown, newly matched) changed."""
        bump = False
        if updated.subscription_fields() != member.subscription_fields():
            step.records.append(R.member_subscription_record(group.group_id, updated))
            bump = (updated.subscribed_topic_names != member.subscribed_topic_names
                    or updated.subscribed_topic_regex != member.subscribed_topic_regex)
        metadata = subscription_metadata(group.subscribed_topic_names(member, updated, resolved), self.topics)
        if metadata != group.subscription_metadata:
            step.records.append(R.subscription_metadata_record(group.group_id, metadata))
            bump = True
        epoch = group.group_epoch
        if bump:
            epoch += 1
            step.records.append(R.group_epoch_record(group.group_id, epoch))
            log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, epoch)
        return epoch

    def _target(self, group: ConsumerGroup, group_epoch: int, member: ConsumerMember, updated: ConsumerMember,
                resolved: Resolved, step: Step) -> tuple[int, Partitions]:
        if group_epoch <= group.assignment_epoch:
            return group.assignment_epoch, group.target_of(updated.member_id, updated.instance_id)
        name = group.preferred_assignor(member, updated) or self.default_assignor
        assignor = self.assignors.get(name)
        if assignor is None:
            raise HeartbeatError(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {name} is not supported.")
        metadata = subscription_metadata(group.subscribed_topic_names(member, updated, resolved), self.topics)
        previous = group.static_members.get(updated.instance_id) if updated.instance_id is not None else None
        removed = previous if previous is not None and previous != updated.member_id else None
        try:
            records, targets = compute_target(group, group_epoch, updated, assignor, metadata, removed, resolved)
        except AssignorFailed as e:
            log.error("[GroupId %s] %s", group.group_id, e)
            raise HeartbeatError(E.UNKNOWN_SERVER_ERROR, str(e)) from e
        step.records += records
        return group_epoch, targets.get(updated.member_id, {})

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, target_epoch: int, target: Partitions,
                   owned: OwnedPartitions, step: Step, now_ms: int) -> ConsumerMember:
        if member.is_reconciled_to(target_epoch):
            return member
        try:
            updated = reconcile(member, target_epoch, target, group.current_partition_epoch, owned)
        except FencedMemberEpoch as e:
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, str(e)) from e
        if updated != member:
            step.records.append(R.current_assignment_record(group.group_id, updated))
            gid, mid = group.group_id, updated.member_id
            if updated.state == MemberState.UNREVOKED_PARTITIONS:
                epoch, timeout = updated.member_epoch, updated.rebalance_timeout_ms
                step.after.append(lambda: self._schedule_rebalance(gid, mid, epoch, timeout, now_ms))
            else:
                step.after.append(lambda: self.timers.cancel(rebalance_timer_key(gid, mid)))
        return updated

    # ================================================================ leaving, fencing
    def _leave(self, req: Any, step: Step, now_ms: int) -> ConsumerGroupHeartbeatResponse:
        group = self.groups.get(req.group_id)
        if not isinstance(group, ConsumerGroup):
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
        if req.instance_id is None:
            member = self.known_member(group, req.member_id)
            log.info("[GroupId %s] Member %s left the consumer group.", group.group_id, member.member_id)
        else:
            member = group.static_member(req.instance_id)
            if member is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if member.member_id != req.member_id:
                raise HeartbeatError(E.FENCED_INSTANCE_ID, f"Static member {req.member_id} with instance id "
                                     f"{req.instance_id} was fenced by member {member.member_id}.")
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Gone for now: it keeps its partitions until its session times out.
                log.info("[GroupId %s] Static member %s with instance id %s temporarily left the consumer group.",
                         group.group_id, member.member_id, req.instance_id)
                leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                step.records.append(R.current_assignment_record(group.group_id, leaving))
                return ConsumerGroupHeartbeatResponse(error_code=0, member_id=member.member_id,
                                                      member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        self._fence_records(group, member, step, now_ms)
        return ConsumerGroupHeartbeatResponse(error_code=0, member_id=req.member_id, member_epoch=req.member_epoch)

    def _fence_records(self, group: ConsumerGroup, member: ConsumerMember, step: Step, now_ms: int) -> None:
        """Kafka's consumerGroupFenceMember: the member's tombstones, new subscription metadata, a new epoch;
        or, when the last consumer-protocol member goes and classic members remain, the downgrade."""
        gid = group.group_id
        if self.shard.migration.should_downgrade(group, member.member_id):
            mid = member.member_id
            step.after.append(lambda: self.shard.migration.downgrade(gid, mid, now_ms))
            return
        step.records += R.remove_member_records(gid, member.member_id)
        resolved = self._resolve(group, member, None, step, now_ms)
        metadata = subscription_metadata(group.subscribed_topic_names(member, None, resolved), self.topics)
        if metadata != group.subscription_metadata:
            step.records.append(R.subscription_metadata_record(gid, metadata))
        step.records.append(R.group_epoch_record(gid, group.group_epoch + 1))
        if set(group.members) <= {member.member_id}:
            # The group is left empty: its assignment epoch catches up (Kafka 4.4, KAFKA-20442), so an
            # empty group's two epochs are equal.
            step.records.append(R.target_epoch_record(gid, group.group_epoch + 1))
        step.after.append(lambda: self.cancel_timers(gid, member.member_id))

    def classic_join(self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember, owned: Partitions,
                     now_ms: int) -> ConsumerMember | HeartbeatError:
        """A classic member's JoinGroup (`migration.py`): epoch bump, target and reconciliation as a
        heartbeat's, with the partitions its subscription says it owns; its classic session timeout."""
        step = Step()
        try:
            resolved = self._resolve(group, member, updated, step, now_ms)
            group_epoch = self._maybe_bump_epoch(group, member, updated, resolved, step)
            target_epoch, target = self._target(group, group_epoch, member, updated, resolved, step)
            final = self._reconcile(group, updated, target_epoch, target, [(t, sorted(ps)) for t, ps in owned.items()],
                                    step, now_ms)
        except HeartbeatError as e:
            return e
        gid, mid = group.group_id, final.member_id
        timeout = updated.classic.session_timeout_ms if updated.classic is not None else None
        step.after.append(lambda: self.schedule_session(gid, mid, now_ms, timeout))
        self._apply(step)
        return final

    # ================================================================ timers
    def _schedule_rebalance(self, group_id: str, member_id: str, epoch: int, timeout_ms: int,
                            now_ms: int) -> None:
        self.timers.schedule(rebalance_timer_key(group_id, member_id), now_ms + max(timeout_ms, 0),
                             lambda t: self.fence(group_id, member_id, f"it failed to transition from epoch "
                                                  f"{epoch} within {timeout_ms}ms.", t, epoch))

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timers.cancel(self.session_timer_key(group_id, member_id))
        self.timers.cancel(rebalance_timer_key(group_id, member_id))

    # ================================================================ ConsumerGroupDescribe
    def describe(self, ctx: ShardRequest, req: Any, now_ms: int) -> ConsumerGroupDescribeResponse:
        return ConsumerGroupDescribeResponse(groups=[
            describe_group(gid, self.groups.get(gid), self.default_assignor, self.topics,
                           bool(req.include_authorized_operations)) for gid in req.group_ids])

    # ================================================================ replay / load / unload
    def replay(self, key: bytes, value: bytes | None, producer_id: int) -> None:
        replay_record(self.groups, key, value)

    def on_loaded(self, now_ms: int) -> None:
        """Re-arm every member's session timer, and the revocation deadline of those revoking. The regexes'
        resolutions are the loaded records'; the members' next heartbeats resolve them again."""
        for group in self.own_groups():
            for m in group.members.values():
                self.schedule_session(group.group_id, m.member_id, now_ms,
                                      None if m.classic is None else m.classic.session_timeout_ms)
                if m.state == MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance(group.group_id, m.member_id, m.member_epoch,
                                             m.rebalance_timeout_ms, now_ms)

    def before_classic_join(self, group_id: str) -> ErrorCode | None:
        """A classic JoinGroup for an Empty consumer group: it makes way (its tombstones are written).
        A non-empty consumer group takes the join as a classic member (the shard routes it to `migration`)."""
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return None
        if not group.is_empty():
            return E.INCONSISTENT_GROUP_PROTOCOL
        for key, value in group.tombstone_records():
            self.shard.emit(key, value)
        return None


def _owned(topic_partitions: list[Any] | None) -> OwnedPartitions:
    if topic_partitions is None:
        return None
    return [(tp.topic_id, list(tp.partitions)) for tp in topic_partitions]
