"""Argument parsing and entry points of `shoal groups` and `shoal offsets`.

Kept light (argparse only at import) so that `shoal serve` does not pay for it.
Failures are one line on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _add_bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT[,HOST:PORT...]",
                   help=f"broker(s) to connect to (default {DEFAULT_BOOTSTRAP})")
    p.add_argument("--timeout", type=float, default=10.0, help="socket timeout in seconds (default 10)")


def _run(fn: Callable[[argparse.Namespace], int], args: argparse.Namespace, prog: str) -> int:
    from shoal.tools.wire import ToolError

    try:
        return fn(args)
    except ToolError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `| head` closed our output
        return 0
    except KeyboardInterrupt:
        return 130


def _groups_list(args: argparse.Namespace) -> int:
    from shoal.tools.groups import format_listings, list_groups, normalize_states
    from shoal.tools.wire import ToolClient

    states = normalize_states(args.state or [])  # validate before connecting
    errors: list[str] = []
    with ToolClient(args.bootstrap_server, timeout=args.timeout) as client:
        listings = list_groups(client, states, errors)
    if listings:
        print(format_listings(listings))
    elif not errors:
        print("No groups" + (f" in state(s) {', '.join(states)}" if states else "") + ".", file=sys.stderr)
    for e in errors:
        print(f"shoal groups list: error: {e}", file=sys.stderr)
    return 1 if errors else 0


def _groups_describe(args: argparse.Namespace) -> int:
    from shoal.tools.groups import describe_group, format_description
    from shoal.tools.wire import ToolClient

    with ToolClient(args.bootstrap_server, timeout=args.timeout) as client:
        desc = describe_group(client, args.group)
    print(format_description(desc))
    return 0


def _offsets_dump(args: argparse.Namespace) -> int:
    from shoal.tools.offsets_dump import dump_offsets
    from shoal.tools.wire import ToolClient

    with ToolClient(args.bootstrap_server, timeout=args.timeout) as client:
        stats = dump_offsets(client, print, None if args.partition is None else [args.partition])
    sys.stdout.flush()
    extra = []
    if stats.skipped:
        extra.append(f"{stats.skipped} of other record types not shown")
    if stats.unreadable:
        extra.append(f"{stats.unreadable} unreadable")
    print(f"Processed {stats.printed + stats.skipped + stats.unreadable} records"
          + (f" ({', '.join(extra)})" if extra else ""), file=sys.stderr)
    return 0


def add_groups_parser(sub: argparse._SubParsersAction) -> None:
    """`shoal groups list|describe`."""
    groups = sub.add_parser("groups", help="list and describe consumer groups (as kafka-consumer-groups)")
    gsub = groups.add_subparsers(dest="groups_command", required=True)
    lst = gsub.add_parser("list", help="list the groups of every broker")
    _add_bootstrap(lst)
    lst.add_argument("--state", action="append", metavar="STATE",
                     help="only groups in this state (repeatable or comma-separated): Stable, Empty, "
                          "PreparingRebalance, CompletingRebalance, Dead")
    lst.set_defaults(func=lambda a: _run(_groups_list, a, "shoal groups list"))
    desc = gsub.add_parser("describe", help="members, assignments, committed offsets and lag of a group")
    desc.add_argument("group", help="the group id")
    _add_bootstrap(desc)
    desc.set_defaults(func=lambda a: _run(_groups_describe, a, "shoal groups describe"))


def add_offsets_parser(sub: argparse._SubParsersAction) -> None:
    """`shoal offsets dump`."""
    offsets = sub.add_parser("offsets", help="read __consumer_offsets")
    osub = offsets.add_subparsers(dest="offsets_command", required=True)
    dump = osub.add_parser("dump", help="print every __consumer_offsets record as Kafka's formatters do, then exit")
    _add_bootstrap(dump)
    dump.add_argument("--from-beginning", action="store_true",
                      help="accepted for kafka-console-consumer habits; a dump always reads from the log start")
    dump.add_argument("--partition", type=int, default=None, metavar="N",
                      help="only this partition of __consumer_offsets")
    dump.set_defaults(func=lambda a: _run(_offsets_dump, a, "shoal offsets dump"))
