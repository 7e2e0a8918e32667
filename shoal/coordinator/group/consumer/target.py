"""Target assignments: the subscribed topics' metadata and the server-side assignor's answer
(Kafka's TargetAssignmentBuilder). Only members whose target changed get a record, then the epoch."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from shoal.assignors.server import GroupSpec, MemberSpec, ServerAssignor, TopicSpec
from shoal.coordinator.group.consumer.group import ConsumerGroup
from shoal.coordinator.group.consumer.member import ConsumerMember, Partitions
from shoal.coordinator.group.consumer.records import target_assignment_record, target_epoch_record
from shoal.coordinator.group.consumer.topics import TopicMeta, TopicsView
from shoal.coordinator.group.modern import changed_targets
from shoal.coordinator.result import Record

log = logging.getLogger(__name__)


class AssignorFailed(Exception):
    """The assignor could not assign (answered UNKNOWN_SERVER_ERROR, as Kafka)."""


def resolve_assignors(names: Iterable[str]) -> dict[str, ServerAssignor]:
    """The configured server assignors, by name, from `shoal.assignors.server`'s registry."""
    server: Any = importlib.import_module("shoal.assignors.server")
    lookup = getattr(server, "lookup", None)
    registry = getattr(server, "SERVER_ASSIGNORS", None) or {}
    out: dict[str, ServerAssignor] = {}
    for name in names:
        assignor = None
        if lookup is not None:
            try:
                assignor = lookup(name)
            except (KeyError, ValueError, LookupError):
                assignor = None
        if assignor is None:
            assignor = registry.get(name) if isinstance(registry, Mapping) else None
        if assignor is None:
            log.warning("group.consumer.assignors names %r, which is no server-side assignor here", name)
            continue
        out[name] = assignor() if isinstance(assignor, type) else assignor
    return out


def subscription_metadata(topic_names: Iterable[str], topics: TopicsView) -> dict[str, TopicMeta]:
    """The metadata of the subscribed topics that exist."""
    out = {}
    for name in sorted(topic_names):
        meta = topics.by_name(name)
        if meta is not None:
            out[name] = meta
    return out


def _spec(topic_names: frozenset[str], member: ConsumerMember, assigned: Partitions,
          metadata: Mapping[str, TopicMeta]) -> MemberSpec:
    ids = frozenset(metadata[n].topic_id for n in topic_names if n in metadata)
    return MemberSpec(subscribed_topic_ids=ids, rack_id=member.rack_id, instance_id=member.instance_id,
                      assigned=dict(assigned))


def compute_target(group: ConsumerGroup, group_epoch: int, updated: ConsumerMember, assignor: ServerAssignor,
                   metadata: Mapping[str, TopicMeta], removed: str | None = None,
                   resolved: Mapping[str, frozenset[str]] | None = None
                   ) -> tuple[list[Record], dict[str, Partitions]]:
    """A new target assignment for `group_epoch` with `updated` in (and `removed`, a replaced static
    member, out): the records to write and every member's new target. A member subscribes to its
    names and to what its regex resolves to (`resolved`, else the group's resolutions)."""
    specs: dict[str, MemberSpec] = {}
    for member_id, member in group.members.items():
        if member_id not in (removed, updated.member_id):
            specs[member_id] = _spec(group.member_topics(member, resolved), member,
                                     group.target.get(member_id, {}), metadata)
    specs[updated.member_id] = _spec(group.member_topics(updated, resolved), updated,
                                     group.target_of(updated.member_id, updated.instance_id), metadata)
    topics = {t.topic_id: TopicSpec(name=t.name, num_partitions=t.num_partitions,
                                    partition_racks=dict(t.partition_racks)) for t in metadata.values()}
    try:
        result = assignor.assign(GroupSpec(members=specs), topics)
    except Exception as e:  # an assignor bug must not take the coordinator down
        raise AssignorFailed(f"Failed to compute a new target assignment for epoch {group_epoch}: {e}") from e
    targets = {mid: {t: frozenset(ps) for t, ps in result.get(mid, {}).items() if ps} for mid in specs}
    records = changed_targets(group, targets, target_assignment_record)
    records.append(target_epoch_record(group.group_id, group_epoch))
    log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
             group.group_id, group_epoch, assignor.name)
    return records, targets
