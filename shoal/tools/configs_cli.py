"""Argument parsing and entry points of `shoal configs describe|alter` (kafka-configs: topics, brokers,
users' SCRAM credentials and client quotas of users, clients and ips) and of `shoal client-quotas`,
the same commands for client quotas only. Kept light (argparse only at import), as cli.py."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from shoal.tools.cli import _add_bootstrap, _client, _run

CONFIG_TYPES = ("topics", "brokers", "users", "clients", "ips", "groups")
QUOTA_ENTITY_TYPES = ("users", "clients", "ips")
# Kafka's order of its entity flags (then the defaults flags): the first names the entity in messages
_FLAGS = (("topic", "topics"), ("client", "clients"), ("user", "users"), ("broker", "brokers"), ("ip", "ips"),
          ("group", "groups"))
_DEFAULT_FLAGS = (("client_defaults", "clients"), ("user_defaults", "users"), ("broker_defaults", "brokers"),
                  ("ip_defaults", "ips"))


def configs_entities(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """Kafka's entity types and names of the command line ("" for a default), in its order."""
    from shoal.tools.wire import ToolError

    flags = [(getattr(args, a, None), t) for a, t in _FLAGS]
    defaults = [t for a, t in _DEFAULT_FLAGS if getattr(args, a, False)]
    types = list(args.entity_types or []) + [t for v, t in flags if v is not None] + defaults
    names = list(args.entity_names or []) + [v for v, _ in flags if v is not None] + [""] * len(defaults)
    if (args.entity_types or args.entity_names) and (defaults or any(v is not None for v, _ in flags)):
        raise ToolError("--entity-{type,name,default} should not be used in conjunction with specific entity flags")
    if not types:
        if getattr(args, "quotas_only", False):
            return [], []
        if names == [""]:
            return ["brokers"], [""]  # --entity-default alone: the brokers' default
        raise ToolError("--entity-type (topics, brokers, users, clients, ips or groups) is required")
    if len(types) != len(set(types)):
        dup = [t for i, t in enumerate(types) if t in types[:i]]
        raise ToolError(f"Duplicate entity type(s) specified: {','.join(dict.fromkeys(dup))}")
    if len(types) > 1 and set(types) != {"users", "clients"}:
        raise ToolError("Only 'users' and 'clients' entity types may be specified together")
    if types[0] not in QUOTA_ENTITY_TYPES and len(names) > 1:
        raise ToolError("More entity names specified than entity types")
    if types[0] in ("topics", "groups") and names == [""]:
        raise ToolError("--entity-default is for brokers")
    return types, names


def _configs_describe(args: argparse.Namespace) -> int:
    from shoal.tools.configs import ENTITY_TYPES, describe, entities, format_describe

    types, names = configs_entities(args)
    if not types or types[0] in QUOTA_ENTITY_TYPES:
        return _quotas_describe(args, types, names)
    entity, name = types[0], (names[0] if names else None)
    with _client(args) as client:
        shown = [name] if name is not None else entities(client, ENTITY_TYPES[entity])
        blocks = [format_describe(entity, n, describe(client, ENTITY_TYPES[entity], n, args.all), args.all)
                  for n in shown]
    print("\n".join(blocks))
    return 0


def _quotas_describe(args: argparse.Namespace, types: list[str], names: list[str]) -> int:
    """Quota lines, then (users, unless with clients or a default) the SCRAM lines, as kafka-configs."""
    from shoal.tools.configs import describe_scram
    from shoal.tools.quotas import check_entities, describe_quotas, format_quotas

    check_entities(types, names, alter=False)
    scram = types and types[0] == "users" and "clients" not in types and "" not in names \
        and not getattr(args, "quotas_only", False)
    with _client(args) as client:
        lines = format_quotas(describe_quotas(client, types, names))
        if scram:
            lines += describe_scram(client, names[0] if names else None)
    if lines:
        print("\n".join(lines))
    return 0


