"""`shoal acls`: kafka-acls.sh over the wire (CreateAcls, DescribeAcls, DeleteAcls).

The flags are Kafka's: ``--add`` / ``--remove`` / ``--list``; resources ``--topic``, ``--group``,
``--transactional-id``, ``--cluster``, ``--delegation-token``, ``--user-principal`` (repeatable),
``--resource-pattern-type`` (literal, prefixed; any and match for --list and --remove);
``--allow-principal`` / ``--deny-principal`` and ``--allow-host`` / ``--deny-host`` (``*`` unless given),
``--operation`` (default All), the ``--producer`` / ``--consumer`` (``--idempotent``) conveniences,
``--principal`` for --list and ``--force`` for --remove. What is printed is what Kafka 4's AclCommand
prints: ``Acl (pattern=..., entry=...) already exists.`` for an ACL --add finds (it is not sent
again), ``Adding ACLs for resource `ResourcePattern(...)`: `` then one tab-indented
``(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)`` per entry, ``Current ACLs
for resource ...`` for --list, the confirmation questions of --remove. Kafka's tool prints sets, in
the JVM's hash order; this one prints entries in the order of the command line (add) or of the
broker's answer (list).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.create_acls_request import CreateAclsRequest
from shoal.protocol.generated.delete_acls_request import DeleteAclsRequest
from shoal.protocol.generated.describe_acls_request import DescribeAclsRequest
from shoal.tools.secure_wire import command_config
from shoal.tools.wire import ToolClient, ToolError

__all__ = ["AclUsageError", "add_acls_parser", "run_acls"]

# Kafka's enums (only the codes are shared with the broker's authorizer module)
PATTERN_TYPES = {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
PATTERN_NAMES = {v: k for k, v in PATTERN_TYPES.items()}
ALLOW, DENY = 3, 2
PERMISSION_NAMES = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}
CLUSTER_NAME = "kafka-cluster"
WILDCARD_HOST = "*"

_O = AclOperation
# AclEntry.supportedOperations (what --operation may name for each resource type, besides ALL)
SUPPORTED: dict[int, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS,
                         _O.ALTER_CONFIGS),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE,
                           _O.ALTER, _O.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE, _O.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}
# Kafka's exception classes whose names are not the error's name in camel case
_EXCEPTIONS = {
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "GroupAuthorizationException",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TransactionalIdAuthorizationException",
    ErrorCode.INVALID_REQUEST: "InvalidRequestException",
}


class AclUsageError(ToolError):
    """A command line Kafka's AclCommand refuses before connecting (its usage message)."""


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def kafka_error(code: int, message: str | None) -> str:
    """The message of Kafka's exception for an error code, as ``Throwable.toString()`` prints it."""
    try:
        err = ErrorCode(code)
    except ValueError:
        cls = "UnknownServerException"
    else:
        cls = _EXCEPTIONS.get(err, _pascal(err.name) + "Exception")
    return f"org.apache.kafka.common.errors.{cls}" + (f": {message}" if message else "")


def parse_operation(name: str) -> AclOperation:
    """Kafka's SecurityUtils.operation: ``Read``, ``READ``, ``read``, ``IdempotentWrite``; else UNKNOWN."""
    name = name.strip()
    for op in AclOperation:
        pascal = _pascal(op.name)
        if name in (pascal, pascal.upper()) or name.upper() == pascal.upper():
            return op
    return AclOperation.UNKNOWN


def parse_principal(text: str) -> str:
    """``Type:name`` (Kafka's SecurityUtils.parseKafkaPrincipal), as its string."""
    text = text.strip()
    kind, colon, name = text.partition(":")
    if not colon or not kind or not name:
        raise ToolError(f"expected a string in format principalType:principalName but got {text}")
    return f"{kind}:{name}"


@dataclass(frozen=True)
class Pattern:
    """A resource pattern (or, with pattern type ANY / MATCH, a pattern filter)."""

    resource_type: int
    name: str
    pattern_type: int

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={ResourceType(self.resource_type).name}, name={self.name}, "
                f"patternType={PATTERN_NAMES[self.pattern_type]})")


@dataclass(frozen=True)
class Entry:
    principal: str
    host: str
    operation: int
    permission: int

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={AclOperation(self.operation).name}, "
                f"permissionType={PERMISSION_NAMES.get(self.permission, 'UNKNOWN')})")


# ---------------------------------------------------------------- command line -> ACLs
def _principals(values: list[str] | None) -> list[str]:
    return list(dict.fromkeys(parse_principal(v) for v in values or []))


