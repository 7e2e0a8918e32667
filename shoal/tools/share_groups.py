"""`shoal share-groups`: Kafka 4.4's kafka-share-groups.sh (ShareGroupCommand) for share groups (KIP-932).

Same options (Kafka's action flags: --list, --describe, --reset-offsets, --delete, --delete-offsets), same
output text, same messages and exit statuses as Kafka 4.4's tool in the same situation:

--list [--state [STATES]]            ListGroups (type "share") to every broker
--describe --group G|--all-groups    ShareGroupDescribe, and for the offsets view (the default)
  [--offsets|--members|--state]      DescribeShareGroupOffsets (START-OFFSET, LEADER-EPOCH, LAG)
  [--verbose]
--reset-offsets --group G            AlterShareGroupOffsets (the group must be Empty or not exist):
  --dry-run|--execute [--export]     --to-earliest, --to-latest, --to-offset N, --to-datetime T,
  --topic T[:P,..]|--all-topics      --to-current, --from-file CSV (what 4.4 supports: no --shift-by,
                                     no --by-duration)
--delete --group G|--all-groups      DeleteGroups of Empty share groups
--delete-offsets --group G --topic T DeleteShareGroupOffsets

--timeout is in milliseconds (default 30000), as Kafka's. A usage error prints Kafka's message and a
pointer to --help on stderr, exit status 1. Where Kafka's tool iterates a Java HashMap (the reset plan,
the deleted groups) the rows come in that map's order, which ``java_hash_order`` reproduces.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from shoal.coordinator.partitioning import hash_map_order
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.delete_groups_request import DeleteGroupsRequest
from shoal.protocol.generated.list_groups_request import ListGroupsRequest
from shoal.protocol.generated.share_group_describe_request import ShareGroupDescribeRequest
from shoal.tools.group_admin import parse_datetime
from shoal.tools.groups import _retrying, list_offsets
from shoal.tools.quotas import java_hash
from shoal.tools.secure_wire import command_config
from shoal.tools.share_groups_options import (
    HELP,
    USAGE_HINT,
    Options,
    UsageError,
    check_args,
    parse_args,
    parse_states,
    state_name,
)
from shoal.tools.share_groups_output import (
    print_deleted_offsets,
    print_error,
    print_list,
    print_members,
    print_offsets,
    print_reset,
    print_state,
    write,
    write_err,
)
from shoal.tools.wire import ToolClient, ToolError

__all__ = ["java_hash_order", "main", "parse_args"]

_ERRORS = "org.apache.kafka.common.errors."

# Kafka's default message and exception class of the error codes these requests answer with
_DEFAULT_MESSAGE = {
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
    ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Not authorized to access group: Group authorization failed.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Not authorized to access topics: [Topic authorization failed.]",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator.",
    ErrorCode.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client library "
                               "or the message was sent to an incompatible broker. See the broker logs for more "
                               "details.",
}
_EXCEPTION = {
    ErrorCode.NON_EMPTY_GROUP: "GroupNotEmptyException",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "GroupAuthorizationException",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
    ErrorCode.UNKNOWN_SERVER_ERROR: "UnknownServerException",
}


class IllegalArgument(Exception):
    """Kafka's IllegalArgumentException out of the command: the message on stderr, exit status 1."""


class KafkaFailure(Exception):
    """An error code from the broker, as the Java exception Kafka's admin client raises for it."""

    def __init__(self, code: int, message: str | None = None, cls: str | None = None) -> None:
        self.code = code
        self.message = message or _DEFAULT_MESSAGE.get(code) or _default_message(code)  # type: ignore[call-overload]
        self.cls = cls or _EXCEPTION.get(code) or _exception_name(code)  # type: ignore[call-overload]
        super().__init__(self.message)

    def __str__(self) -> str:  # Java's Throwable.toString
        return f"{_ERRORS}{self.cls}: {self.message}"


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


def _exception_name(code: int) -> str:
    return "".join(w.capitalize() for w in _error_name(code).split("_")) + "Exception"


def _default_message(code: int) -> str:
    return _error_name(code).replace("_", " ").capitalize() + "."


# ---------------------------------------------------------------- Java's HashMap iteration order
def _tp_hash(key: tuple[str, int]) -> int:
    """TopicPartition.hashCode: 31 * (31 + partition) + topic.hashCode()."""
    return (31 * (31 + key[1]) + java_hash(key[0])) & 0xFFFFFFFF


def java_hash_order(keys: Iterable[Any], hash_of: Callable[[Any], int] | None = None) -> list[Any]:
    """``keys`` in the order a java.util.HashMap (default capacity, keys put in the given order) iterates
    them: by bucket (the spread hash masked by the table size), then by insertion within a bucket."""
    keys = list(dict.fromkeys(keys))
    if hash_of is None:
        hash_of = _tp_hash if keys and isinstance(keys[0], tuple) else java_hash
    return hash_map_order(keys, [hash_of(k) for k in keys], 16)


