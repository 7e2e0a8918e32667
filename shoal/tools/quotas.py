"""Client quotas in `shoal configs` (and `shoal client-quotas`): kafka-configs.sh's ``--entity-type
users|clients|ips`` over AlterClientQuotas and DescribeClientQuotas.

An entity is one to two (type, name) pairs, Kafka's command line's: ``--entity-type users
--entity-name alice [--entity-type clients --entity-name app]``, ``--entity-default`` ("" here) for
the default of its type; names given for fewer types than named (``--describe --entity-type users``)
match every entity of that type. ``--describe`` prints ``Quota configs for user-principal 'alice',
client-id 'app' are producer_byte_rate=1024.0, ...`` per entity (the values as Java prints doubles,
entities and values in the order of the Java hash maps Kafka's AdminClient collects them in), then,
for users without clients and without a default, the SCRAM lines (configs.py). ``--alter`` checks the
keys as Kafka's ConfigCommand does (quota keys, or for users SCRAM mechanisms, never both in one
command), reads the entity's current quotas (a key to delete must be set) and sends one alteration.
"""

from __future__ import annotations

import socket
from decimal import Decimal

from shoal.coordinator.partitioning import hash_map_order, java_string_hash
from shoal.protocol.generated.alter_client_quotas_request import AlterClientQuotasRequest as A
from shoal.protocol.generated.describe_client_quotas_request import DescribeClientQuotasRequest
from shoal.tools.wire import ToolClient, ToolError, check_error

# kafka-configs' entity types, their ClientQuotaEntity type names and how describe names them
QUOTA_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_SHOWN = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
USER_CLIENT_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
IP_KEYS = ("connection_creation_rate",)
SCRAM_KEYS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
EXACT, DEFAULT, ANY = 0, 1, 2  # DescribeClientQuotas match types


def java_hash(s: str | None) -> int:
    """Java's String.hashCode as an unsigned 32-bit number (Objects.hashCode: 0 for null)."""
    return 0 if s is None else java_string_hash(s) & 0xFFFFFFFF


def java_set_order(names: list[str]) -> list[str]:
    """A java.util.HashSet's order of ``names`` (duplicates dropped), as Kafka's messages list them."""
    distinct = list(dict.fromkeys(names))
    return hash_map_order(distinct, [java_hash(n) for n in distinct], 16)


def java_double(v: float) -> str:
    """Java's Double.toString: ``1024.0``, ``12.5``, ``1.0E7``."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if str(v).startswith("-") else "0.0"
    if 1e-3 <= abs(v) < 1e7:
        r = repr(v)
        return r if "." in r else f"{r}.0"
    sign, digits, exp = Decimal(repr(v)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exponent = int(exp) + len(digits) - 1
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{exponent}"


def check_entities(types: list[str], names: list[str], alter: bool) -> None:
    """ConfigCommand's checks of users / clients / ips entities (after configs_cli.configs_entities', which
    refused duplicate types and types other than users and clients together)."""
    if len(names) > len(types):
        raise ToolError("More entity names specified than entity types")
    if "ips" in types:
        for name in names:
            if name and not _valid_ip_entity(name):
                raise ToolError(f"The entity name for {types[0]} must be a valid IP or resolvable host, but it is: "
                                f"{name}")
    if alter:
        if not names:
            raise ToolError("An entity-name or default entity must be specified with --alter of users, clients, "
                            "brokers or ips")
        if len(names) != len(types):
            raise ToolError("An entity name must be specified for every entity type")


def _valid_ip_entity(name: str) -> bool:
    try:
        socket.getaddrinfo(name, None)
    except (OSError, UnicodeError):
        return False
    return True


def is_quota_alter(types: list[str], names: list[str], add: dict[str, str], delete: list[str]) -> bool:
    """ConfigCommand's checks of the keys of an --alter of users / clients / ips: True for quotas,
    False for users' SCRAM credentials (configs.py alters those)."""
    if types[0] == "ips":
        unknown = [k for k in [*add, *delete] if k not in IP_KEYS]
        if unknown:
            raise ToolError(f"Only connection quota configs can be added for 'ips' using --bootstrap-server. "
                            f"Unexpected config names: {', '.join(java_set_order(unknown))}")
        return True
    quota = any(k in USER_CLIENT_KEYS for k in [*add, *delete])
    if types[0] == "clients" or len(types) == 2:
        for verb, keys in (("added", list(add)), ("deleted", delete)):
            bad = [k for k in keys if k not in USER_CLIENT_KEYS]
            if bad:
                raise ToolError(f"Only quota configs can be {verb} for 'clients' using --bootstrap-server. "
                                f"Unexpected config names: {','.join(java_set_order(bad))}")
        return True
    for verb, keys in (("added", list(add)), ("deleted", delete)):
        bad = [k for k in keys if k not in USER_CLIENT_KEYS and k not in SCRAM_KEYS]
        if bad:
            raise ToolError(f"Only quota and SCRAM credential configs can be {verb} for 'users' using "
                            f"--bootstrap-server. Unexpected config names: {','.join(java_set_order(bad))}")
    scram = any(k in SCRAM_KEYS for k in [*add, *delete])
    if scram and "" in names:
        raise ToolError("The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials "
                        "using --bootstrap-server.")
    if scram and quota:
        raise ToolError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using "
                        "--bootstrap-server.")
    return quota