def _hosts(hosts: list[str] | None, principals: list[str]) -> list[str]:
    if hosts:
        return list(dict.fromkeys(h.strip() for h in hosts))
    return [WILDCARD_HOST] if principals else []


def _entries(args: argparse.Namespace, operations: Iterable[AclOperation]) -> list[Entry]:
    allowed, denied = _principals(args.allow_principal), _principals(args.deny_principal)
    allow_hosts, deny_hosts = _hosts(args.allow_host, allowed), _hosts(args.deny_host, denied)
    out: list[Entry] = []
    ops = list(dict.fromkeys(operations))
    for principals, hosts, permission in ((allowed, allow_hosts, ALLOW), (denied, deny_hosts, DENY)):
        out += [Entry(p, h, op, permission) for p in principals for op in ops for h in hosts]
    return out


def _pattern_type(args: argparse.Namespace) -> int:
    return PATTERN_TYPES[args.resource_pattern_type.upper()]


def resource_filters(args: argparse.Namespace, die_if_none: bool = True) -> list[Pattern]:
    """The resources named on the command line, in Kafka's order (topics, cluster, groups, ...)."""
    pt = _pattern_type(args)
    out: list[Pattern] = [Pattern(ResourceType.TOPIC, t.strip(), pt) for t in args.topic or []]
    if pt == PATTERN_TYPES["LITERAL"] and (args.cluster or args.idempotent):
        out.append(Pattern(ResourceType.CLUSTER, CLUSTER_NAME, PATTERN_TYPES["LITERAL"]))
    out += [Pattern(ResourceType.GROUP, g.strip(), pt) for g in args.group or []]
    out += [Pattern(ResourceType.TRANSACTIONAL_ID, t, pt) for t in args.transactional_id or []]
    out += [Pattern(ResourceType.DELEGATION_TOKEN, t.strip(), pt) for t in args.delegation_token or []]
    out += [Pattern(ResourceType.USER, u.strip(), pt) for u in args.user_principal or []]
    if not out and die_if_none:
        raise AclUsageError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                            "or --delegation-token <Delegation Token ID>")
    return list(dict.fromkeys(out))


def resource_to_entries(args: argparse.Namespace) -> dict[Pattern, list[Entry]]:
    """AclCommand's getResourceFilterToAcls: the entries for each resource (pattern or filter)."""
    out: dict[Pattern, list[Entry]] = {}
    if not args.producer and not args.consumer:
        ops = [parse_operation(o) for o in args.operation or ["All"]]
        entries = _entries(args, ops)
        out.update({f: list(entries) for f in resource_filters(args)})
    if args.producer:
        for f in resource_filters(args):
            if f.resource_type == ResourceType.TOPIC:
                out[f] = _entries(args, (_O.WRITE, _O.DESCRIBE, _O.CREATE))
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                out[f] = _entries(args, (_O.WRITE, _O.DESCRIBE))
        if args.idempotent:
            out[Pattern(ResourceType.CLUSTER, CLUSTER_NAME, PATTERN_TYPES["LITERAL"])] = \
                _entries(args, (_O.IDEMPOTENT_WRITE,))
    if args.consumer:
        for f in resource_filters(args):
            consumer_ops: tuple[AclOperation, ...] = (
                (_O.READ, _O.DESCRIBE) if f.resource_type == ResourceType.TOPIC else
                (_O.READ,) if f.resource_type == ResourceType.GROUP else ())
            if consumer_ops:
                out[f] = list(dict.fromkeys([*out.get(f, []), *_entries(args, consumer_ops)]))
    for f, entries in out.items():
        valid = {*SUPPORTED.get(f.resource_type, ()), _O.ALL}
        if any(e.operation not in valid for e in entries):
            names = ", ".join(op.name for op in (*SUPPORTED.get(f.resource_type, ()), _O.ALL))
            raise AclUsageError(f"ResourceType {ResourceType(f.resource_type).name} only supports operations [{names}]")
    return out


def check_args(args: argparse.Namespace) -> str:
    """AclCommandOptions.checkArgs; the action (add, remove, list)."""
    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise AclUsageError("Command must include exactly one action: --list, --add, --remove. ")

    def invalid(used: str, others: Iterable[str]) -> None:
        if getattr(args, used):
            for other in others:
                if getattr(args, other.replace("-", "_")) not in (None, False, []):
                    raise AclUsageError(f'Option "[{used}]" can\'t be used with option "[{other}]"')

    invalid("list", ("producer", "consumer", "allow-host", "allow-principal", "deny-host", "deny-principal"))
    invalid("producer", ("operation", "deny-principal", "deny-host"))
    invalid("consumer", ("operation", "deny-principal", "deny-host"))
    if args.principal is not None and not args.list:
        raise AclUsageError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise AclUsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise AclUsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group
                          or (not args.producer and (args.cluster or args.transactional_id))):
        raise AclUsageError("With --consumer you must specify a --topic and a --group and no --cluster or "
                            "--transactional-id option should be specified.")
    return actions[0]


