"""Argument parsing and entry points of `shoal groups`, `shoal offsets` and `shoal transactions`.

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


def _txn_list(args: argparse.Namespace) -> int:
    from shoal.tools.transactions import format_list, list_transactions
    from shoal.tools.wire import ToolClient

    with ToolClient(args.bootstrap_server, timeout=args.timeout) as client:
        print(format_list(list_transactions(client)))
    return 0


def _txn_describe(args: argparse.Namespace) -> int:
    from shoal.tools.table import format_tab_table
    from shoal.tools.transactions import DESCRIBE_HEADERS, describe_transaction
    from shoal.tools.wire import ToolClient

    with ToolClient(args.bootstrap_server, timeout=args.timeout) as client:
        print(format_tab_table(DESCRIBE_HEADERS, [describe_transaction(client, args.transactional_id)]))
    return 0


def _txn_producers(args: argparse.Namespace) -> int:
    from shoal.tools.transactions import describe_producers, format_producers
    from shoal.tools.wire import ToolClient

    with ToolClient(args.bootstrap_server, timeout=args.timeout) as client:
        print(format_producers(describe_producers(client, [(args.topic, args.partition)], args.broker_id)))
    return 0


def _txn_find_hanging(args: argparse.Namespace) -> int:
    from shoal.tools.transactions import find_hanging, format_hanging
    from shoal.tools.wire import ToolClient

    with ToolClient(args.bootstrap_server, timeout=args.timeout) as client:
        print(format_hanging(find_hanging(client, broker_id=args.broker_id, topic=args.topic,
                                          partition=args.partition,
                                          max_transaction_timeout_min=args.max_transaction_timeout)))
    return 0


def _txn_abort(args: argparse.Namespace) -> int:
    from shoal.tools.transactions import abort_transaction
    from shoal.tools.wire import ToolClient

    with ToolClient(args.bootstrap_server, timeout=args.timeout) as client:
        abort_transaction(client, args.topic, args.partition, start_offset=args.start_offset,
                          producer_id=args.producer_id, producer_epoch=args.producer_epoch,
                          coordinator_epoch=args.coordinator_epoch)
    return 0


def add_transactions_parser(sub: argparse._SubParsersAction) -> None:
    """`shoal transactions list|describe|describe-producers|find-hanging|abort` (kafka-transactions)."""
    txn = sub.add_parser("transactions", help="inspect transactions, find and abort hanging ones "
                                              "(as kafka-transactions)")
    # Kafka's tool takes --bootstrap-server before the command; accept it on either side.
    _add_bootstrap(txn)
    tsub = txn.add_subparsers(dest="transactions_command", required=True)

    def command(name: str, help_text: str, fn: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
        p = tsub.add_parser(name, help=help_text)
        p.add_argument("--bootstrap-server", default=argparse.SUPPRESS, metavar="HOST:PORT[,HOST:PORT...]")
        p.add_argument("--timeout", type=float, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        p.set_defaults(func=lambda a: _run(fn, a, f"shoal transactions {name}"))
        return p

    command("list", "list transactions", _txn_list)
    d = command("describe", "describe the state of an active transactional-id", _txn_describe)
    d.add_argument("--transactional-id", required=True, help="transactional id")
    dp = command("describe-producers", "describe the states of active producers for a topic partition",
                 _txn_producers)
    dp.add_argument("--broker-id", type=int, default=None,
                    help="optional broker id to describe the producer state on a specific replica")
    dp.add_argument("--topic", required=True, help="topic name")
    dp.add_argument("--partition", type=int, required=True, help="partition number")
    fh = command("find-hanging", "find hanging transactions", _txn_find_hanging)
    fh.add_argument("--broker-id", type=int, default=None, help="broker id to search for hanging transactions")
    fh.add_argument("--max-transaction-timeout", type=int, default=15,
                    help="maximum transaction timeout in minutes to limit the scope of the search (default 15)")
    fh.add_argument("--topic", default=None, help="topic name to limit search to")
    fh.add_argument("--partition", type=int, default=None, help="partition number")
    ab = command("abort", "abort a hanging transaction (requires administrative privileges)", _txn_abort)
    ab.add_argument("--topic", required=True, help="topic name")
    ab.add_argument("--partition", type=int, required=True, help="partition number")
    ab.add_argument("--start-offset", type=int, default=None, help="start offset of the transaction to abort")
    ab.add_argument("--producer-id", type=int, default=None, help="producer id (brokers older than 3.0)")
    ab.add_argument("--producer-epoch", type=int, default=None, help="producer epoch (brokers older than 3.0)")
    ab.add_argument("--coordinator-epoch", type=int, default=None,
                    help="coordinator epoch (brokers older than 3.0)")
