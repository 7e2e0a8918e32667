"""Plain-text tables and small value formatters shared by the tools (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

MISSING = "-"


def format_table(headers: Sequence[str], rows: Iterable[Sequence[object]], gap: int = 2) -> str:
    """Left-aligned columns as kafka-consumer-groups prints them; None prints as "-"."""
    cells = [[MISSING if v is None else str(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], len(v))
    sep = " " * gap
    lines = [sep.join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [sep.join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def format_tab_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """kafka-transactions' layout: each cell padded to its column's width, then a tab."""
    cells = [[str(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], len(v))
    return "\n".join("".join(v.ljust(w) + "\t" for v, w in zip(row, widths, strict=True))
                     for row in [list(headers), *cells])


def compact_partitions(partitions: Iterable[tuple[str, int]]) -> str:
    """``[("t", 0), ("t", 1), ("u", 3)]`` -> ``"t(0,1),u(3)"`` (topics sorted); "-" when empty."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    if not by_topic:
        return MISSING
    return ",".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items()))


def assignment_string(partitions: Iterable[tuple[str, int]] | None, empty: str = MISSING) -> str:
    """Kafka's getAssignmentString: ``t:0,1;u:2`` (topics sorted), ``empty`` when there are none."""
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions or ():
        by_topic.setdefault(t, []).append(p)
    if not by_topic:
        return empty
    return ";".join(sorted(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in by_topic.items()))


def lag(committed: int | None, log_end: int | None) -> int | None:
    """Log end offset minus committed offset; None when either is unknown (printed "-")."""
    if committed is None or committed < 0 or log_end is None or log_end < 0:
        return None
    return log_end - committed
