"""ShareGroupManager: the share group type's plug-in of the group shard (KIP-932).

ShareGroupHeartbeat v1 (join with epoch 0, heartbeat, leave with -1), ShareGroupDescribe v1, the
session timers, and the replay of key versions 10-15. As Kafka's GroupMetadataManager: a heartbeat
is computed from the state as it is, its records are emitted (and so replayed) at the end, and an
error changes nothing. A share member takes its target assignment at once (no revocation), so its
member epoch is the assignment epoch as soon as it heartbeats. (The shard's `share_group_member`
is the query the share-fetch data path may use to check a ShareFetch/ShareAcknowledge's member.)
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from shoal.assignors.server.spec import GroupSpec, MemberSpec, TopicSpec
from shoal.assignors.share_simple import SHARE_ASSIGNORS, SimpleAssignor
from shoal.coordinator.group.consumer.member import (  # share epochs 0 and -1 mean what they do there
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    Partitions,
    partitions_equal,
)
from shoal.coordinator.group.consumer.target import subscription_metadata
from shoal.coordinator.group.consumer.topics import TopicsView
from shoal.coordinator.group.consumer.validation import HeartbeatError, check_member_epoch
from shoal.coordinator.group.modern import NEW_GROUP_EPOCH, ModernGroupManager, Step, changed_targets
from shoal.coordinator.group.records import sorted_pairs
from shoal.coordinator.group.share import records as R
from shoal.coordinator.group.share.describe import describe_group, heartbeat_assignment
from shoal.coordinator.group.share.group import InitializedTopic, ShareGroup, ShareMember
from shoal.coordinator.group.share.replay import replay_record
from shoal.coordinator.result import ShardRequest
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.share_group_describe_response import ShareGroupDescribeResponse
from shoal.protocol.generated.share_group_heartbeat_response import ShareGroupHeartbeatResponse

if TYPE_CHECKING:
    from shoal.coordinator.group.shard import GroupCoordinatorShard

log = logging.getLogger(__name__)
E = ErrorCode
MAX_MEMBER_ID_LENGTH = 36  # a UUID string, as the client generates it


def validate_request(req: Any) -> None:
    """Kafka's KafkaApis.isMemberIdValid (1-36 characters), then its
    GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid (INVALID_REQUEST)."""
    if not req.member_id or len(req.member_id) > MAX_MEMBER_ID_LENGTH:
        raise HeartbeatError(E.INVALID_REQUEST, "Invalid member id in the request.")
    checks = [(req.member_id, "MemberId can't be empty."), (req.group_id, "GroupId can't be empty."),
              (req.rack_id, "RackId can't be empty.")]
    for value, message in checks:
        if value is not None and not value.strip():
            raise HeartbeatError(E.INVALID_REQUEST, message)
    if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH and not req.subscribed_topic_names:
        raise HeartbeatError(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    if req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise HeartbeatError(E.INVALID_REQUEST, "MemberEpoch is invalid.")


def check_epoch(member: ShareMember, received: int) -> None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid: a join (0) is always taken; otherwise the epoch
    is the member's, or its previous one (the response carrying the new epoch was lost)."""
    check_member_epoch("share", member, received, True, ", and it does not match the previous member epoch "
                       f"({member.previous_member_epoch})")


def metadata_hash(topic_names: Iterable[str], topics: TopicsView) -> int:
    """A hash of the subscribed topics that exist (id, name, partition count), 0 for none. It plays the
    part of Kafka's metadata hash (a change bumps the group epoch) but is not Kafka's XXH3 value."""
    metas = [m for m in (topics.by_name(n) for n in sorted(set(topic_names))) if m is not None]
    if not metas:
        return 0
    text = "|".join(f"{m.topic_id}:{m.name}:{m.num_partitions}" for m in metas)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True)


