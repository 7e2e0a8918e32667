"""kafka-consumer-groups' own layouts (Kafka 4.4), for `shoal groups list --type/--state` and
`shoal groups describe --offsets | --members | --state [--verbose]` (pure).

Each formatter returns (stdout, stderr) exactly as ConsumerGroupCommand prints them: Java's
``%-Ns`` columns, each table opened by a blank line, the "has no active members" or "is
rebalancing" note on stderr. Rows keep the order of the broker's answer, as Kafka's tool does.
"""

from __future__ import annotations

from shoal.tools.groups import GroupDescription, GroupListing, PartitionInfo, type_name
from shoal.tools.table import MISSING, assignment_string

__all__ = ["format_kafka_listings", "format_members", "format_offsets", "format_state"]

_REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")


def _row(widths: list[int], cells: list[object], last_free: bool = True) -> str:
    """Java's ``"%-w1s %-w2s ... %s"``: every cell padded to its width, one space between; the last
    cell unpadded when ``last_free``."""
    out = []
    for i, (w, c) in enumerate(zip(widths, cells, strict=True)):
        text = MISSING if c is None else str(c)
        out.append(text if (last_free and i == len(widths) - 1) else text.ljust(w))
    return " ".join(out)


def format_kafka_listings(listings: list[GroupListing], include_type: bool, include_state: bool) -> str:
    """`--list --type` / `--list --state`: GROUP padded to the longest id (at least 15) + 10, then
    TYPE and STATE in 20 columns each (Kafka's GroupType and GroupState names)."""
    width = max([15, *(len(g.group_id) for g in listings)]) + 10
    header = ["GROUP".ljust(width)]
    if include_type:
        header.append(" " + "TYPE".ljust(20))
    if include_state:
        header.append(" " + "STATE".ljust(20))
    lines = ["".join(header)]
    for g in listings:
        cells = [g.group_id.ljust(width)]
        if include_type:
            cells.append(" " + type_name(g.group_type).ljust(20))
        if include_state:
            cells.append(" " + (g.state or "Unknown").ljust(20))
        lines.append("".join(cells))
    return "\n".join(lines) + "\n"


def _state_note(desc: GroupDescription, rows: int) -> tuple[bool, str, str]:
    """ConsumerGroupCommand.shouldPrintMemberState: whether to print rows, and the note for the group's
    state (stdout, stderr)."""
    if desc.state == "Dead":
        return False, f"\nError: Consumer group '{desc.group_id}' does not exist.\n", ""
    if desc.state == "Empty":
        return rows > 0, "", f"\nConsumer group '{desc.group_id}' has no active members.\n"
    if desc.state in _REBALANCING:
        return rows > 0, "", f"\nWarning: Consumer group '{desc.group_id}' is rebalancing.\n"
    return rows > 0, "", ""


def _offset_rows(desc: GroupDescription) -> list[PartitionInfo]:
    """Members with partitions, most partitions first (stable), each one's partitions by topic and
    number; then the committed partitions nobody owns."""
    by_member: dict[int, list[PartitionInfo]] = {}
    unowned = []
    for p in desc.partitions:
        if p.owner is None:
            unowned.append(p)
        else:
            by_member.setdefault(id(p.owner), []).append(p)
    members = sorted((m for m in desc.members if m.assignment), key=lambda m: -len(m.assignment or ()))
    rows: list[PartitionInfo] = []
    for m in members:
        rows += sorted(by_member.get(id(m), []), key=lambda p: (p.topic, p.partition))
    return rows + sorted(unowned, key=lambda p: (p.topic, p.partition))


def format_offsets(desc: GroupDescription, verbose: bool = False) -> tuple[str, str]:
    """`--describe [--offsets] [--verbose]`: one row per partition, with its owner."""
    rows = _offset_rows(desc)
    shown, out, err = _state_note(desc, len(rows))
    if not shown:
        return out, err

    def owner(p: PartitionInfo, attr: str) -> str:
        return MISSING if p.owner is None else getattr(p.owner, attr)

    widths = [max([15, len(desc.group_id)]), max([15, *(len(p.topic) for p in rows)]), 10]
    widths += [15, 15, 15, 15] if verbose else [15, 15, 15]
    widths += [max([15, *(len(owner(p, "member_id")) for p in rows)]),
               max([15, *(len(owner(p, "host")) for p in rows)]), 0]
    head = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if verbose else []), "CURRENT-OFFSET",
            "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    text = "\n" + _row(widths, head)
    for p in rows:
        cells: list[object] = [desc.group_id, p.topic, p.partition]
        if verbose:
            cells.append(p.leader_epoch)
        cells += [p.committed, p.log_end, p.lag, owner(p, "member_id"), owner(p, "host"), owner(p, "client_id")]
        text += "\n" + _row(widths, cells)
    return text + "\n", err


def _member_widths(desc: GroupDescription, printed: bool) -> tuple[list[int], list[int], bool]:
    """(the widths of the base columns, of the verbose ones, whether GROUP-INSTANCE-ID shows)."""
    group, member, instance, host, client, current, target = 15, 15, 17, 15, 15, 20, 20
    with_instance = False
    for m in desc.members if printed else ():
        group = max(group, len(desc.group_id))
        member = max(member, len(m.member_id))
        instance = max(instance, len(m.group_instance_id or ""))
        host = max(host, len(m.host))
        client = max(client, len(m.client_id))
        with_instance = with_instance or bool(m.group_instance_id)
        current = max(current, len(assignment_string(m.assignment)))
        target = max(target, len(assignment_string(m.target_assignment)))
    base = [group, member, *([instance] if with_instance else []), host, client, 15]
    return base, [15, current, 15, target], with_instance


def format_members(desc: GroupDescription, verbose: bool = False) -> tuple[str, str]:
    """`--describe --members [--verbose]`: one row per member; verbose adds its epoch, its current
    and target assignments and the group's target assignment epoch."""
    printed, out, err = _state_note(desc, len(desc.members))
    base, extra, with_instance = _member_widths(desc, printed)
    head: list[object] = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if with_instance else []), "HOST",
                          "CLIENT-ID", "#PARTITIONS"]
    text = out + "\n" + _row(base, head, last_free=False) + " "
    if verbose:
        text += _row(extra, ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"],
                     last_free=False)
    text += "\n"
    for m in desc.members:
        cells = [desc.group_id, m.member_id, *([m.group_instance_id or ""] if with_instance else []), m.host,
                 m.client_id, len(m.assignment or ())]
        text += _row(base, cells, last_free=False) + " "
        if verbose:
            text += _row(extra, [m.member_epoch, assignment_string(m.assignment), desc.assignment_epoch,
                                 assignment_string(m.target_assignment)], last_free=False)
        text += "\n"
    return text, err


def format_state(desc: GroupDescription, verbose: bool = False) -> tuple[str, str]:
    """`--describe --state [--verbose]`: the coordinator, assignor, state (and the group and target
    assignment epochs) and the number of members."""
    shown, out, err = _state_note(desc, 1)
    if not shown:
        return out, err
    node, host, port = desc.coordinator
    coordinator = f"{host}:{port}  ({node})"
    widths = [max(15, len(desc.group_id)), max(25, len(coordinator)), 20, 20]
    head: list[object] = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
    row: list[object] = [desc.group_id, coordinator, desc.protocol or MISSING, desc.state]
    if verbose:
        widths += [15, 25]
        head += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row += [desc.group_epoch, desc.assignment_epoch]
    widths.append(0)
    head.append("#MEMBERS")
    row.append(len(desc.members))
    return "\n" + _row(widths, head) + "\n" + _row(widths, row) + "\n", err
