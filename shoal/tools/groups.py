"""`shoal groups list|describe`: consumer groups over the wire, as kafka-consumer-groups.

list      ListGroups sent to every broker (each coordinator knows only its own groups), with
          each group's type (classic or consumer, ListGroups v5+).
describe  FindCoordinator, then ConsumerGroupDescribe (API 69: member and assignment epochs,
          current and target assignments) for a consumer-protocol group, DescribeGroups (members
          and their decoded assignments) for a classic one, as Kafka's admin client does;
          OffsetFetch (committed offsets), Metadata + ListOffsets(latest) to each partition's
          leader (log end offsets), and the lag of every partition.

DescribeGroups does not say which member is the group leader, so neither do we.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shoal.assignors.consumer_protocol import decode_assignment
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.consumer_group_describe_request import ConsumerGroupDescribeRequest
from shoal.protocol.generated.describe_groups_request import DescribeGroupsRequest
from shoal.protocol.generated.list_groups_request import ListGroupsRequest
from shoal.protocol.generated.list_offsets_request import ListOffsetsRequest
from shoal.protocol.generated.offset_fetch_request import OffsetFetchRequest
from shoal.tools.table import MISSING, compact_partitions, format_table, lag
from shoal.tools.wire import ToolClient, ToolError, check_error, error_name

__all__ = [
    "GROUP_STATES",
    "GROUP_TYPES",
    "GroupDescription",
    "GroupListing",
    "MemberInfo",
    "PartitionInfo",
    "describe_group",
    "format_description",
    "format_listings",
    "list_groups",
    "normalize_states",
    "normalize_types",
    "type_name",
]

# Kafka's group states (classic and consumer protocols), as ListGroups reports them.
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty",
                "Assigning", "Reconciling")
# The group types kafka-consumer-groups knows (its --type values), as Kafka's GroupType prints them.
GROUP_TYPES = ("classic", "consumer")
LATEST_TIMESTAMP = -1
_RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
              ErrorCode.NOT_COORDINATOR}


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    state: str
    protocol_type: str
    coordinator: int
    group_type: str = ""  # "classic" / "consumer" (ListGroups v5+); "" from older brokers


@dataclass
class MemberInfo:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[tuple[str, int]] | None  # None: not a consumer-protocol blob we can read
    # consumer-protocol (KIP-848) members only: None for classic members
    member_epoch: int | None = None
    target_assignment: list[tuple[str, int]] | None = None


@dataclass
class PartitionInfo:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    owner: MemberInfo | None
    leader_epoch: int | None = None  # of the committed offset, when the committer gave one

    @property
    def lag(self) -> int | None:
        return lag(self.committed, self.log_end)


@dataclass
class GroupDescription:
    group_id: str
    coordinator: tuple[int, str, int]
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberInfo] = field(default_factory=list)
    partitions: list[PartitionInfo] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    group_type: str = "classic"
    # consumer-protocol groups only: None for classic groups
    group_epoch: int | None = None
    assignment_epoch: int | None = None


def type_name(group_type: str) -> str:
    """Kafka's GroupType.toString: "classic" -> "Classic"; "" (a broker too old to say) -> "Unknown"."""
    return group_type.capitalize() if group_type else "Unknown"


def _comma_separated(values: Iterable[str]) -> list[tuple[str, str]]:
    """(value, part) for each non-empty part (stripped) of comma-separated ``values``."""
    return [(s, part.strip()) for s in values for part in s.split(",") if part.strip()]


def normalize_types(types: Iterable[str]) -> list[str]:
    """``--type`` values (comma-separated, case-insensitive) in Kafka's spelling; ToolError on others."""
    parts = _comma_separated(types)
    for s, part in parts:
        if part.lower() not in GROUP_TYPES:
            raise ToolError(f"Invalid types list '{s}'. Valid types are: {', '.join(GROUP_TYPES)}")
    return [part.lower() for _, part in parts]


def normalize_states(states: Iterable[str]) -> list[str]:
    """Map user-typed states to Kafka's spelling (case-insensitive); ToolError on an unknown one."""
    known = {s.lower(): s for s in GROUP_STATES}
    parts = _comma_separated(states)
    for _, part in parts:
        if part.lower() not in known:
            raise ToolError(f"unknown group state {part!r}; valid states: {', '.join(GROUP_STATES)}")
    return [known[part.lower()] for _, part in parts]


