"""`shoal groups reset-offsets | delete | delete-offsets`, as kafka-consumer-groups.

reset-offsets  plans new committed offsets for groups that are Empty (or do not exist yet):
               --to-earliest, --to-latest, --to-current, --to-offset N, --shift-by N,
               --to-datetime T, --by-duration D, --from-file CSV, for --all-topics (the
               partitions the group committed) or --topic T[:P,...]. Offsets past either end
               of a log are clamped to it, as Kafka does. The plan is printed (a dry run)
               unless --execute, which commits it (OffsetCommit as a standalone member).
delete         DeleteGroups to each group's coordinator.
delete-offsets OffsetDelete for a group's topics (or some of their partitions).
"""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.delete_groups_request import DeleteGroupsRequest
from shoal.protocol.generated.describe_groups_request import DescribeGroupsRequest
from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest
from shoal.protocol.generated.offset_delete_request import OffsetDeleteRequest
from shoal.tools.groups import _committed_offsets, _retrying, list_groups, list_offsets
from shoal.tools.wire import ToolClient, ToolError, check_error, error_name

EARLIEST, LATEST = -2, -1
TP = tuple[str, int]
_DURATION = re.compile(r"^([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:\.\d+)?)S)?)?$",
                       re.IGNORECASE)


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime: ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (UTC if none)."""
    if "T" not in text:
        raise ToolError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        raise ToolError(f"Error parsing timestamp {text!r} (expected like 2024-01-31T12:00:00.000)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """Java's Duration.parse (``PnDTnHnMn.nS``) in milliseconds."""
    m = _DURATION.match(text.strip())
    if m is None or not any(m.groups()[1:]):
        raise ToolError(f"Text cannot be parsed to a Duration: {text}")
    sign = -1 if m.group(1) == "-" else 1
    days, hours, minutes = (int(g or 0) for g in m.groups()[1:4])
    seconds = float(m.group(5) or 0)
    return sign * int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def parse_topic_args(client: ToolClient, args: list[str]) -> list[TP]:
    """``t`` (every partition) or ``t:0,2`` (those), as kafka-consumer-groups."""
    out: list[TP] = []
    whole = []
    for arg in args:
        if ":" in arg:
            topic, _, parts = arg.partition(":")
            try:
                out += [(topic, int(p)) for p in parts.split(",")]
            except ValueError:
                raise ToolError(f"Invalid partition in topic arg '{arg}'") from None
        else:
            whole.append(arg)
    if whole:
        md = client.metadata(whole)
        for t in md.topics:
            check_error(t.error_code, f"topic {t.name}")
            out += [(t.name, p.partition_index) for p in t.partitions]
    return sorted(set(out))


def group_state(client: ToolClient, group: str) -> str:
    conn = client.find_coordinator(group)
    g = _retrying(lambda: conn.send(DescribeGroupsRequest(groups=[group])).groups[0])
    if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:  # DescribeGroups v6 (KIP-1043): a group not here
        return "Dead"
    check_error(g.error_code, f"cannot describe group {group!r}")
    return g.group_state


def _clamp(client: ToolClient, wanted: dict[TP, int], warn: list[str]) -> dict[TP, int]:
    starts = list_offsets(client, wanted, EARLIEST)
    ends = list_offsets(client, wanted, LATEST)
    out = {}
    for tp, off in wanted.items():
        if tp not in ends:
            raise ToolError(f"Unexpected non-existing offset value for topic partition {tp[0]}-{tp[1]}")
        if off > ends[tp]:
            warn.append(f"New offset ({off}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. "
                        f"Value will be set to {ends[tp]}")
            off = ends[tp]
        elif tp in starts and off < starts[tp]:
            warn.append(f"New offset ({off}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. "
                        f"Value will be set to {starts[tp]}")
            off = starts[tp]
        out[tp] = off
    return out


