"""Mixed groups and online migration between the classic and the consumer group types (as Kafka 4.x).

Kafka's GroupMetadataManager facts followed here (group.consumer.migration.policy, default bidirectional):

- upgrade: the first ConsumerGroupHeartbeat (epoch 0) to a non-empty classic group of protocol type
  "consumer" converts it in place (validateOnlineUpgrade: policy, protocol type, group.consumer.max.size):
  the classic GroupMetadata tombstone, then the consumer group's records (ConsumerGroup.fromClassicGroup:
  group and assignment epochs = the generation, each member Stable at that epoch, keeping the partitions
  of its classic assignment). Parked JoinGroup/SyncGroup are answered REBALANCE_IN_PROGRESS. A member
  whose assignment carries assignor user data refuses the upgrade (GROUP_ID_NOT_FOUND): the consumer
  group would lose it.
- classic members inside a consumer group keep speaking JoinGroup / SyncGroup / Heartbeat / LeaveGroup:
  a JoinGroup runs the member through the consumer group's epoch bump, target assignment and
  reconciliation; SyncGroup answers its assigned partitions in the consumer protocol; Heartbeat answers
  REBALANCE_IN_PROGRESS when it must rejoin to reconcile; its classic session timeout applies.
- downgrade: when the last consumer-protocol member leaves (or is fenced) and every remaining member is a
  classic one, the group becomes a classic group again (the consumer group's tombstones, then a
  GroupMetadata record with the members and their target assignment), which then rebalances.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from shoal.assignors.consumer_protocol import (
    ASSIGNMENT_MAX_VERSION,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from shoal.assignors.types import Assignment, TopicPartition
from shoal.coordinator.group.consumer import records as R
from shoal.coordinator.group.consumer.group import ConsumerGroup
from shoal.coordinator.group.consumer.member import ClassicMeta, ConsumerMember, MemberState, Partitions
from shoal.coordinator.group.consumer.replay import replay_record
from shoal.coordinator.group.consumer.validation import HeartbeatError
from shoal.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from shoal.coordinator.group.group import ClassicGroup
from shoal.coordinator.group.member import ClassicMember
from shoal.coordinator.group.rebalance import heartbeat_timer_key
from shoal.coordinator.group.records import group_metadata_key, group_metadata_value
from shoal.coordinator.group.responses import join_response, sync_response
from shoal.coordinator.group.state import GroupState
from shoal.coordinator.group.types import Group
from shoal.coordinator.result import Record, ShardRequest
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.heartbeat_response import HeartbeatResponse

if TYPE_CHECKING:
    from shoal.coordinator.group.shard import GroupCoordinatorShard

log = logging.getLogger(__name__)
E = ErrorCode
_H = struct.Struct(">h")


class GroupMigration:
    """Conversions between group types, and the classic protocol inside consumer groups."""

    def __init__(self, shard: GroupCoordinatorShard) -> None:
        self.shard = shard
        self.config = shard.config

    # ================================================================ partitions <-> names
    def _by_ids(self, pairs: list[tuple[str, int]]) -> Partitions:
        out: dict[UUID, set[int]] = {}
        for topic, p in pairs:
            meta = self.shard.consumer.topics.by_name(topic)
            if meta is not None:  # a topic gone is dropped (Kafka: not in the metadata image)
                out.setdefault(meta.topic_id, set()).add(p)
        return {t: frozenset(ps) for t, ps in out.items()}

    def _encode(self, partitions: Partitions, protocols: tuple[tuple[str, bytes], ...]) -> bytes:
        """The partitions as a ConsumerProtocolAssignment, at the version of the member's first protocol."""
        pairs: list[TopicPartition] = []
        for topic_id, ps in sorted(partitions.items(), key=lambda kv: str(kv[0])):
            meta = self.shard.consumer.topics.by_id(topic_id)
            if meta is not None:
                pairs += [TopicPartition(meta.name, p) for p in sorted(ps)]
        version = ASSIGNMENT_MAX_VERSION
        if protocols and len(protocols[0][1]) >= 2:
            version = min(max(_H.unpack_from(protocols[0][1], 0)[0], 0), ASSIGNMENT_MAX_VERSION)
        return encode_assignment(Assignment(pairs), version)

    # ================================================================ upgrade
    def can_upgrade(self, group: ClassicGroup) -> bool:
        """Kafka's validateOnlineUpgrade."""
        if not self.config.upgrade_enabled:
            log.info("Cannot upgrade classic group %s to consumer group because the online upgrade is disabled.",
                     group.group_id)
            return False
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE or group.protocol_name is None:
            log.info("Cannot upgrade classic group %s to consumer group because the group does not use the "
                     "consumer embedded protocol.", group.group_id)
            return False
        if group.size() > self.config.group_consumer_max_size:
            log.info("Cannot upgrade classic group %s to consumer group because the group size exceeds the "
                     "consumer group maximum size.", group.group_id)
            return False
        return True

    def _from_classic(self, group: ClassicGroup) -> list[ConsumerMember]:
        generation = group.generation_id
        members = []
        for cm in group.members.values():
            try:
                sub = decode_subscription(cm.metadata(group.protocol_name or ""))
                assignment = decode_assignment(cm.assignment)
                assigned = self._by_ids(list(assignment.partitions))
            except (ValueError, KeyError) as e:
                log.warning("Cannot upgrade the classic group %s: malformed consumer protocol (%s).",
                            group.group_id, e)
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {group.group_id} to "
                                     "consumer group because the embedded consumer protocol is malformed.") from e
            if assignment.user_data:  # Kafka: "userData from a custom assignor would be lost"
                log.warning("Cannot upgrade classic group %s to consumer group: userData from a custom assignor "
                            "would be lost.", group.group_id)
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {group.group_id} to "
                                     "consumer group because an unsupported custom assignor is in use. Please refer "
                                     "to the documentation or switch to a default assignor before re-attempting the "
                                     "upgrade.")
            members.append(ConsumerMember(
                cm.member_id, member_epoch=generation, previous_member_epoch=generation, state=MemberState.STABLE,
                instance_id=cm.group_instance_id, rack_id=sub.rack_id, rebalance_timeout_ms=cm.rebalance_timeout_ms,
                client_id=cm.client_id, client_host=cm.client_host,
                subscribed_topic_names=tuple(sorted(set(sub.topics))), assigned=assigned,
                classic=ClassicMeta(cm.session_timeout_ms, tuple((n, bytes(m)) for n, m in cm.protocols))))
        return members

    def upgrade(self, group: ClassicGroup, now_ms: int, records: list[Record],
                after: list[Callable[[], None]]) -> ConsumerGroup:
        """Kafka's convertToConsumerGroup: add the conversion's records to ``records`` (written with the
        heartbeat that triggered it, so a heartbeat that then fails leaves the classic group as it was,
        as Kafka's rollback does) and its side effects to ``after``; return the consumer group those
        records make, for the heartbeat to go on with."""
        gid, generation = group.group_id, group.generation_id
        members = self._from_classic(group)
        converted = [R.member_subscription_record(gid, m) for m in members]
        converted.append(R.group_epoch_record(gid, generation))
        converted += [R.target_assignment_record(gid, m.member_id, m.assigned) for m in members]
        converted.append(R.target_epoch_record(gid, generation))
        converted += [R.current_assignment_record(gid, m) for m in members]
        records += group.tombstone_records()
        records += converted
        scratch: dict[str, Group] = {}
        for key, value in converted:
            replay_record(scratch, key, value)
        classic, consumer = self.shard.classic, self.shard.consumer

        def switch_over() -> None:
            for cm in group.members.values():
                classic.release_waiters(cm, E.REBALANCE_IN_PROGRESS)
                self.shard.timers.cancel(heartbeat_timer_key(gid, cm.member_id))
            log.info("[GroupId %s] Converted the classic group (generation %d, %d members) to a consumer group.",
                     gid, generation, len(members))
            for m in members:
                assert m.classic is not None
                consumer.schedule_session(gid, m.member_id, now_ms, m.classic.session_timeout_ms)

        after.insert(0, switch_over)
        new = scratch[gid]
        assert isinstance(new, ConsumerGroup)
        return new

    # ================================================================ downgrade
    def should_downgrade(self, group: ConsumerGroup, leaving_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember."""
        leaving = group.members.get(leaving_id)
        others = [m for mid, m in group.members.items() if mid != leaving_id]
        if leaving is None or leaving.classic is not None or any(m.classic is None for m in others):
            return False
        if not others:
            return False
        if not self.config.downgrade_enabled:
            log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is "
                     "disabled.", group.group_id)
            return False
        if len(others) > self.config.group_max_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group size is greater "
                     "than classic group max size.", group.group_id)
            return False
        return True

    def downgrade(self, group_id: str, leaving_id: str, now_ms: int) -> None:
        """Kafka's convertToClassicGroup (a member left): records, then the classic group rebalances."""
        group = self.shard.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return
        classic_mgr = self.shard.classic
        new = ClassicGroup(group_id, now_ms, state=GroupState.STABLE, keep_alive=classic_mgr.schedule_heartbeat)
        new.generation_id = group.group_epoch
        new.protocol_type = CONSUMER_PROTOCOL_TYPE
        assignment: dict[str, bytes] = {}
        for mid, m in group.members.items():
            if mid == leaving_id or m.classic is None:
                continue
            new.add_member(ClassicMember(
                member_id=mid, group_instance_id=m.instance_id, client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms, session_timeout_ms=m.classic.session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE, protocols=list(m.classic.protocols)))
            assignment[mid] = self._encode(group.target.get(mid, {}), m.classic.protocols)
        new.protocol_name = new.select_protocol()
        new.subscribed_topics = new.compute_subscribed_topics()
        for mid, cm in new.members.items():
            cm.assignment = assignment[mid]
        records = group.tombstone_records()
        records.append((group_metadata_key(group_id), group_metadata_value(new.metadata_value(assignment))))
        for key, value in records:
            self.shard.emit(key, value)
        for mid in group.members:
            self.shard.consumer.cancel_timers(group_id, mid)
        # As Kafka, the live state is set directly: the members keep all their protocols.
        self.shard.groups[group_id] = new
        log.info("[GroupId %s] Converted the consumer group (epoch %d) to a classic group with %d members.",
                 group_id, new.generation_id, new.size())
        for cm in new.members.values():
            classic_mgr.schedule_heartbeat(new, cm, now_ms)
        classic_mgr.prepare_rebalance(new, now_ms, f"Downgrade group {group_id} from consumer to classic.")

    # ================================================================ the classic protocol in a consumer group
    def _supports(self, group: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
        """Kafka's ConsumerGroup.supportsClassicProtocols."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        classic = [m.classic for m in group.members.values() if m.classic is not None]
        if not classic:
            return bool(names)
        return any(all(name in {n for n, _ in c.protocols} for c in classic) for name in names)

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember plus throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            member = group.static_member(instance_id)
            if member is not None and member.member_id != member_id:
                raise HeartbeatError(E.FENCED_INSTANCE_ID)
        if member is None or member.classic is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID)
        return member

    def join(self, ctx: ShardRequest, req: Any, group: ConsumerGroup, now_ms: int) -> Any:
        """Kafka's classicGroupJoinToConsumerGroup (no leader: every member gets its own assignment)."""
        v = ctx.api_version
        instance_id = req.group_instance_id if v >= 5 else None
        member_id = req.member_id
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return join_response(v, error=E.INVALID_SESSION_TIMEOUT, member_id=member_id)
        unknown = member_id == ""
        if unknown:
            member_id = self.shard.classic._new_member_id(ctx.client_id, instance_id)
        if len(group.members) >= cfg.group_consumer_max_size and member_id not in group.members:
            return join_response(v, error=E.GROUP_MAX_SIZE_REACHED, member_id=member_id)
        protocols = tuple((p.name, bytes(p.metadata)) for p in req.protocols)
        if not self._supports(group, req.protocol_type, [n for n, _ in protocols]):
            return join_response(v, error=E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if unknown and instance_id is None and v >= 4:
            log.info("[GroupId %s] Dynamic member with unknown member id joins the consumer group. Created a new "
                     "member id %s and requesting the member to rejoin with this id.", group.group_id, member_id)
            return join_response(v, error=E.MEMBER_ID_REQUIRED, member_id=member_id)
        try:
            member = self._joining_member(group, member_id, instance_id, unknown)
            sub = decode_subscription(protocols[0][1])
        except HeartbeatError as e:
            return join_response(v, error=e.code, member_id=member_id)
        except ValueError:
            return join_response(v, error=E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        updated = replace(
            member, instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=sub.rack_id if sub.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
            server_assignor=None, subscribed_topic_names=tuple(sorted(set(sub.topics))), client_id=ctx.client_id,
            client_host=ctx.client_host, classic=ClassicMeta(req.session_timeout_ms, protocols))
        final = self.shard.consumer.classic_join(group, member, updated, self._by_ids(list(sub.owned_partitions)),
                                                 now_ms)
        if isinstance(final, HeartbeatError):
            return join_response(v, error=final.code, member_id=member_id)
        return join_response(v, error=E.NONE, member_id=final.member_id, generation_id=final.member_epoch,
                             protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocols[0][0], leader="",
                             members=[])

    @staticmethod
    def _joining_member(group: ConsumerGroup, member_id: str, instance_id: str | None,
                        unknown: bool) -> ConsumerMember:
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None and not unknown:
                return ConsumerMember(member_id)  # Kafka creates the member with the id it was given
            return member or ConsumerMember(member_id)
        existing = group.static_member(instance_id)
        if existing is None:
            return group.members.get(member_id) or ConsumerMember(member_id)
        if existing.member_id != member_id:
            # Replacing a static member through a classic JoinGroup is not supported here.
            raise HeartbeatError(E.FENCED_INSTANCE_ID)
        return existing

    def sync(self, ctx: ShardRequest, req: Any, group: ConsumerGroup, now_ms: int) -> Any:
        """Kafka's classicGroupSyncToConsumerGroup."""
        v = ctx.api_version
        try:
            member = self._member(group, req.member_id, req.group_instance_id if v >= 3 else None)
        except HeartbeatError as e:
            return sync_response(v, error=e.code)
        assert member.classic is not None
        if req.generation_id != member.member_epoch:
            return sync_response(v, error=E.ILLEGAL_GENERATION)
        if v >= 5 and (req.protocol_type != CONSUMER_PROTOCOL_TYPE
                       or req.protocol_name != member.classic.protocols[0][0]):
            return sync_response(v, error=E.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            return sync_response(v, error=E.REBALANCE_IN_PROGRESS)
        self.shard.consumer.schedule_session(group.group_id, member.member_id, now_ms,
                                             member.classic.session_timeout_ms)
        return sync_response(v, error=E.NONE, assignment=self._encode(member.assigned, member.classic.protocols),
                             protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=member.classic.protocols[0][0])

    def heartbeat(self, ctx: ShardRequest, req: Any, group: ConsumerGroup, now_ms: int) -> Any:
        """Kafka's classicGroupHeartbeatToConsumerGroup."""
        try:
            member = self._member(group, req.member_id, req.group_instance_id if ctx.api_version >= 3 else None)
        except HeartbeatError as e:
            return HeartbeatResponse(error_code=e.code)
        assert member.classic is not None
        if req.generation_id != member.member_epoch:
            return HeartbeatResponse(error_code=E.ILLEGAL_GENERATION)
        self.shard.consumer.schedule_session(group.group_id, member.member_id, now_ms,
                                             member.classic.session_timeout_ms)
        if (member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS
                or (member.state == MemberState.UNRELEASED_PARTITIONS
                    and not self._waiting_on_unreleased(group, member))):
            return HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS)
        return HeartbeatResponse(error_code=E.NONE)

    @staticmethod
    def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerMember) -> bool:
        for topic_id, ps in group.target.get(member.member_id, {}).items():
            for p in ps - member.assigned.get(topic_id, frozenset()):
                if group.current_partition_epoch(topic_id, p) != -1:
                    return True
        return False

    def leave(self, ctx: ShardRequest, req: Any, group: ConsumerGroup, now_ms: int) -> Any:
        """Kafka's classicGroupLeaveToConsumerGroup: each classic member leaves (a new group epoch)."""
        v = ctx.api_version
        leaving = [(m.member_id, m.group_instance_id) for m in req.members] if v >= 3 else [(req.member_id, None)]
        results: list[tuple[str, str | None, ErrorCode]] = []
        for member_id, instance_id in leaving:
            current = self.shard.groups.get(group.group_id)
            if not isinstance(current, ConsumerGroup):
                results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                continue
            member = current.static_member(instance_id) if instance_id is not None else current.members.get(member_id)
            if member is None or member.classic is None:
                results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                continue
            if instance_id is not None and member_id != "" and member.member_id != member_id:
                results.append((member_id, instance_id, E.FENCED_INSTANCE_ID))
                continue
            log.info("[GroupId %s] Member %s has left group through explicit `LeaveGroup` request.",
                     group.group_id, member.member_id)
            self.shard.consumer.fence_now(current, member, now_ms)  # its fencing records, written now
            results.append((member.member_id, instance_id, E.NONE))
        return self.shard.classic._leave_response(v, E.NONE, results)