def _retrying(fn, code_of=lambda r: r.error_code, attempts: int = 20):  # noqa: ANN001, ANN202 - tiny local helper
    """Call ``fn`` until its answer's error code (``code_of``) is not a retriable one (coordinator
    loading, moving)."""
    for _ in range(attempts - 1):
        result = fn()
        if code_of(result) not in _RETRIABLE:
            return result
        time.sleep(0.1)
    return fn()


def list_groups(client: ToolClient, states: Iterable[str] = (),
                errors: list[str] | None = None, types: Iterable[str] = ()) -> list[GroupListing]:
    """Every group of the cluster (ListGroups to each broker), optionally only in ``states`` and of
    ``types``.

    A broker that cannot be asked is reported in ``errors`` (if given, else raised) and skipped.
    """
    wanted = normalize_states(states)
    wanted_lower = {s.lower() for s in wanted}
    wanted_types = normalize_types(types)
    out: dict[str, GroupListing] = {}
    for node_id in client.all_nodes():
        try:
            _list_node(client, node_id, wanted, out, wanted_types)
        except ToolError as e:
            if errors is None:
                raise
            errors.append(f"broker {node_id}: {e}")
    listings = sorted(out.values(), key=lambda g: g.group_id)
    if wanted_lower:
        # Brokers older than ListGroups v4 report no state (and cannot filter): ask DescribeGroups.
        listings = [g for g in listings
                    if (g.state or _describe_state(client, g.group_id)).lower() in wanted_lower]
    if wanted_types:  # a broker before ListGroups v5 cannot filter; its groups are all classic
        listings = [g for g in listings if (g.group_type or "classic") in wanted_types]
    return listings


def _list_node(client: ToolClient, node_id: int, wanted: list[str], out: dict[str, GroupListing],
               types: Iterable[str] = ()) -> None:
    conn = client.node(node_id)
    v = conn.version(ApiKey.LIST_GROUPS)
    req = ListGroupsRequest(states_filter=wanted if v >= 4 else [], types_filter=list(types) if v >= 5 else [])
    resp = _retrying(lambda: conn.send(req, v))
    check_error(resp.error_code, "ListGroups failed")
    for g in resp.groups:
        out[g.group_id] = GroupListing(g.group_id, g.group_state if v >= 4 else "", g.protocol_type, node_id,
                                       g.group_type if v >= 5 else "")


def _describe_state(client: ToolClient, group_id: str) -> str:
    conn = client.find_coordinator(group_id)
    resp = conn.send(DescribeGroupsRequest(groups=[group_id]))
    return resp.groups[0].group_state


def format_listings(listings: list[GroupListing], with_state: bool = True) -> str:
    """The `groups list` table: GROUP, TYPE, STATE, PROTOCOL-TYPE."""
    if not with_state:
        return "\n".join(g.group_id for g in listings)
    return format_table(["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"],
                        [(g.group_id, type_name(g.group_type), g.state or MISSING, g.protocol_type or MISSING)
                         for g in listings])


def _decode_member_assignment(protocol_type: str, blob: bytes) -> list[tuple[str, int]] | None:
    if protocol_type != "consumer":
        return None
    try:
        return sorted((tp.topic, tp.partition) for tp in decode_assignment(blob).partitions)
    except ValueError:
        return None


def _committed_offsets(conn, group_id: str) -> dict[tuple[str, int], int]:  # noqa: ANN001
    """OffsetFetch for all of the group's partitions: {(topic, partition): offset}."""
    return {tp: off for tp, (off, _) in _committed_with_epochs(conn, group_id).items()}


