"""The `shoal` command: serve | topics | configs | client-quotas | acls | groups | offsets dump | transactions ..."""

from __future__ import annotations

import argparse
import logging
import sys

from shoal.tools.cli import (
    add_acls_parser,
    add_client_quotas_parser,
    add_configs_parser,
    add_console_parsers,
    add_groups_parser,
    add_offsets_parser,
    add_share_groups_parser,
    add_topics_parser,
    add_transactions_parser,
)


def _serve(args: argparse.Namespace) -> int:
    from shoal.broker.config import BrokerConfig, ConfigError
    from shoal.broker.serve import serve

    try:
        config = BrokerConfig.load(args.properties, args.override)
    except (ConfigError, OSError) as e:
        print(f"shoal serve: {e}", file=sys.stderr)
        return 2
    if args.nodes < 1:
        print("shoal serve: --nodes must be at least 1", file=sys.stderr)
        return 2
    node_ports = None
    if args.node_ports:
        try:
            node_ports = [int(p) for p in args.node_ports.split(",")]
        except ValueError:
            node_ports = []
        if len(node_ports) != args.nodes or not all(0 <= p < 65536 for p in node_ports):
            print(f"shoal serve: --node-ports needs {args.nodes} port numbers, comma-separated",
                  file=sys.stderr)
            return 2
    serve(config, args.nodes, args.control_stdin, node_ports)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shoal", description="A Kafka-wire-compatible broker in Python.")
    parser.add_argument("--log-level", default=None,
                        help="logging level (default INFO for serve, WARNING for the tools)")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start a broker (as kafka-server-start.sh)")
    serve.add_argument("properties", nargs="?", help="a Kafka server.properties file")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a property (repeatable), as kafka-server-start.sh --override")
    serve.add_argument("--nodes", type=int, default=1,
                       help="run N broker nodes in this process (ports listener, listener+1, ...)")
    serve.add_argument("--node-ports", metavar="P0,P1,...",
                       help="each node's port (instead of listener, listener+1, ...)")
    serve.add_argument("--control-stdin", action="store_true",
                       help="read 'stop-node N' / 'start-node N' commands from standard input")
    serve.set_defaults(func=_serve)
    add_topics_parser(sub)
    add_configs_parser(sub)
    add_client_quotas_parser(sub)
    add_acls_parser(sub)
    add_console_parsers(sub)
    add_groups_parser(sub)
    add_share_groups_parser(sub)
    add_offsets_parser(sub)
    add_transactions_parser(sub)
    return parser


# Kafka's tools name their action with a flag (kafka-topics.sh --create ...), shoal's with a
# subcommand (shoal topics create ...); both forms are accepted, so scripts written for Kafka's
# tools run unchanged with the tool's name swapped.
_ACTION_FLAGS = {
    "topics": ("create", "list", "describe", "delete", "alter"),
    "configs": ("describe", "alter"),
    "client-quotas": ("describe", "alter"),
    "groups": ("list", "describe", "reset-offsets", "delete", "delete-offsets"),
}


def kafka_action_form(argv: list[str]) -> list[str]:
    """``argv`` with a Kafka-style action flag (``topics --bootstrap-server B --create ...``)
    moved into shoal's subcommand position (``topics create --bootstrap-server B ...``)."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 1 if "=" in argv[i] or argv[i] in ("-h", "--help") else 2  # --log-level LEVEL
    if i >= len(argv) or argv[i] not in _ACTION_FLAGS:
        return argv
    actions = _ACTION_FLAGS[argv[i]]
    rest = argv[i + 1:]
    if rest and rest[0] in actions:
        return argv
    for j, word in enumerate(rest):
        if word.startswith("--") and word[2:] in actions:
            return [*argv[:i + 1], word[2:], *rest[:j], *rest[j + 1:]]
    return argv


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(kafka_action_form(sys.argv[1:] if argv is None else list(argv)))
    level = args.log_level or ("INFO" if args.command == "serve" else "WARNING")
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