# ---------------------------------------------------------------- the broker side
@dataclass
class ShareMember:
    member_id: str
    client_id: str
    host: str
    epoch: int
    assignment: list[tuple[str, int]]


@dataclass
class ShareGroup:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    coordinator: tuple[int, str, int]
    members: list[ShareMember]


class Service:
    """The requests of each action, through one ToolClient."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def coordinator(self, group: str) -> Any:
        try:
            return self.client.find_coordinator(group)
        except ToolError as e:
            raise KafkaFailure(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e)) from None

    def list_share_groups(self, states: list[str] | None = None) -> list[tuple[str, str]]:
        """(group id, state) of every share group, in the brokers' order."""
        out: dict[str, str] = {}
        for node in self.client.all_nodes():
            conn = self.client.node(node)
            v = conn.version(ApiKey.LIST_GROUPS)
            if v < 5:
                raise KafkaFailure(ErrorCode.UNSUPPORTED_VERSION, "The broker does not support LIST_GROUPS with "
                                   f"version in range [5,5]. The supported range is [0,{v}].",
                                   "UnsupportedVersionException")
            req = ListGroupsRequest(states_filter=list(states or []), types_filter=["share"])
            resp = _retrying(lambda: conn.send(req, v))  # noqa: B023
            if resp.error_code:
                raise KafkaFailure(resp.error_code)
            for g in resp.groups:
                out[g.group_id] = g.group_state
        return list(out.items())

    def describe(self, group: str) -> ShareGroup:
        conn = self.coordinator(group)
        node = self.client.last_coordinator
        resp = _retrying(lambda: conn.send(ShareGroupDescribeRequest(group_ids=[group])),
                         lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            raise KafkaFailure(g.error_code, g.error_message or f"Group {group} not found.")
        if g.error_code:
            raise KafkaFailure(g.error_code, g.error_message)
        members = [ShareMember(m.member_id, m.client_id, m.client_host, m.member_epoch,
                               [(tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions])
                   for m in g.members]
        return ShareGroup(g.group_id, state_name(g.group_state), g.group_epoch, g.assignment_epoch,
                          (node, conn.host, conn.port), members)

    def offsets(self, group: str) -> dict[tuple[str, int], tuple[int, int, int] | None]:
        """DescribeShareGroupOffsets of every partition the group has state for: (start, leader epoch, lag),
        None where the start offset is unknown."""
        from shoal.protocol.generated.describe_share_group_offsets_request import (
            DescribeShareGroupOffsetsRequest as Req,
        )

        conn = self.coordinator(group)
        v = conn.version(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
        req = Req(groups=[Req.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)])
        resp = _retrying(lambda: conn.send(req, v), lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        if g.error_code:
            raise KafkaFailure(g.error_code, g.error_message)
        out: dict[tuple[str, int], tuple[int, int, int] | None] = {}
        for t in g.topics:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaFailure(p.error_code, p.error_message)
                out[(t.topic_name, p.partition_index)] = (
                    None if p.start_offset < 0 else (p.start_offset, p.leader_epoch, p.lag if v >= 1 else -1))
        return out

    def alter(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        from shoal.protocol.generated.alter_share_group_offsets_request import (
            AlterShareGroupOffsetsRequest as Req,
        )

        by: dict[str, list[Any]] = {}
        for (t, p), off in offsets.items():
            by.setdefault(t, []).append(Req.AlterShareGroupOffsetsRequestPartition(partition_index=p,
                                                                                   start_offset=off))
        conn = self.coordinator(group)
        req = Req(group_id=group, topics=[Req.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                                          for t, ps in by.items()])
        resp = _retrying(lambda: conn.send(req))
        if resp.error_code:
            raise KafkaFailure(resp.error_code, resp.error_message)
        for t in resp.responses:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaFailure(p.error_code, p.error_message)

    def delete_offsets(self, group: str, topics: list[str]) -> tuple[KafkaFailure | None, dict[str, Any]]:
        from shoal.protocol.generated.delete_share_group_offsets_request import (
            DeleteShareGroupOffsetsRequest as Req,
        )

        conn = self.coordinator(group)
        req = Req(group_id=group, topics=[Req.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics])
        resp = _retrying(lambda: conn.send(req))
        if resp.error_code:
            top = KafkaFailure(resp.error_code, resp.error_message)
            return top, dict.fromkeys(topics, top)
        results: dict[str, Any] = dict.fromkeys(topics)
        for t in resp.responses:
            if t.error_code:
                results[t.topic_name] = KafkaFailure(t.error_code, t.error_message)
        first = next((e for e in results.values() if e is not None), None)
        return first, results

    def delete_groups(self, groups: list[str]) -> dict[str, KafkaFailure | None]:
        out: dict[str, KafkaFailure | None] = {}
        for group in groups:
            conn = self.coordinator(group)
            req = DeleteGroupsRequest(groups_names=[group])
            r = _retrying(lambda: conn.send(req).results[0])  # noqa: B023
            out[group] = KafkaFailure(r.error_code) if r.error_code else None
        return out

    def partitions_of(self, topic_args: list[str]) -> list[tuple[str, int]]:
        """GroupOffsetsResetter.parseTopicPartitionsToReset: ``t`` (all its partitions) or ``t:0,1``."""
        out: list[tuple[str, int]] = []
        whole = []
        for arg in topic_args:
            topic, colon, parts = arg.partition(":")
            if colon:
                out += [(topic, int(p)) for p in parts.split(",") if p]
            else:
                whole.append(topic)
        if whole:
            md = self.client.metadata(whole)
            for t in md.topics:
                if t.error_code:
                    raise KafkaFailure(t.error_code, "This server does not host this topic-partition."
                                       if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else None)
                out += sorted((t.name, p.partition_index) for p in t.partitions)
        return out


# ---------------------------------------------------------------- the actions
def list_groups(svc: Service, opts: Options) -> None:
    if opts.has("state"):
        value = opts.value("state")
        states = parse_states(value) if value else []
        print_list([(g, state_name(state) if state else "Unknown") for g, state in svc.list_share_groups(states)])
    else:
        for g, _ in svc.list_share_groups():
            write(g + "\n")


def describe_groups(svc: Service, opts: Options) -> None:
    groups = [g for g, _ in svc.list_share_groups()] if opts.has("all-groups") else opts.values("group")
    verbose = opts.has("verbose")
    described = {g: svc.describe(g) for g in groups}  # every group first: one failure fails the command
    if opts.has("members"):
        print_members(described, verbose)
    elif opts.has("state"):
        print_state(described, verbose)
    else:
        print_offsets({g: svc.offsets(g) for g in sorted(described)}, verbose)


def _read_plan(path: str, group: str) -> dict[tuple[str, int], int]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError as e:
        raise KafkaFailure(ErrorCode.UNKNOWN_SERVER_ERROR, f"{path} ({e.strerror})", "java.io.FileNotFoundException"
                           ) from None
    out: dict[tuple[str, int], int] = {}
    for ln in lines:
        cols = [c.strip() for c in ln.split(",")]
        if len(cols) == 3:
            out[(cols[0], int(cols[1]))] = int(cols[2])
        elif len(cols) == 4 and cols[0] == group:
            out[(cols[1], int(cols[2]))] = int(cols[3])
    return out


def _check_resettable(svc: Service, group: str) -> None:
    """Kafka resets the offsets of an Empty group, or of one that does not exist."""
    try:
        d = svc.describe(group)
        if d.state not in ("Empty", "Dead"):
            raise IllegalArgument(f"Share group '{group}' is not empty.")
    except KafkaFailure as e:
        if e.code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise


class _Resetter:
    """The new start offsets of ``partitions`` by each --to-* scenario (Kafka's GroupOffsetsResetter)."""

    def __init__(self, svc: Service, group: str, partitions: list[tuple[str, int]]) -> None:
        self.svc, self.group, self.partitions = svc, group, partitions

    def log_offsets(self, ts: int, what: str) -> dict[tuple[str, int], int]:
        got = list_offsets(self.svc.client, self.partitions, ts)
        for tp in self.partitions:
            if tp not in got:
                raise IllegalArgument(f"Error getting {what} offset of topic partition: {tp[0]}-{tp[1]}")
        return got

    def clamp(self, wanted: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        lo, hi = self.log_offsets(-2, "starting"), self.log_offsets(-1, "ending")
        return {tp: min(max(off, lo[tp]), hi[tp]) for tp, off in wanted.items()}

    def to_datetime(self, text: str) -> dict[tuple[str, int], int]:
        try:
            ts = parse_datetime(text)
        except ToolError as e:
            raise IllegalArgument(str(e)) from None
        got = list_offsets(self.svc.client, self.partitions, ts)
        ends = self.log_offsets(-1, "ending")
        return {tp: got[tp] if got.get(tp, -1) >= 0 else ends[tp] for tp in self.partitions}

    def to_current(self) -> dict[tuple[str, int], int]:
        current = self.svc.offsets(self.group)
        missing = [tp for tp in self.partitions if current.get(tp) is None]
        ends = list_offsets(self.svc.client, missing, -1) if missing else {}
        plan: dict[tuple[str, int], int] = {}
        for tp in self.partitions:
            now = current.get(tp)
            plan[tp] = now[0] if now is not None else ends[tp]
        return plan

    def plan(self, opts: Options, plan_file: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        if opts.has("to-offset"):
            return self.clamp(dict.fromkeys(self.partitions, int(opts.value("to-offset") or 0)))
        if opts.has("to-earliest"):
            return {tp: self.log_offsets(-2, "starting")[tp] for tp in self.partitions}
        if opts.has("to-latest"):
            return {tp: self.log_offsets(-1, "ending")[tp] for tp in self.partitions}
        if opts.has("to-datetime"):
            return self.to_datetime(opts.value("to-datetime") or "")
        if opts.has("to-current"):
            return self.to_current()
        return self.clamp(plan_file)


def reset_offsets(svc: Service, opts: Options) -> dict[tuple[str, int], int]:
    """ShareGroupService.resetOffsets: {partition: new start offset} (empty: nothing to print)."""
    group = opts.values("group")[0]
    _check_resettable(svc, group)
    plan_file: dict[tuple[str, int], int] = {}
    if opts.has("from-file"):
        plan_file = _read_plan(opts.value("from-file") or "", group)
        partitions = list(plan_file)
    elif opts.has("topic"):
        partitions = svc.partitions_of(opts.values("topic"))
    else:
        partitions = list(svc.offsets(group))
    plan = _Resetter(svc, group, partitions).plan(opts, plan_file)
    if opts.has("execute") and plan:
        svc.alter(group, plan)
    return {tp: plan[tp] for tp in java_hash_order(plan)}


def delete_groups(svc: Service, opts: Options) -> None:
    listed = dict(svc.list_share_groups())
    wanted = list(listed) if opts.has("all-groups") else list(dict.fromkeys(opts.values("group")))
    failed: dict[str, Any] = {}
    for g in wanted:
        if g not in listed:
            failed[g] = KafkaFailure(ErrorCode.GROUP_ID_NOT_FOUND, f"Group '{g}' is not a share group.")
        elif state_name(listed[g]) == "Dead":
            failed[g] = f"java.lang.IllegalStateException: Share group '{g}' group state is DEAD."
        elif state_name(listed[g]) != "Empty":
            failed[g] = KafkaFailure(ErrorCode.NON_EMPTY_GROUP, f"Share group '{g}' is not EMPTY.")
    results = svc.delete_groups([g for g in wanted if g not in failed])
    success = [g for g, e in results.items() if e is None]
    failed.update({g: e for g, e in results.items() if e is not None})
    if not failed:
        quoted = ", ".join(f"'{g}'" for g in java_hash_order(success))
        write(f"Deletion of requested share groups ({quoted}) was successful.\n")
        return
    print_error("Deletion of some share groups failed:")
    for g in java_hash_order(failed):
        write(f"* Group '{g}' could not be deleted due to: {failed[g]}\n")
    if success:
        write("\nThese share groups were deleted successfully: "
            + ", ".join(f"'{g}'" for g in java_hash_order(success)) + "\n")


def delete_offsets(svc: Service, opts: Options) -> None:
    group = opts.values("group")[0]
    topics = java_hash_order(dict.fromkeys(opts.values("topic")))
    top, results = svc.delete_offsets(group, topics)
    if top is not None:
        if top.code in (ErrorCode.INVALID_GROUP_ID, ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                        ErrorCode.NON_EMPTY_GROUP):
            print_error(top.message)
        elif top.code not in (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            print_error(f"Encounter some unknown error: {top}")
    print_deleted_offsets(results)


def run(opts: Options) -> int:
    timeout_s = max(1.0, int(opts.value("timeout") or 30000) / 1000)
    with ToolClient(opts.value("bootstrap-server") or "", timeout=timeout_s,
                    config=command_config(opts.value("command-config"))) as client:
        svc = Service(client)
        if opts.has("list"):
            list_groups(svc, opts)
        elif opts.has("describe"):
            describe_groups(svc, opts)
        elif opts.has("delete"):
            delete_groups(svc, opts)
        elif opts.has("reset-offsets"):
            plan = reset_offsets(svc, opts)
            print_reset(opts.values("group")[0], plan, opts.has("export"))
        else:
            delete_offsets(svc, opts)
    return 0


def main(argv: list[str]) -> int:
    try:
        opts = parse_args(argv)
        if opts.has("help") or not argv:
            write_err(HELP)
            return 0
        if opts.has("version"):
            write("4.4.0 (shoal)\n")
            return 0
        check_args(opts)
        return run(opts)
    except UsageError as e:
        write_err(f"{e}\n{USAGE_HINT}")
        return 1
    except IllegalArgument as e:
        write_err(f"{e}\n")
        return 1
    except KafkaFailure as e:
        # Kafka's tool: "Executing share group command failed due to <exception>" on stdout (exit status 0
        # in 4.4; its stack trace goes to stderr)
        print_error(f"Executing share group command failed due to {e}")
        return 0
    except ToolError as e:
        print_error(f"Executing share group command failed due to {e}")
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130