def _components(types: list[str], names: list[str]) -> list:
    out = []
    for i, t in enumerate(types):
        name = names[i] if i < len(names) else None
        match = (ANY, None) if name is None else (DEFAULT, None) if name == "" else (EXACT, name)
        out.append(DescribeClientQuotasRequest.ComponentData(entity_type=QUOTA_TYPES[t], match_type=match[0],
                                                             match=match[1]))
    return out


def describe_quotas(client: ToolClient, types: list[str], names: list[str],
                    ) -> list[tuple[dict[str, str | None], list[tuple[str, float]]]]:
    """DescribeClientQuotas of exactly these entity types (Kafka's containsOnly filter; no types: every
    entity), as (entity, values) in the order of the Java hash maps AdminClient collects them in."""
    conn = client.node(client.all_nodes()[0])
    resp = conn.send(DescribeClientQuotasRequest(components=_components(types, names), strict=bool(types)))
    check_error(resp.error_code, "cannot describe client quotas", resp.error_message)
    found = []
    for entry in resp.entries or []:
        entity = {e.entity_type: e.entity_name for e in entry.entity}
        values = {v.key: v.value for v in entry.values}
        keys = hash_map_order(list(values), [java_hash(k) for k in values], len(entry.values))
        found.append((entity, [(k, values[k]) for k in keys]))
    # ClientQuotaEntity's hash code: Objects.hash(its map), 31 + the map's
    hashes = [(31 + sum(java_hash(t) ^ java_hash(n) for t, n in e.items())) & 0xFFFFFFFF for e, _ in found]
    return hash_map_order(found, hashes, len(found))


def format_quotas(found: list[tuple[dict[str, str | None], list[tuple[str, float]]]]) -> list[str]:
    lines = []
    for entity, values in found:
        parts = [f"{_SHOWN[t]} '{entity[t]}'" if entity[t] is not None else f"the default {_SHOWN[t]}"
                 for t in ("user", "client-id", "ip") if t in entity]
        shown = ", ".join(f"{k}={java_double(v)}" for k, v in values)
        lines.append(f"Quota configs for {', '.join(parts)} are {shown}")
    return lines


def alter_quotas(client: ToolClient, types: list[str], names: list[str], add: dict[str, str],
                 delete: list[str]) -> None:
    """One AlterClientQuotas entry: SET ``add``, remove ``delete`` (which must be set now)."""
    found = describe_quotas(client, types, names)
    current = {k for k, _ in found[0][1]} if found else set()
    invalid = [k for k in delete if k not in current]
    if invalid:
        raise ToolError(f"Invalid config(s): {','.join(invalid)}")
    ops = []
    for key in java_set_order(list(add)):  # the order of Kafka's tool's map of them
        value = add[key]
        try:
            number = float(value)
        except ValueError:
            raise ToolError(f"Cannot parse quota configuration value for {key}: {value}") from None
        ops.append(A.OpData(key=key, value=number, remove=False))
    ops += [A.OpData(key=key, value=0.0, remove=True) for key in delete]
    entity = [A.EntityData(entity_type=QUOTA_TYPES[t], entity_name=n or None) for t, n in zip(types, names, strict=True)]
    conn = client.node(client.all_nodes()[0])
    resp = conn.send(A(entries=[A.EntryData(entity=entity, ops=ops)], validate_only=False))
    for e in resp.entries:
        check_error(e.error_code, "cannot alter client quotas", e.error_message)