class ShareGroupManager(ModernGroupManager):
    """The share group type of one shard (a `types.GroupTypeManager`; what it shares with the consumer
    group type is in `modern.ModernGroupManager`)."""

    record_key_versions = R.KEY_VERSIONS
    group_class = ShareGroup

    def __init__(self, shard: GroupCoordinatorShard, topics: TopicsView | None = None,
                 assignors: Mapping[str, SimpleAssignor] | None = None) -> None:
        super().__init__(shard, topics, {ApiKey.SHARE_GROUP_HEARTBEAT: self.heartbeat,
                                         ApiKey.SHARE_GROUP_DESCRIBE: self.describe},
                         shard.config.share_session_timeout_ms, lambda: self.config.share_groups_enabled)
        self.assignors = dict(assignors if assignors is not None else SHARE_ASSIGNORS)

    @property
    def assignor(self) -> SimpleAssignor:
        """The first of group.share.assignors that exists here (Kafka 4.4 has only `simple`)."""
        for name in self.config.group_share_assignors:
            if name in self.assignors:
                return self.assignors[name]
        return next(iter(self.assignors.values()))

    # ================================================================ ShareGroupHeartbeat
    def heartbeat(self, ctx: ShardRequest, req: Any, now_ms: int) -> ShareGroupHeartbeatResponse:
        def compute(step: Step) -> ShareGroupHeartbeatResponse:
            validate_request(req)
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(req, step, now_ms)
            return self._heartbeat(ctx, req, step, now_ms)

        return self._run("ShareGroupHeartbeat", req, ShareGroupHeartbeatResponse, compute)

    def _group_for_heartbeat(self, group_id: str, create: bool) -> ShareGroup:
        """Kafka's getOrMaybeCreateShareGroup: no conversion from any other type."""
        group = self.groups.get(group_id)
        if group is None and not create:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        if group is None:  # exists once its records are replayed
            return ShareGroup(group_id, NEW_GROUP_EPOCH)
        if not isinstance(group, ShareGroup):
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        return group

    def _heartbeat(self, ctx: ShardRequest, req: Any, step: Step, now_ms: int) -> ShareGroupHeartbeatResponse:
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._group_for_heartbeat(req.group_id, joining)
        member_id = req.member_id
        max_size = self.config.group_share_max_size
        if len(group.members) >= max_size and member_id not in group.members:
            raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED,
                                 f"The share group has reached its maximum capacity of {max_size} members.")
        member = group.members.get(member_id) if joining else self.known_member(group, member_id)
        if member is None:
            log.info("[GroupId %s] Member %s joins the share group using the share protocol.",
                     group.group_id, member_id)
        known = member
        member = member or ShareMember(member_id)
        check_epoch(member, req.member_epoch)
        names = member.subscribed_topic_names
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
        updated = replace(member, rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
                          subscribed_topic_names=names, client_id=ctx.client_id, client_host=ctx.client_host)
        subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        group_epoch = self._maybe_bump_epoch(group, known, updated, step)
        target_epoch, target = self._target(group, group_epoch, updated, step, now_ms)
        final = self._reconcile(group, updated, target_epoch, target, subscription_changed, step)
        self._maybe_initialize(group, known, updated, step)
        step.after.append(lambda: self.schedule_session(group.group_id, member_id, now_ms))
        response = ShareGroupHeartbeatResponse(error_code=0, member_id=final.member_id,
                                               member_epoch=final.member_epoch,
                                               heartbeat_interval_ms=self.config.share_heartbeat_interval_ms(
                                                   group.group_id))
        if joining or req.subscribed_topic_names is not None or not partitions_equal(final.assigned, member.assigned):
            response.assignment = heartbeat_assignment(final.assigned)
        return response

    def _maybe_bump_epoch(self, group: ShareGroup, known: ShareMember | None, updated: ShareMember,
                          step: Step) -> int:
        """Write the member's metadata if it changed; bump the group epoch when the subscriptions or the
        subscribed topics (created, deleted, grown) changed."""
        bump = False
        if known is None or updated.metadata_fields() != known.metadata_fields():
            step.records.append(R.member_metadata_record(group.group_id, updated))
            bump = known is None or updated.subscribed_topic_names != known.subscribed_topic_names
        new_hash = metadata_hash(group.subscribed_topic_names(known, updated), self.topics)
        epoch = group.group_epoch
        if bump or new_hash != group.metadata_hash:
            epoch += 1
            step.records.append(R.group_epoch_record(group.group_id, epoch, new_hash))
            log.info("[GroupId %s] Bumped group epoch to %d with metadata hash %d.", group.group_id, epoch, new_hash)
        return epoch

    def _target(self, group: ShareGroup, group_epoch: int, updated: ShareMember, step: Step,
                now_ms: int) -> tuple[int, Partitions]:
        if group_epoch <= group.assignment_epoch:
            return group.assignment_epoch, group.target.get(updated.member_id, {})
        members = dict(group.members)
        members[updated.member_id] = updated
        targets = self.compute_target(group, members)
        step.records += changed_targets(group, targets, R.target_assignment_record)
        step.records.append(R.target_epoch_record(group.group_id, group_epoch, now_ms))
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
                 group.group_id, group_epoch, self.assignor.name)
        return group_epoch, targets.get(updated.member_id, {})

    def compute_target(self, group: ShareGroup, members: Mapping[str, ShareMember]) -> dict[str, Partitions]:
        """Every member's new target assignment from the assignor (Kafka's ShareTargetAssignmentBuilder)."""
        metas = subscription_metadata({t for m in members.values() for t in m.subscribed_topic_names}, self.topics)
        specs = {mid: MemberSpec(subscribed_topic_ids=frozenset(metas[n].topic_id for n in m.subscribed_topic_names
                                                                if n in metas),
                                 rack_id=m.rack_id, assigned=dict(group.target.get(mid, {})))
                 for mid, m in members.items()}
        topics = {t.topic_id: TopicSpec(name=t.name, num_partitions=t.num_partitions) for t in metas.values()}
        result = self.assignor.assign(GroupSpec(members=specs), topics)
        return {mid: {t: frozenset(ps) for t, ps in result.get(mid, {}).items() if ps} for mid in members}

    @staticmethod
    def _reconcile(group: ShareGroup, member: ShareMember, target_epoch: int, target: Partitions,
                   subscription_changed: bool, step: Step) -> ShareMember:
        """Kafka's ShareGroupAssignmentBuilder: the member takes its target at once."""
        if not subscription_changed and member.member_epoch == target_epoch and partitions_equal(
                member.assigned, target) and member.member_id in group.members:
            return member
        updated = replace(member, member_epoch=target_epoch, previous_member_epoch=member.member_epoch,
                          assigned=dict(target))
        if updated != member or member.member_id not in group.members:
            step.records.append(R.current_assignment_record(group.group_id, updated))
            log.info("[GroupId %s] Member %s new assignment state: epoch=%d, previousEpoch=%d, assignedPartitions=%s.",
                     group.group_id, updated.member_id, updated.member_epoch, updated.previous_member_epoch,
                     sorted_pairs(updated.assigned))
        return updated

    def _maybe_initialize(self, group: ShareGroup, known: ShareMember | None, updated: ShareMember,
                          step: Step) -> None:
        """ShareGroupStatePartitionMetadata: the subscribed topics' partitions not yet initialized are
        recorded as initialized (Kafka records them initializing, asks the share coordinator to
        initialize their state, then records them initialized; here the data path initializes
        share-partition state lazily, so they are recorded initialized at once)."""
        wanted: dict[Any, InitializedTopic] = {}
        for name in group.subscribed_topic_names(known, updated):
            meta = self.topics.by_name(name)
            if meta is not None and meta.num_partitions > 0:
                wanted[meta.topic_id] = InitializedTopic(meta.name, frozenset(range(meta.num_partitions)))
        initialized = dict(group.initialized)
        changed = False
        for topic_id, topic in wanted.items():
            have = initialized.get(topic_id)
            if have is None or not topic.partitions <= have.partitions:
                old = have.partitions if have is not None else frozenset()
                initialized[topic_id] = InitializedTopic(topic.name, old | topic.partitions)
                changed = True
        if changed:
            step.records.append(R.state_partition_metadata_record(group.group_id, {}, initialized, group.deleting))

    # ================================================================ leaving, fencing
    def _leave(self, req: Any, step: Step, now_ms: int) -> ShareGroupHeartbeatResponse:
        group = self.groups.get(req.group_id)
        if group is None:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        if not isinstance(group, ShareGroup):
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group.")
        member = self.known_member(group, req.member_id)
        log.info("[GroupId %s] Member %s left the share group.", group.group_id, member.member_id)
        self._fence_records(group, member, step, now_ms)
        return ShareGroupHeartbeatResponse(error_code=0, member_id=req.member_id, member_epoch=req.member_epoch)

    def _fence_records(self, group: ShareGroup, member: ShareMember, step: Step, now_ms: int) -> None:
        """Kafka's shareGroupFenceMember: the member's tombstones, a new epoch (with the new metadata
        hash); the last member leaving brings the assignment epoch up to it."""
        gid = group.group_id
        step.records += R.remove_member_records(gid, member.member_id)
        new_hash = metadata_hash(group.subscribed_topic_names(member, None), self.topics)
        epoch = group.group_epoch + 1
        step.records.append(R.group_epoch_record(gid, epoch, new_hash))
        if set(group.members) <= {member.member_id}:
            step.records.append(R.target_epoch_record(gid, epoch, now_ms))
        step.after.append(lambda: self.timers.cancel(self.session_timer_key(gid, member.member_id)))

    def forget_topics(self, group_id: str, topic_ids: set[UUID]) -> set[UUID]:
        """DeleteShareGroupOffsets: the topics' share state is gone, so they leave the group's
        ShareGroupStatePartitionMetadata (a member subscribing to them again initializes them anew).
        Returns the topics that were initialized (the others have no offset information)."""
        group = self.shard.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            return set()
        gone = {t for t in topic_ids if t in group.initialized}
        if gone:
            kept = {t: v for t, v in group.initialized.items() if t not in gone}
            self.shard.emit(*R.state_partition_metadata_record(group.group_id, {}, kept, group.deleting))
        return gone

    # ================================================================ ShareGroupDescribe
    def describe(self, ctx: ShardRequest, req: Any, now_ms: int) -> ShareGroupDescribeResponse:
        return ShareGroupDescribeResponse(groups=[describe_group(
            gid, self.groups.get(gid), self.assignor.name, self.topics, bool(req.include_authorized_operations))
            for gid in req.group_ids])

    # ================================================================ replay / load / unload
    def replay(self, key: bytes, value: bytes | None, producer_id: int) -> None:
        replay_record(self.groups, key, value)

    def on_loaded(self, now_ms: int) -> None:
        """Re-arm every member's session timer."""
        for group in self.own_groups():
            for member_id in group.members:
                self.schedule_session(group.group_id, member_id, now_ms)