# ---------------------------------------------------------------- the three actions
def _entries_text(entries: list[Entry]) -> str:
    return "\n\t".join(str(e) for e in entries)


def add(client: ToolClient, args: argparse.Namespace) -> None:
    pt = _pattern_type(args)
    if pt not in (PATTERN_TYPES["LITERAL"], PATTERN_TYPES["PREFIXED"]):
        raise AclUsageError(f"A '--resource-pattern-type' value of '{PATTERN_NAMES[pt]}' is not valid when "
                            "adding acls.")
    todo = resource_to_entries(args)
    if any(not entries for entries in todo.values()):
        raise AclUsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    conn = client.node(client.all_nodes()[0])
    for pattern, wanted in todo.items():
        # Kafka 4.x's tool looks first, and names the ACLs that exist already instead of adding them
        existing = set(describe(client, [pattern]).get(pattern, []))
        entries = []
        for e in wanted:
            if e in existing:
                print(f"Acl (pattern={pattern}, entry={e}) already exists.")
            else:
                entries.append(e)
        if not entries:
            continue
        print(f"Adding ACLs for resource `{pattern}`: \n \t{_entries_text(entries)}\n", flush=True)
        creations = [CreateAclsRequest.AclCreation(
            resource_type=pattern.resource_type, resource_name=pattern.name, resource_pattern_type=pattern.pattern_type,
            principal=e.principal, host=e.host, operation=e.operation, permission_type=e.permission)
            for e in entries]
        resp = conn.send(CreateAclsRequest(creations=creations))
        for r in resp.results:
            if r.error_code:
                raise ToolError(kafka_error(r.error_code, r.error_message))


def describe(client: ToolClient, filters: list[Pattern]) -> dict[Pattern, list[Entry]]:
    """Every ACL matching any of ``filters`` (all ACLs without), grouped by resource pattern."""
    conn = client.node(client.all_nodes()[0])
    found: dict[Pattern, list[Entry]] = {}
    queries: list[tuple[int, str | None, int]] = [(f.resource_type, f.name, f.pattern_type) for f in filters] \
        or [(ResourceType.ANY, None, PATTERN_TYPES["ANY"])]
    for rtype, name, ptype in queries:
        resp = conn.send(DescribeAclsRequest(resource_type_filter=rtype, resource_name_filter=name,
                                             pattern_type_filter=ptype, principal_filter=None, host_filter=None,
                                             operation=_O.ANY, permission_type=1))
        if resp.error_code:
            raise ToolError(kafka_error(resp.error_code, resp.error_message))
        for r in resp.resources:
            entries = found.setdefault(Pattern(r.resource_type, r.resource_name, r.pattern_type), [])
            for a in r.acls:
                e = Entry(a.principal, a.host, a.operation, a.permission_type)
                if e not in entries:
                    entries.append(e)
    return found


def _print_resources(found: dict[Pattern, list[Entry]]) -> None:
    for pattern, entries in found.items():
        print(f"Current ACLs for resource `{pattern}`:\n\t{_entries_text(entries)}\n")


def list_acls(client: ToolClient, args: argparse.Namespace) -> None:
    filters = resource_filters(args, die_if_none=False)
    principals = [parse_principal(p) for p in args.principal or [] if p]
    found = describe(client, filters)
    if not principals:
        _print_resources(found)
        return
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        mine = {p: [e for e in es if e.principal == principal] for p, es in found.items()}
        _print_resources({p: es for p, es in mine.items() if es})


def _confirm(args: argparse.Namespace, message: str) -> bool:
    if args.force:
        return True
    print(message, flush=True)
    try:
        answer = input()
    except EOFError:
        return False
    return answer.strip().lower() == "y"