def _committed_with_epochs(conn, group_id: str) -> dict[tuple[str, int], tuple[int, int | None]]:  # noqa: ANN001
    """OffsetFetch for all of the group's partitions: {(topic, partition): (offset, leader epoch)}."""
    v = conn.version(ApiKey.OFFSET_FETCH)
    if v >= 8:
        req = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group_id, topics=None)])
    else:
        # v2+ accepts null topics (= all); v0-1 cannot list all partitions
        if v < 2:
            raise ToolError(f"broker {conn.host}:{conn.port} only supports OffsetFetch v{v} (needs v2+)")
        req = OffsetFetchRequest(group_id=group_id, topics=None)

    def call():  # noqa: ANN202
        resp = conn.send(req, v)
        return resp.groups[0] if v >= 8 else resp

    g = _retrying(call)
    check_error(g.error_code, f"OffsetFetch for group {group_id!r} failed")
    out: dict[tuple[str, int], tuple[int, int | None]] = {}
    for t in g.topics:
        for p in t.partitions:
            if p.error_code == ErrorCode.NONE and p.committed_offset >= 0:
                epoch = getattr(p, "committed_leader_epoch", -1) if v >= 5 else -1
                out[(t.name, p.partition_index)] = (p.committed_offset, epoch if epoch >= 0 else None)
    return out


