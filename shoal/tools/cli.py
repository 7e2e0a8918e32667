"""Argument parsing and entry points of the tools: `shoal groups`, `shoal offsets`, `shoal transactions`,
`shoal topics`, and the parsers of `shoal configs` / `shoal client-quotas` (configs_cli.py), `shoal acls`
(acls.py), `shoal produce` and `shoal consume` (console_cli.py).

Every tool that connects takes `--command-config FILE` (Kafka's client properties: TLS and SASL,
see secure_wire.py), as Kafka's tools do.

Kept light (argparse only at import) so that `shoal serve` does not pay for it.
Failures are one line on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shoal.tools.wire import ToolClient

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _add_bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT[,HOST:PORT...]",
                   help=f"broker(s) to connect to (default {DEFAULT_BOOTSTRAP})")
    p.add_argument("--timeout", type=float, default=10.0, help="socket timeout in seconds (default 10)")
    p.add_argument("--command-config", default=None, metavar="FILE", help=COMMAND_CONFIG_HELP)


COMMAND_CONFIG_HELP = ("a properties file of client settings, as Kafka's tools take: security.protocol, "
                       "sasl.mechanism, sasl.jaas.config, ssl.truststore.location...")


def _client(args: argparse.Namespace) -> ToolClient:
    from shoal.tools.secure_wire import command_config
    from shoal.tools.wire import ToolClient

    return ToolClient(args.bootstrap_server, timeout=args.timeout,
                      config=command_config(getattr(args, "command_config", None)))


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
    from shoal.tools.group_views import format_kafka_listings
    from shoal.tools.groups import format_listings, list_groups, normalize_states, normalize_types

    states = normalize_states(args.state or [])  # validate before connecting
    types = normalize_types(args.type or [])
    errors: list[str] = []
    with _client(args) as client:
        listings = list_groups(client, states, errors, types)
    if args.type is not None or args.state is not None:
        # kafka-consumer-groups --list --type/--state: its table (a header even when empty), consumer
        # groups only (protocol type "consumer", or none for offsets-only groups)
        listings = [g for g in listings if g.protocol_type in ("consumer", "")]
        print(format_kafka_listings(listings, args.type is not None, args.state is not None), end="")
    elif listings:
        print(format_listings(listings))
    elif not errors:
        print("No groups" + (f" in state(s) {', '.join(states)}" if states else "") + ".", file=sys.stderr)
    for e in errors:
        print(f"shoal groups list: error: {e}", file=sys.stderr)
    return 1 if errors else 0


def _groups_describe(args: argparse.Namespace) -> int:
    from shoal.tools.groups import describe_group, format_description
    from shoal.tools.wire import ToolError

    group = args.group or args.group_flag
    if not group:
        raise ToolError("a group is needed: shoal groups describe GROUP (or --group GROUP)")
    views = [v for v in ("offsets", "members", "state") if getattr(args, v)]
    if len(views) > 1:
        raise ToolError("give at most one of --offsets, --members, --state")
    if args.verbose and not views:
        views = ["offsets"]  # kafka-consumer-groups --describe --verbose: the offsets, verbose
    with _client(args) as client:
        desc = describe_group(client, group)
    if not views:
        print(format_description(desc))
        return 0
    from shoal.tools import group_views

    out, err = getattr(group_views, f"format_{views[0]}")(desc, args.verbose)
    sys.stdout.write(out)
    sys.stdout.flush()
    sys.stderr.write(err)
    return 0


def _offsets_dump(args: argparse.Namespace) -> int:
    from shoal.tools.offsets_dump import dump_offsets

    with _client(args) as client:
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


_RESET_SCENARIOS = ("to-earliest", "to-latest", "to-current", "to-offset", "shift-by", "to-datetime",
                    "by-duration", "from-file")


def _groups_reset(args: argparse.Namespace) -> int:
    from shoal.tools.group_admin import (
        all_group_ids,
        export_csv,
        format_reset,
        parse_datetime,
        parse_duration_ms,
        read_plan,
        reset_offsets,
    )
    from shoal.tools.wire import ToolError

    chosen = [s for s in _RESET_SCENARIOS if getattr(args, s.replace("-", "_")) not in (None, False)]
    if len(chosen) != 1:
        raise ToolError("give exactly one of --" + ", --".join(_RESET_SCENARIOS))
    scenario = chosen[0]
    value = getattr(args, scenario.replace("-", "_"))
    if bool(args.group) == args.all_groups:
        raise ToolError("give --group (repeatable) or --all-groups")
    if scenario != "from-file" and bool(args.topic) == args.all_topics:
        raise ToolError("One of the reset scopes should be defined: --all-topics, --topic.")
    if args.dry_run and args.execute:
        raise ToolError("--dry-run and --execute cannot be used together")
    if scenario == "to-datetime":
        value = parse_datetime(value)
    elif scenario == "by-duration":
        import time

        value = int(time.time() * 1000) - parse_duration_ms(value)
    with _client(args) as client:
        groups = all_group_ids(client) if args.all_groups else args.group
        plan = read_plan(value, groups) if scenario == "from-file" else None
        result = reset_offsets(client, groups, all_topics=args.all_topics, topics=args.topic or [],
                               scenario=scenario, value=value, execute=args.execute, file_plan=plan)
    print(export_csv(result, len(groups) == 1) if args.export else format_reset(result))
    return 0


def _groups_delete(args: argparse.Namespace) -> int:
    from shoal.tools.group_admin import all_group_ids, delete_groups, format_delete
    from shoal.tools.wire import ToolError

    if bool(args.group) == args.all_groups:
        raise ToolError("give --group (repeatable) or --all-groups")
    with _client(args) as client:
        result = delete_groups(client, all_group_ids(client) if args.all_groups else args.group)
    print(format_delete(result))
    return 1 if any(result.values()) else 0


def _groups_delete_offsets(args: argparse.Namespace) -> int:
    from shoal.tools.group_admin import delete_offsets, format_delete_offsets

    with _client(args) as client:
        code, results = delete_offsets(client, args.group, args.topic)
    print(format_delete_offsets(args.group, args.topic, code, results))
    return 1 if code else 0


def add_groups_parser(sub: argparse._SubParsersAction) -> None:
    """`shoal groups list|describe|reset-offsets|delete|delete-offsets`."""
    groups = sub.add_parser("groups", help="list and describe consumer groups (as kafka-consumer-groups)")
    gsub = groups.add_subparsers(dest="groups_command", required=True)
    lst = gsub.add_parser("list", help="list the groups of every broker")
    _add_bootstrap(lst)
    lst.add_argument("--state", action="append", nargs="?", const="", metavar="STATE",
                     help="only groups in this state (repeatable or comma-separated): Stable, Empty, "
                          "PreparingRebalance, CompletingRebalance, Dead, Assigning, Reconciling; "
                          "prints kafka-consumer-groups' GROUP [TYPE] STATE table (no value: all states)")
    lst.add_argument("--type", action="append", nargs="?", const="", metavar="TYPE",
                     help="only groups of this type (classic, consumer; comma-separated); prints "
                          "kafka-consumer-groups' GROUP TYPE [STATE] table (no value: all types)")
    lst.set_defaults(func=lambda a: _run(_groups_list, a, "shoal groups list"))
    desc = gsub.add_parser("describe", help="members, assignments, committed offsets and lag of a group")
    desc.add_argument("group", nargs="?", help="the group id")
    desc.add_argument("--group", dest="group_flag", metavar="GROUP",
                      help="the group id, as kafka-consumer-groups --describe --group takes it")
    view = "as kafka-consumer-groups --describe prints it (Kafka 4.4's columns)"
    desc.add_argument("--offsets", action="store_true", help=f"one row per partition, {view}")
    desc.add_argument("--members", action="store_true", help=f"one row per member, {view}")
    desc.add_argument("--state", action="store_true", help=f"the group's state, {view}")
    desc.add_argument("--verbose", action="store_true",
                      help="with --members: member epochs, current and target assignments; with --state: "
                           "the group and target assignment epochs; with --offsets: leader epochs")
    _add_bootstrap(desc)
    desc.set_defaults(func=lambda a: _run(_groups_describe, a, "shoal groups describe"))
    reset = gsub.add_parser("reset-offsets", help="plan (and with --execute commit) new offsets for inactive groups")
    _add_bootstrap(reset)
    reset.add_argument("--group", action="append", help="a group (repeatable)")
    reset.add_argument("--all-groups", action="store_true", help="every group of the cluster")
    reset.add_argument("--topic", action="append", metavar="TOPIC[:P1,P2]",
                       help="a topic, or some of its partitions (repeatable)")
    reset.add_argument("--all-topics", action="store_true", help="every partition the group has offsets for")
    reset.add_argument("--to-earliest", action="store_true")
    reset.add_argument("--to-latest", action="store_true")
    reset.add_argument("--to-current", action="store_true")
    reset.add_argument("--to-offset", type=int, default=None, metavar="N")
    reset.add_argument("--shift-by", type=int, default=None, metavar="N", help="move by N (negative: back)")
    reset.add_argument("--to-datetime", default=None, metavar="YYYY-MM-DDTHH:mm:SS.sss",
                       help="the first offset at or after this time (UTC unless a zone is given)")
    reset.add_argument("--by-duration", default=None, metavar="PnDTnHnMnS",
                       help="the first offset at or after now minus this duration")
    reset.add_argument("--from-file", default=None, metavar="CSV",
                       help="a plan: topic,partition,offset (one group) or group,topic,partition,offset")
    reset.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    reset.add_argument("--execute", action="store_true", help="commit the plan")
    reset.add_argument("--export", action="store_true", help="print the plan as CSV (for --from-file)")
    reset.set_defaults(func=lambda a: _run(_groups_reset, a, "shoal groups reset-offsets"))
    delete = gsub.add_parser("delete", help="delete groups (they must have no members)")
    _add_bootstrap(delete)
    delete.add_argument("--group", action="append", help="a group (repeatable)")
    delete.add_argument("--all-groups", action="store_true")
    delete.set_defaults(func=lambda a: _run(_groups_delete, a, "shoal groups delete"))
    dof = gsub.add_parser("delete-offsets", help="delete a group's committed offsets of topics")
    _add_bootstrap(dof)
    dof.add_argument("--group", required=True)
    dof.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P1,P2]")
    dof.set_defaults(func=lambda a: _run(_groups_delete_offsets, a, "shoal groups delete-offsets"))


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

    with _client(args) as client:
        print(format_list(list_transactions(client)))
    return 0


def _txn_describe(args: argparse.Namespace) -> int:
    from shoal.tools.table import format_tab_table
    from shoal.tools.transactions import DESCRIBE_HEADERS, describe_transaction

    with _client(args) as client:
        print(format_tab_table(DESCRIBE_HEADERS, [describe_transaction(client, args.transactional_id)]))
    return 0


def _txn_producers(args: argparse.Namespace) -> int:
    from shoal.tools.transactions import describe_producers, format_producers

    with _client(args) as client:
        print(format_producers(describe_producers(client, [(args.topic, args.partition)], args.broker_id)))
    return 0


def _txn_find_hanging(args: argparse.Namespace) -> int:
    from shoal.tools.transactions import find_hanging, format_hanging

    with _client(args) as client:
        print(format_hanging(find_hanging(client, broker_id=args.broker_id, topic=args.topic,
                                          partition=args.partition,
                                          max_transaction_timeout_min=args.max_transaction_timeout)))
    return 0


def _txn_abort(args: argparse.Namespace) -> int:
    from shoal.tools.transactions import abort_transaction

    with _client(args) as client:
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
        p.add_argument("--command-config", default=argparse.SUPPRESS, metavar="FILE", help=COMMAND_CONFIG_HELP)
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


# ---------------------------------------------------------------- shoal topics
def _topics_create(args: argparse.Namespace) -> int:
    from shoal.tools.topics import create_topic, parse_configs, parse_replica_assignment

    configs = parse_configs(args.config or [])
    assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
    with _client(args) as client:
        created = create_topic(client, args.topic, partitions=args.partitions,
                               replication_factor=args.replication_factor, configs=configs,
                               assignment=assignment, if_not_exists=args.if_not_exists)
    if created:
        print(f"Created topic {args.topic}.")
    return 0


def _topics_list(args: argparse.Namespace) -> int:
    from shoal.tools.topics import topic_names

    with _client(args) as client:
        names = topic_names(client, args.topic, args.exclude_internal)
    if names:
        print("\n".join(names))
    return 0


def _topics_describe(args: argparse.Namespace) -> int:
    from shoal.tools.topics import (
        DescribeFilter,
        describe_topics,
        ensure_exists,
        format_description,
        topic_names,
    )

    f = DescribeFilter(args.under_replicated_partitions, args.unavailable_partitions,
                       args.under_min_isr_partitions, args.at_min_isr_partitions, args.topics_with_overrides)
    with _client(args) as client:
        names = topic_names(client, args.topic, args.exclude_internal)
        ensure_exists(names, args.topic, not args.if_exists)
        states = describe_topics(client, names)
        live = set(client.brokers)
    lines = format_description(states, live, f)
    if lines:
        print("\n".join(lines))
    return 0


def _topics_delete(args: argparse.Namespace) -> int:
    from shoal.tools.topics import delete_topics, ensure_exists, topic_names

    with _client(args) as client:
        names = topic_names(client, args.topic, args.exclude_internal)
        ensure_exists(names, args.topic, not args.if_exists)
        if names:
            delete_topics(client, names)
    return 0


def _topics_alter(args: argparse.Namespace) -> int:
    from shoal.tools.topics import add_partitions, ensure_exists, parse_replica_assignment, topic_names
    from shoal.tools.wire import ToolError

    if args.partitions is None:
        raise ToolError("Option \"[alter]\" needs \"[partitions]\" (topic configs are changed with "
                        "`shoal configs alter`)")
    assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
    with _client(args) as client:
        names = topic_names(client, args.topic, args.exclude_internal)
        ensure_exists(names, args.topic, not args.if_exists)
        if names:
            add_partitions(client, names, args.partitions, assignment)
    return 0


def add_topics_parser(sub: argparse._SubParsersAction) -> None:
    """`shoal topics create|list|describe|delete|alter` (kafka-topics)."""
    topics = sub.add_parser("topics", help="create, list, describe, delete and alter topics (as kafka-topics)")
    tsub = topics.add_subparsers(dest="topics_command", required=True)

    def command(name: str, help_text: str, fn: Callable[[argparse.Namespace], int],
                topic_required: bool) -> argparse.ArgumentParser:
        p = tsub.add_parser(name, help=help_text)
        _add_bootstrap(p)
        p.add_argument("--topic", required=topic_required, default=None,
                       help="the topic (create), or a regular expression of topics (commas for alternatives)")
        if name != "create":
            p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
        p.set_defaults(func=lambda a: _run(fn, a, f"shoal topics {name}"))
        return p

    c = command("create", "create a topic", _topics_create, True)
    c.add_argument("--partitions", type=int, default=None, help="partitions (default: the broker's num.partitions)")
    c.add_argument("--replication-factor", type=int, default=None,
                   help="replicas of each partition (default: the broker's default.replication.factor)")
    c.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic config (repeatable)")
    c.add_argument("--replica-assignment", default=None, metavar="B1:B2,B3:B4",
                   help="replicas per partition: partitions by comma, broker ids by colon")
    c.add_argument("--if-not-exists", action="store_true", help="succeed quietly if the topic exists")
    command("list", "list topics", _topics_list, False)
    d = command("describe", "partitions, leaders, replicas and configs of topics", _topics_describe, False)
    d.add_argument("--if-exists", action="store_true", help="succeed quietly if no topic matches")
    d.add_argument("--under-replicated-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than their replica set")
    d.add_argument("--unavailable-partitions", action="store_true",
                   help="only partitions whose leader is not available")
    d.add_argument("--under-min-isr-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than min.insync.replicas")
    d.add_argument("--at-min-isr-partitions", action="store_true",
                   help="only partitions whose ISR equals min.insync.replicas")
    d.add_argument("--topics-with-overrides", action="store_true",
                   help="only topics that override configs (their topic line)")
    de = command("delete", "delete topics", _topics_delete, True)
    de.add_argument("--if-exists", action="store_true", help="succeed quietly if no topic matches")
    a = command("alter", "add partitions to topics", _topics_alter, True)
    a.add_argument("--partitions", type=int, default=None, help="the new partition count")
    a.add_argument("--replica-assignment", default=None, metavar="B1:B2,B3:B4",
                   help="replicas per partition (the entries past the current count are used)")
    a.add_argument("--if-exists", action="store_true", help="succeed quietly if no topic matches")


def add_acls_parser(sub: argparse._SubParsersAction) -> None:
    """`shoal acls` (kafka-acls)."""
    from shoal.tools.acls import add_acls_parser as add

    add(sub, _add_bootstrap)


# ---------------------------------------------------------------- configs, client-quotas, produce, consume
def add_configs_parser(sub: argparse._SubParsersAction) -> None:
    """`shoal configs describe|alter` (kafka-configs: topics, brokers, client quotas, users' SCRAM credentials)."""
    from shoal.tools.configs_cli import add_configs_parser as add

    add(sub)


def add_client_quotas_parser(sub: argparse._SubParsersAction) -> None:
    """`shoal client-quotas describe|alter` (kafka-configs' users, clients and ips: quotas only)."""
    from shoal.tools.configs_cli import add_client_quotas_parser as add

    add(sub)


def add_console_parsers(sub: argparse._SubParsersAction) -> None:
    """`shoal produce` and `shoal consume` (kafka-console-producer / kafka-console-consumer)."""
    from shoal.tools.console_cli import add_console_parsers as add

    add(sub)


# ---------------------------------------------------------------- share-groups (kafka-share-groups)
def add_share_groups_parser(sub: argparse._SubParsersAction) -> None:
    """`shoal share-groups --list|--describe|--reset-offsets|--delete|--delete-offsets ...` (kafka-share-groups):
    Kafka's own options and checks (share_groups_options.py parses them, as joptsimple does for Kafka's
    tool)."""
    p = sub.add_parser("share-groups", add_help=False, prefix_chars="\0",
                       help="list, describe, reset and delete share groups (as kafka-share-groups)")
    p.add_argument("share_args", nargs=argparse.REMAINDER)

    def run(args: argparse.Namespace) -> int:
        from shoal.tools.share_groups import main

        return main(args.share_args)

    p.set_defaults(func=run)