def plan_reset(client: ToolClient, group: str, partitions: list[TP], scenario: str, value: Any,
               warn: list[str], notes: list[str], file_plan: dict[str, dict[TP, int]] | None = None) -> dict[TP, int]:
    """New offsets for ``partitions`` of ``group`` by ``scenario`` (see the module docstring)."""
    def offsets(ts: int, what: str) -> dict[TP, int]:
        got = list_offsets(client, partitions, ts)
        missing = [tp for tp in partitions if tp not in got]
        if missing:
            raise ToolError(f"Error getting {what} offset of topic partition: {missing[0][0]}-{missing[0][1]}")
        return {tp: got[tp] for tp in partitions}

    if scenario == "to-earliest":
        return offsets(EARLIEST, "starting")
    if scenario == "to-latest":
        return offsets(LATEST, "ending")
    if scenario == "to-offset":
        return _clamp(client, {tp: int(value) for tp in partitions}, warn)
    if scenario in ("shift-by", "to-current"):
        current = {tp: o for tp, o in _committed_offsets(client.find_coordinator(group), group).items()}
        if scenario == "to-current":
            ends = offsets(LATEST, "ending") if any(tp not in current for tp in partitions) else {}
            return {tp: current[tp] if tp in current else ends[tp] for tp in partitions}
        for tp in partitions:
            if tp not in current:
                raise ToolError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                                "committed offset")
        return _clamp(client, {tp: current[tp] + int(value) for tp in partitions}, warn)
    if scenario in ("to-datetime", "by-duration"):
        got = list_offsets(client, partitions, int(value))
        out = {tp: o for tp, o in got.items() if o >= 0}
        empty = [tp for tp in partitions if tp not in out]
        for tp in empty:
            notes.append(f"\nWarn: Partition {tp[1]} from topic {tp[0]} is empty. Falling back to latest known offset.")
        if empty:
            ends = list_offsets(client, empty, LATEST)
            out.update({tp: ends[tp] for tp in empty if tp in ends})
        return out
    if scenario == "from-file":
        plan = (file_plan or {}).get(group)
        if plan is None:
            notes.append(f"\nError: No reset plan for group {group} found")
            return {}
        return _clamp(client, plan, warn)
    raise ToolError(f"unknown reset scenario {scenario}")


def read_plan(path: str, groups: list[str]) -> dict[str, dict[TP, int]]:
    """A CSV reset plan: ``topic,partition,offset`` (one group) or ``group,topic,partition,offset``."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror or e}") from None
    out: dict[str, dict[TP, int]] = {}
    for ln in lines:
        cols = [c.strip() for c in ln.split(",")]
        try:
            if len(cols) == 3 and len(groups) == 1:
                out.setdefault(groups[0], {})[(cols[0], int(cols[1]))] = int(cols[2])
            elif len(cols) == 4:
                out.setdefault(cols[0], {})[(cols[1], int(cols[2]))] = int(cols[3])
            else:
                raise ValueError
        except ValueError:
            raise ToolError(f"invalid reset plan line {ln!r}") from None
    return out


def commit(client: ToolClient, group: str, offsets: dict[TP, int]) -> None:
    """OffsetCommit as a standalone member (generation -1): the group must have no members."""
    conn = client.find_coordinator(group)
    cls = OffsetCommitRequest
    by: dict[str, list[Any]] = {}
    for (t, p), off in sorted(offsets.items()):
        by.setdefault(t, []).append(cls.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=off, committed_leader_epoch=-1, commit_timestamp=-1,
            committed_metadata=""))
    req = cls(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
              retention_time_ms=-1, topics=[cls.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by.items()])
    v = conn.version(ApiKey.OFFSET_COMMIT, 8)

    def first_error(resp: Any) -> int:
        return next((p.error_code for t in resp.topics for p in t.partitions if p.error_code), ErrorCode.NONE)

    code = first_error(_retrying(lambda: conn.send(req, v), first_error))
    check_error(code, f"committing the new offsets of group {group!r} failed")


def reset_offsets(client: ToolClient, groups: list[str], *, all_topics: bool, topics: list[str], scenario: str,
                  value: Any, execute: bool, file_plan: dict[str, dict[TP, int]] | None = None,
                  out: Any = None) -> dict[str, dict[TP, int]]:
    """Plan (and with ``execute`` commit) the new offsets of every group; messages go to ``out``."""
    out = out or sys.stdout
    result: dict[str, dict[TP, int]] = {}
    named = parse_topic_args(client, topics) if topics else []
    for group in groups:
        state = group_state(client, group)
        if state not in ("Empty", "Dead"):
            print(f"\nError: Assignments can only be reset if the group '{group}' is inactive, but the current "
                  f"state is {state}.", file=out)
            result[group] = {}
            continue
        if all_topics:
            partitions = sorted(_committed_offsets(client.find_coordinator(group), group))
        elif scenario == "from-file":
            partitions = sorted((file_plan or {}).get(group, {}))
        else:
            partitions = named
        warn: list[str] = []
        notes: list[str] = []
        plan = plan_reset(client, group, partitions, scenario, value, warn, notes, file_plan)
        for w in warn:
            print(f"WARN {w}", file=sys.stderr)
        for n in notes:
            print(n, file=out)
        if execute and plan:
            commit(client, group, plan)
        result[group] = plan
    return result


def format_reset(result: dict[str, dict[TP, int]]) -> str:
    """kafka-consumer-groups' table: a blank line, then GROUP TOPIC PARTITION NEW-OFFSET."""
    fmt = "\n{:<30} {:<30} {:<10} {:<15}"
    text = ""
    if result:
        text += fmt.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    for group in sorted(result):
        for (t, p), off in sorted(result[group].items()):
            text += fmt.format(group, t, p, off)
    return text