def list_offsets(client: ToolClient, partitions: Iterable[tuple[str, int]], timestamp: int,
                 warnings: list[str] | None = None) -> dict[tuple[str, int], int]:
    """ListOffsets to each partition's leader: -1 latest, -2 earliest, else the first offset at or
    after ``timestamp`` (ms; -1 where no record is that late)."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    md = client.metadata(sorted({t for t, _ in wanted}))
    leaders: dict[tuple[str, int], int] = {}
    for t in md.topics:
        if t.error_code != ErrorCode.NONE:
            if warnings is not None:
                warnings.append(f"topic {t.name}: {error_name(t.error_code)}")
            continue
        for p in t.partitions:
            leaders[(t.name, p.partition_index)] = p.leader_id
    by_leader: dict[int, dict[str, list[int]]] = {}
    for topic, p in wanted:
        leader = leaders.get((topic, p), -1)
        if leader < 0:
            continue
        by_leader.setdefault(leader, {}).setdefault(topic, []).append(p)
    out: dict[tuple[str, int], int] = {}
    for leader, topics in by_leader.items():
        conn = client.node(leader)
        v = conn.version(ApiKey.LIST_OFFSETS)
        req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=timestamp,
                                                        current_leader_epoch=-1, max_num_offsets=1)
                for p in ps])
            for t, ps in topics.items()])
        resp = conn.send(req, v)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    if warnings is not None:
                        warnings.append(f"offset of {t.name}-{p.partition_index}: {error_name(p.error_code)}")
                    continue
                offset = p.offset if v >= 1 else (p.old_style_offsets[0] if p.old_style_offsets else -1)
                out[(t.name, p.partition_index)] = offset
    return out


def _consumer_group_describe(conn, group_id: str) -> Any | None:  # noqa: ANN001
    """ConsumerGroupDescribe (API 69) of ``group_id``; None when the broker does not know the API or
    the group is not a consumer-protocol group (GROUP_ID_NOT_FOUND: Kafka's admin client then asks
    DescribeGroups, and so do we)."""
    if ApiKey.CONSUMER_GROUP_DESCRIBE not in conn.api_versions:
        return None
    g = _retrying(lambda: conn.send(ConsumerGroupDescribeRequest(group_ids=[group_id])).groups[0])
    code = g.error_code
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    check_error(code, f"ConsumerGroupDescribe for group {group_id!r} failed")
    return g


def _partitions(assignment: Any) -> list[tuple[str, int]]:
    return sorted((t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)


def _from_consumer_describe(g: Any, group_id: str, coordinator: tuple[int, str, int]) -> GroupDescription:
    desc = GroupDescription(group_id, coordinator, g.group_state, "consumer", g.assignor_name,
                            group_type="consumer", group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch)
    for m in g.members:
        desc.members.append(MemberInfo(m.member_id, m.instance_id, m.client_id, m.client_host,
                                       _partitions(m.assignment), member_epoch=m.member_epoch,
                                       target_assignment=_partitions(m.target_assignment)))
    return desc


def _from_describe_groups(conn, group_id: str, coordinator: tuple[int, str, int]  # noqa: ANN001
                          ) -> tuple[GroupDescription, bool]:
    """DescribeGroups of a classic group: (its description, whether the broker reported it Dead)."""
    g = _retrying(lambda: conn.send(DescribeGroupsRequest(groups=[group_id])).groups[0])
    if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:  # v6 (KIP-1043): what v5 answered Dead, without members
        return GroupDescription(group_id, coordinator, "Dead", "", ""), True
    check_error(g.error_code, f"DescribeGroups for group {group_id!r} failed")
    desc = GroupDescription(group_id, coordinator, g.group_state, g.protocol_type, g.protocol_data)
    for m in g.members:
        desc.members.append(MemberInfo(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                       _decode_member_assignment(g.protocol_type, m.member_assignment)))
    return desc, g.group_state == "Dead"


def describe_group(client: ToolClient, group_id: str) -> GroupDescription:
    """Everything `groups describe` prints; ToolError if the group does not exist."""
    conn = client.find_coordinator(group_id)
    coordinator = next(((n, h, p) for n, (h, p) in client.brokers.items() if (h, p) == (conn.host, conn.port)),
                       (-1, conn.host, conn.port))
    g = _consumer_group_describe(conn, group_id)
    dead = False
    if g is not None:
        desc = _from_consumer_describe(g, group_id, coordinator)
    else:
        desc, dead = _from_describe_groups(conn, group_id, coordinator)
    committed = _committed_with_epochs(conn, group_id)
    if dead and not committed:
        raise ToolError(f"Consumer group '{group_id}' does not exist.")
    owners: dict[tuple[str, int], MemberInfo] = {}
    for info in desc.members:
        for tp in info.assignment or ():
            owners[tp] = info
    keys = set(committed) | set(owners)
    ends = list_offsets(client, keys, LATEST_TIMESTAMP, desc.warnings)  # log end offsets
    desc.partitions = [PartitionInfo(t, p, committed[(t, p)][0] if (t, p) in committed else None,
                                     ends.get((t, p)), owners.get((t, p)),
                                     committed[(t, p)][1] if (t, p) in committed else None)
                       for t, p in sorted(keys)]
    return desc


def _member_table(desc: GroupDescription) -> str:
    """One row per member; a consumer-protocol group's rows add the member epoch and, last, the target
    assignment the member is reconciling towards."""
    consumer = desc.group_type == "consumer"
    rows = []
    for m in desc.members:
        n = MISSING if m.assignment is None else len(m.assignment)
        shown = "(unreadable)" if m.assignment is None else compact_partitions(m.assignment)
        if consumer:
            rows.append((m.member_id, m.group_instance_id, m.client_id, m.host, m.member_epoch, n, shown,
                         compact_partitions(m.target_assignment or ())))
        else:
            rows.append((m.member_id, m.group_instance_id, m.client_id, m.host, n, shown))
    headers = ["CONSUMER-ID", "GROUP-INSTANCE-ID", "CLIENT-ID", "HOST"]
    headers += ["MEMBER-EPOCH", "#PARTITIONS", "ASSIGNMENT", "TARGET-ASSIGNMENT"] if consumer \
        else ["#PARTITIONS", "ASSIGNMENT"]
    return format_table(headers, rows)


def format_description(desc: GroupDescription) -> str:
    """The `groups describe` text: a summary, the members, then one row per partition."""
    node, host, port = desc.coordinator
    lines = [
        f"Group:          {desc.group_id}",
        f"Coordinator:    {host}:{port} (id: {node})",
        f"Type:           {type_name(desc.group_type)}",
        f"State:          {desc.state}",
        f"Protocol type:  {desc.protocol_type or MISSING}",
        f"Assignor:       {desc.protocol or MISSING}",
    ]
    if desc.group_epoch is not None:
        lines += [f"Group epoch:    {desc.group_epoch}",
                  f"Target epoch:   {MISSING if desc.assignment_epoch is None else desc.assignment_epoch}"]
    lines += [f"Members:        {len(desc.members)}", ""]
    if desc.members:
        lines += [_member_table(desc), ""]
    else:
        lines += [f"Consumer group '{desc.group_id}' has no active members.", ""]
    if desc.partitions:
        rows = [(desc.group_id, p.topic, p.partition, p.committed, p.log_end, p.lag,
                 p.owner.member_id if p.owner else None, p.owner.host if p.owner else None,
                 p.owner.client_id if p.owner else None) for p in desc.partitions]
        lines.append(format_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                   "CONSUMER-ID", "HOST", "CLIENT-ID"], rows))
    else:
        lines.append(f"Consumer group '{desc.group_id}' has no assigned partitions and no committed offsets.")
    lines += [f"warning: {w}" for w in desc.warnings]
    return "\n".join(lines)