def remove(client: ToolClient, args: argparse.Namespace) -> None:
    conn = client.node(client.all_nodes()[0])
    for f, entries in resource_to_entries(args).items():
        if not entries:
            question = f"Are you sure you want to delete all ACLs for resource filter `{f}`? (y/n)"
            selectors: list[tuple[str | None, str | None, int, int]] = [(None, None, _O.ANY, 1)]
        else:
            question = (f"Are you sure you want to remove ACLs: \n \t{_entries_text(entries)}\n from resource filter "
                        f"`{f}`? (y/n)")
            selectors = [(e.principal, e.host, e.operation, e.permission) for e in entries]
        if not _confirm(args, question):
            continue
        resp = conn.send(DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=f.resource_type, resource_name_filter=f.name, pattern_type_filter=f.pattern_type,
            principal_filter=p, host_filter=h, operation=op, permission_type=perm) for p, h, op, perm in selectors]))
        for r in resp.filter_results:
            if r.error_code:
                raise ToolError(kafka_error(r.error_code, r.error_message))


# ---------------------------------------------------------------- entry point
def run_acls(args: argparse.Namespace) -> int:
    try:
        action = check_args(args)
        if action == "add":
            resource_to_entries(args)  # refuse a bad command line before connecting, as Kafka does
        with ToolClient(args.bootstrap_server, timeout=args.timeout,
                        config=command_config(args.command_config)) as client:
            {"add": add, "remove": remove, "list": list_acls}[action](client, args)
    except AclUsageError as e:
        print(e, file=sys.stderr)
        return 1
    except ToolError as e:
        print(f"Error while executing ACL command: {e}", flush=True)
        return 1
    except BrokenPipeError:  # `| head` closed our output
        return 0
    except KeyboardInterrupt:
        return 130
    return 0


_PATTERN_CHOICES = re.compile(r"(?i)^(literal|prefixed|any|match)$")


def _pattern_type_arg(value: str) -> str:
    if not _PATTERN_CHOICES.match(value):
        raise argparse.ArgumentTypeError(f"Unknown resource-pattern-type: {value}")
    return value.upper()


def add_acls_parser(sub: argparse._SubParsersAction,
                    add_bootstrap: Callable[[argparse.ArgumentParser], None]) -> None:
    """`shoal acls --add|--remove|--list ...` (kafka-acls); ``add_bootstrap``: cli's --bootstrap-server,
    --timeout and --command-config."""
    p = sub.add_parser("acls", help="add, remove and list ACLs (as kafka-acls)")
    add_bootstrap(p)
    act = p.add_argument_group("action (exactly one)")
    act.add_argument("--add", action="store_true", help="add ACLs")
    act.add_argument("--remove", action="store_true", help="remove ACLs")
    act.add_argument("--list", action="store_true", help="list ACLs (of the resources given, else all)")
    res = p.add_argument_group("resources (repeatable)")
    res.add_argument("--topic", action="append", help="a topic ('*': all topics)")
    res.add_argument("--group", action="append", help="a consumer group ('*': all groups)")
    res.add_argument("--transactional-id", action="append", help="a transactional id ('*': all)")
    res.add_argument("--cluster", action="store_true", help="the cluster")
    res.add_argument("--delegation-token", action="append", help="a delegation token ('*': all)")
    res.add_argument("--user-principal", action="append", help="a user principal, as a resource (CreateTokens...)")
    res.add_argument("--resource-pattern-type", type=_pattern_type_arg, default="LITERAL",
                     metavar="literal|prefixed|any|match",
                     help="the pattern type of the resources (add: literal or prefixed; list and remove also: "
                          "any, or match for every pattern that applies to the names); default literal")
    who = p.add_argument_group("entries")
    who.add_argument("--allow-principal", action="append", metavar="TYPE:NAME", help="principal allowed (User:alice)")
    who.add_argument("--deny-principal", action="append", metavar="TYPE:NAME", help="principal denied")
    who.add_argument("--allow-host", action="append", help="host the allowed principals may come from (default *)")
    who.add_argument("--deny-host", action="append", help="host the denied principals are denied from (default *)")
    who.add_argument("--operation", action="append",
                     help="operation allowed or denied (repeatable, default All): " +
                          ", ".join(_pascal(o.name) for o in AclOperation if o > AclOperation.ANY))
    who.add_argument("--principal", action="append", nargs="?", const="", metavar="TYPE:NAME",
                     help="with --list: only the ACLs of this principal (repeatable)")
    who.add_argument("--producer", action="store_true",
                     help="ACLs of a producer: WRITE, DESCRIBE, CREATE on topics (WRITE, DESCRIBE on transactional ids)")
    who.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    who.add_argument("--consumer", action="store_true", help="ACLs of a consumer: READ, DESCRIBE on topics, READ on "
                                                              "groups")
    p.add_argument("--force", action="store_true", help="assume yes to the questions of --remove")
    p.set_defaults(func=run_acls)