def export_csv(result: dict[str, dict[TP, int]], single_group: bool) -> str:
    rows = []
    for group in sorted(result):
        for (t, p), off in sorted(result[group].items()):
            rows.append(f"{t},{p},{off}" if single_group else f"{group},{t},{p},{off}")
    return "\n".join(rows)


def delete_groups(client: ToolClient, groups: list[str]) -> dict[str, str | None]:
    """DeleteGroups at each group's coordinator: {group: None, or the error}."""
    out: dict[str, str | None] = {}
    for group in groups:
        conn = client.find_coordinator(group)
        req = DeleteGroupsRequest(groups_names=[group])
        code = _retrying(lambda: conn.send(req).results[0]).error_code  # noqa: B023 - called at once
        out[group] = None if code == ErrorCode.NONE else _describe_error(code)
    return out


_ERROR_TEXT = {
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
    ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid.",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "The consumer group is actively subscribed to the topic.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
}


def _describe_error(code: int) -> str:
    text = _ERROR_TEXT.get(code)  # type: ignore[call-overload]
    return f"{error_name(code)}: {text}" if text else error_name(code)


def format_delete(result: dict[str, str | None]) -> str:
    ok = [g for g, e in result.items() if e is None]
    failed = {g: e for g, e in result.items() if e is not None}
    if not failed:
        return f"Deletion of requested consumer groups ('{', '.join(ok)}') was successful."
    lines = ["\nError: Deletion of some consumer groups failed:"]
    lines += [f"* Group '{g}' could not be deleted due to: {e}" for g, e in failed.items()]
    if ok:
        lines.append(f"\nThese consumer groups were deleted successfully: '{', '.join(ok)}'")
    return "\n".join(lines)


def delete_offsets(client: ToolClient, group: str, topics: list[str]) -> tuple[int, dict[TP, str | None]]:
    """OffsetDelete: (top-level error code, {partition: None or error})."""
    partitions = parse_topic_args(client, topics)
    cls = OffsetDeleteRequest
    by: dict[str, list[Any]] = {}
    for t, p in partitions:
        by.setdefault(t, []).append(cls.OffsetDeleteRequestPartition(partition_index=p))
    conn = client.find_coordinator(group)
    req = cls(group_id=group, topics=[cls.OffsetDeleteRequestTopic(name=t, partitions=ps) for t, ps in by.items()])
    resp = _retrying(lambda: conn.send(req))
    code = resp.error_code
    results: dict[TP, str | None] = {}
    for t in resp.topics:
        for p in t.partitions:
            results[(t.name, p.partition_index)] = _describe_error(p.error_code) if p.error_code else None
    if code:
        results = {tp: _describe_error(code) for tp in partitions}
    elif any(results.values()):
        code = next(ErrorCode(p.error_code) for t in resp.topics for p in t.partitions if p.error_code)
    return code, results


def format_delete_offsets(group: str, topics: list[str], code: int, results: dict[TP, str | None]) -> str:
    head = {
        ErrorCode.NONE: f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}",
        ErrorCode.INVALID_GROUP_ID: f"\nError: '{group}' is not valid.",
        ErrorCode.GROUP_ID_NOT_FOUND: f"\nError: '{group}' does not exist.",
        ErrorCode.GROUP_AUTHORIZATION_FAILED: f"\nError: Access to '{group}' is not authorized.",
        ErrorCode.NON_EMPTY_GROUP: f"\nError: Deleting offsets of a consumer group '{group}' is forbidden if the "
                                   "group is not empty.",
    }.get(code)  # type: ignore[call-overload]
    if head is None:
        if code in (ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            head = "\nError: Encounter some partition level error, see the follow-up details:"
        else:
            head = f"\nError: Encounter some unknown error: {error_name(code)}"
    fmt = "\n{:<30} {:<15} {:<15}"
    text = head + "\n" + fmt.format("TOPIC", "PARTITION", "STATUS")  # Kafka: println, then "%n..."
    for (t, p), err in sorted(results.items()):
        text += fmt.format(t, p, f"Error: :{err}" if err else "Successful")
    return text


def all_group_ids(client: ToolClient) -> list[str]:
    return [g.group_id for g in list_groups(client)]