def _configs_alter(args: argparse.Namespace) -> int:
    from shoal.tools.configs import ENTITY_TYPES, alter, parse_add_config
    from shoal.tools.wire import ToolError

    types, names = configs_entities(args)
    quota_types = not types or types[0] in QUOTA_ENTITY_TYPES
    if quota_types:
        from shoal.tools.quotas import check_entities

        if not types:
            raise ToolError("--entity-type (users, clients or ips) is required")
        check_entities(types, names, alter=True)
    elif not names:
        raise ToolError("an entity name must be specified for --alter (--entity-name, or --entity-default)")
    add: dict[str, str] = {}
    for spec in args.add_config or []:
        add.update(parse_add_config(spec))
    delete = [k.strip() for spec in (args.delete_config or []) for k in spec.split(",") if k.strip()]
    if not add and not delete:
        raise ToolError("nothing to alter: give --add-config and/or --delete-config")
    entity, name = types[0], names[0]
    if quota_types:
        from shoal.tools.quotas import alter_quotas, is_quota_alter

        quota = is_quota_alter(types, names, add, delete)  # before connecting
        if not quota and getattr(args, "quotas_only", False):
            raise ToolError("SCRAM credentials are altered with `shoal configs`, not `shoal client-quotas`")
        with _client(args) as client:
            if quota:
                alter_quotas(client, types, names, add, delete)
            else:
                from shoal.tools.configs import alter_scram

                alter_scram(client, name, add, delete)
    else:
        with _client(args) as client:
            alter(client, ENTITY_TYPES[entity], name, add, delete)
    if name:
        print(f"Completed updating config for {entity[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {entity} in the cluster.")
    return 0


def _entity_flags(p: argparse.ArgumentParser, types: tuple[str, ...]) -> None:
    p.add_argument("--entity-type", dest="entity_types", action="append", choices=types,
                   help="the entity's type; users and clients together for a user's clients (repeatable)")
    p.add_argument("--entity-name", dest="entity_names", action="append", metavar="NAME",
                   help="the name of the entity of the --entity-type in the same position: " +
                        ("a topic, a broker id, a group, " if "topics" in types else "") + "a user, a client id or an ip")
    p.add_argument("--entity-default", dest="entity_names", action="append_const", const="",
                   help="the default entity of the --entity-type in the same position (instead of a name)")
    for flag, entity in _FLAGS:
        if entity in types:
            p.add_argument(f"--{flag}", default=None, help=f"same as --entity-type {entity} --entity-name NAME")
    for flag, entity in _DEFAULT_FLAGS:
        if entity in types:
            p.add_argument(f"--{flag.replace('_', '-')}", action="store_true",
                           help=f"same as --entity-type {entity} --entity-default")


def _commands(parser: argparse.ArgumentParser, prog: str, types: tuple[str, ...], quotas_only: bool) -> None:
    csub = parser.add_subparsers(dest="configs_command", required=True)

    def command(name: str, help_text: str, fn: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
        p = csub.add_parser(name, help=help_text)
        _add_bootstrap(p)
        _entity_flags(p, types)
        p.set_defaults(func=lambda a: _run(fn, a, f"{prog} {name}"), quotas_only=quotas_only)
        return p

    quotas = "the quotas of users, clients (of a user) and ips"
    d = command("describe", f"list configs of a topic or broker (all topics or brokers without a name), {quotas} "
                            "(users also: SCRAM credentials)" if not quotas_only
                else f"list {quotas} (every entity of the types given; without a type: every entity)",
                _configs_describe)
    if not quotas_only:
        d.add_argument("--all", action="store_true", help="every config, not only the dynamic ones")
    a = command("alter", "set or remove configs", _configs_alter)
    a.add_argument("--add-config", action="append", metavar="K1=V1,K2=[A,B]",
                   help="configs to set (comma-separated; brackets hold list values); quotas: producer_byte_rate, "
                        "consumer_byte_rate, request_percentage, controller_mutation_rate (users, clients), "
                        "connection_creation_rate (ips)" + ("" if quotas_only else
                        "; users' SCRAM credentials: 'SCRAM-SHA-256=[iterations=8192,password=...]' (one mechanism "
                        "per command: a broker refuses two changes of one user in a request, as with Kafka's tool; "
                        "never with quotas in one command)"))
    a.add_argument("--delete-config", action="append", metavar="K1,K2", help="configs to remove")


def add_configs_parser(sub: argparse._SubParsersAction) -> None:
    """`shoal configs describe|alter` (kafka-configs)."""
    configs = sub.add_parser("configs", help="describe and alter topic and broker configs, client quotas and "
                                             "users' SCRAM credentials (as kafka-configs)")
    _commands(configs, "shoal configs", CONFIG_TYPES, quotas_only=False)


def add_client_quotas_parser(sub: argparse._SubParsersAction) -> None:
    """`shoal client-quotas describe|alter`: `shoal configs` for users, clients and ips, quotas only."""
    quotas = sub.add_parser("client-quotas", help="describe and alter client quotas of users, clients and ips "
                                                  "(`shoal configs` for quotas only)")
    _commands(quotas, "shoal client-quotas", QUOTA_ENTITY_TYPES, quotas_only=True)
