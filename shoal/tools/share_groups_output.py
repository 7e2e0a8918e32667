"""`shoal share-groups` output: the tables and messages Kafka 4.4's ShareGroupCommand prints, in its layout
(Java's ``%-Ns`` columns, one space between), on stdout, and its notes on stderr."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shoal.tools.table import assignment_string

if TYPE_CHECKING:
    from shoal.tools.share_groups import ShareGroup

    Offsets = dict[tuple[str, int], tuple[int, int, int] | None]

__all__ = ["print_deleted_offsets", "print_error", "print_list", "print_members", "print_offsets", "print_reset",
           "print_state", "write", "write_err"]


def write(text: str) -> None:
    sys.stdout.write(text)


def write_err(text: str) -> None:
    sys.stdout.flush()
    sys.stderr.write(text)
    sys.stderr.flush()


def print_error(msg: str) -> None:
    write(f"\nError: {msg}\n")


def _row(widths: list[int], cells: Sequence[object]) -> str:
    """Java's ``%-w1s %-w2s ... %s``: each cell but the last padded, one space between."""
    return " ".join([*(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)), str(cells[-1])])


def _maybe_print_empty(group: str, state: str, rows: int) -> bool:
    if state == "Dead":
        print_error(f"Share group '{group}' does not exist.")
    elif state == "Empty":
        write_err(f"\nShare group '{group}' has no active members.\n")
    return state != "Dead" and rows > 0


def print_list(groups: list[tuple[str, str]]) -> None:
    """--list --state: each group (already named as GroupState prints it) and its state."""
    width = max([15, *(len(g) for g, _ in groups)])
    write(f"{'GROUP'.ljust(width)} STATE\n")
    for g, state in groups:
        write(f"{g.ljust(width)} {state}\n")


def print_members(described: dict[str, ShareGroup], verbose: bool) -> None:
    for group, d in sorted(described.items()):
        members = sorted(d.members, key=lambda m: m.member_id)
        if not _maybe_print_empty(group, d.state, len(d.members)):
            continue
        widths = [max(15, len(group)), max([15, *(len(m.member_id) for m in members)]),
                  max([15, *(len(m.host) for m in members)]), max([15, *(len(m.client_id) for m in members)]),
                  12, *([13] if verbose else [])]
        head = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", *(["MEMBER-EPOCH"] if verbose else []),
                "ASSIGNMENT"]
        text = "\n" + _row(widths, head)
        for m in members:
            text += "\n" + _row(widths, [group, m.member_id, m.host, m.client_id, len(m.assignment),
                                         *([m.epoch] if verbose else []),
                                         assignment_string(m.assignment, "")])
        write(text + "\n")


def print_state(described: dict[str, ShareGroup], verbose: bool) -> None:
    for group, d in sorted(described.items()):
        _maybe_print_empty(group, d.state, 1)
        node, host, port = d.coordinator
        coordinator = f"{host}:{port}  ({node})"
        widths = [max(15, len(group)), max(25, len(coordinator)), 15]
        if verbose:
            widths += [12, 17]
            text = "\n" + _row(widths, ["GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH",
                                        "#MEMBERS"])
            text += "\n" + _row(widths, [group, coordinator, d.state, d.group_epoch, d.assignment_epoch,
                                         len(d.members)])
        else:
            text = "\n" + _row(widths, ["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"])
            text += "\n" + _row(widths, [group, coordinator, d.state, len(d.members)])
        write(text + "\n")


def print_offsets(offsets: dict[str, Offsets], verbose: bool) -> None:
    """The offsets view: (start offset, leader epoch, lag) of each partition, "-" where unknown."""
    for group, info in offsets.items():
        rows = sorted(info.items())
        if not rows:
            write(f"\nShare group '{group}' has no offset information.\n")
            continue
        widths = [max(15, len(group)), max([15, *(len(t) for (t, _), _ in rows)]), 10, 13,
                  *([13] if verbose else [])]
        head = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if verbose else []), "START-OFFSET", "LAG"]
        text = "\n" + _row(widths, head)
        for (t, p), o in rows:
            start, epoch, lag = o if o is not None else (-1, -1, -1)
            cells: list[object] = [group, t, p]
            if verbose:
                cells.append(epoch if epoch >= 0 else "-")
            cells += [start if start >= 0 else "-", lag if lag >= 0 else "-"]
            text += "\n" + _row(widths, cells)
        write(text + "\n")


def print_reset(group: str, plan: dict[tuple[str, int], int], export: bool) -> None:
    if export:
        write("".join(f"{t},{p},{off}\n" for (t, p), off in plan.items()) + "\n")
        return
    if plan:
        widths = [max(15, len(group)), max([15, *(len(t) for t, _ in plan)]), 10]
        text = "\n" + _row(widths, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"])
        for (t, p), off in plan.items():
            text += "\n" + _row(widths, [group, t, p, off])
        write(text)
    write("\n")


def print_deleted_offsets(results: dict[str, Any]) -> None:
    """--delete-offsets: each topic's status ("Successful" or its error's message)."""
    text = ""
    if results:
        width = max([15, *(len(t) for t in results)])
        text += f"\n{'TOPIC'.ljust(width)} STATUS"
        for t in sorted(results):
            e = results[t]
            text += f"\n{t.ljust(width)} {'Error: ' + e.message if e is not None else 'Successful'}"
    write(text + "\n")
