"""`shoal configs describe|alter`: kafka-configs.sh for topics, brokers and users' SCRAM credentials.

``describe`` prints as Kafka's tool: ``Dynamic configs for topic T are:`` (or
``All configs ...`` with ``--all``, ``Default configs for brokers in the
cluster are:`` for the cluster default), then ``  name=value sensitive=false
synonyms={SOURCE:name=value, ...}`` per config. Without ``--all`` only the
dynamic ones are listed: a topic's own configs, or a broker's dynamic configs.
``alter`` sends IncrementalAlterConfigs (SET for ``--add-config``, DELETE for
``--delete-config``) and prints ``Completed updating config for topic T.``.

Users (``--entity-type users``): ``--add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'`` and
``--delete-config SCRAM-SHA-512`` send AlterUserScramCredentials (the password salted and hashed here,
as Kafka's AdminClient does); describe sends DescribeUserScramCredentials and prints ``SCRAM credential
configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192``. Client quotas (users, clients, ips)
are quotas.py's; configs_cli.py sorts an --alter of users into the one or the other, as Kafka's tool does.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

from shoal.client.sasl_mechanisms import scram_salted_password
from shoal.protocol.generated.alter_user_scram_credentials_request import AlterUserScramCredentialsRequest
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_configs_request import DescribeConfigsRequest
from shoal.protocol.generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from shoal.protocol.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from shoal.tools.wire import BrokerConnection, ToolClient, ToolError, check_error

TOPIC, BROKER, GROUP = 2, 4, 32
GROUP_CONFIG_SOURCE = 8  # a group config override (DescribeConfigs' GROUP_CONFIG)
# the admin client's ConfigSource names, as kafka-configs prints them
SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG"}
ENTITY_TYPES = {"topics": TOPIC, "brokers": BROKER, "groups": GROUP}


@dataclass
class ConfigLine:
    name: str
    value: str | None
    source: int
    sensitive: bool
    synonyms: list[tuple[int, str, str | None]]

    def format(self) -> str:
        syn = ", ".join(f"{SOURCE_NAMES.get(s, s)}:{n}={v}" for s, n, v in self.synonyms)
        return f"  {self.name}={self.value} sensitive={str(self.sensitive).lower()} synonyms={{{syn}}}"


def parse_add_config(spec: str) -> dict[str, str]:
    """``k1=v1,k2=[a,b],k3=v3`` -> {k1: v1, k2: "a,b", k3: v3}, as kafka-configs (brackets hold lists)."""
    out: dict[str, str] = {}
    i, n = 0, len(spec)
    while i < n:
        eq = spec.find("=", i)
        if eq < 0:
            raise ToolError(f"Invalid config(s): {spec[i:]} (expected key=value)")
        key = spec[i:eq].strip()
        j = eq + 1
        if j < n and spec[j] == "[":
            end = spec.find("]", j)
            if end < 0:
                raise ToolError(f"Invalid config(s): unclosed '[' in {spec!r}")
            value, j = spec[j + 1:end], end + 1
        else:
            comma = spec.find(",", j)
            comma = n if comma < 0 else comma
            value, j = spec[j:comma], comma
        if not key:
            raise ToolError(f"Invalid config(s): {spec!r}")
        out[key] = value.strip()
        if j < n and spec[j] != ",":
            raise ToolError(f"Invalid config(s): {spec!r}")
        i = j + 1
    return out


def _conn(client: ToolClient, entity_type: int, name: str) -> BrokerConnection:
    if entity_type == BROKER and name:
        return client.node(int(name))
    return client.node(client.all_nodes()[0])


def check_entity(entity_type: int, name: str) -> None:
    if entity_type == BROKER and name:
        try:
            int(name)
        except ValueError:
            raise ToolError(f"The entity name for brokers must be a valid integer broker id, found: {name}") \
                from None


def describe(client: ToolClient, entity_type: int, name: str, describe_all: bool) -> list[ConfigLine]:
    """The configs of one resource ("" is the brokers' cluster default), filtered as kafka-configs."""
    check_entity(entity_type, name)
    conn = _conn(client, entity_type, name)
    v = conn.version(ApiKey.DESCRIBE_CONFIGS)
    resp = conn.send(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=entity_type, resource_name=name, configuration_keys=None)],
        include_synonyms=True, include_documentation=False), v)
    r = resp.results[0]
    check_error(r.error_code, f"cannot describe {name}", r.error_message)
    if entity_type == TOPIC:
        wanted = 1
    elif entity_type == GROUP:
        wanted = GROUP_CONFIG_SOURCE
    else:
        wanted = 3 if name == "" else 2
    out = []
    for c in sorted(r.configs, key=lambda c: c.name):
        source = c.config_source if v >= 1 else (5 if c.is_default else 0)
        if not describe_all and source != wanted:
            continue
        synonyms = [(s.source, s.name, s.value) for s in (c.synonyms or [])]
        out.append(ConfigLine(c.name, c.value, source, bool(c.is_sensitive), synonyms))
    return out


def format_describe(entity: str, name: str, lines: list[ConfigLine], describe_all: bool) -> str:
    if entity == "brokers" and name == "":
        head = "Default configs for brokers in the cluster are:"
    else:
        head = f"{'All' if describe_all else 'Dynamic'} configs for {entity[:-1]} {name} are:"
    return "\n".join([head, *(line.format() for line in lines)])


def alter(client: ToolClient, entity_type: int, name: str, add: dict[str, str], delete: list[str]) -> None:
    """IncrementalAlterConfigs: SET ``add``, DELETE ``delete`` (which must be set now, as Kafka checks)."""
    check_entity(entity_type, name)
    if delete:
        current = {c.name for c in describe(client, entity_type, name, describe_all=False)}
        invalid = [k for k in delete if k not in current]
        if invalid:
            raise ToolError(f"Invalid config(s): {','.join(invalid)}")
    cls = IncrementalAlterConfigsRequest
    configs = [cls.AlterableConfig(name=k, config_operation=0, value=v) for k, v in add.items()]
    configs += [cls.AlterableConfig(name=k, config_operation=1, value=None) for k in delete]
    conn = _conn(client, entity_type, name)
    resp = conn.send(cls(resources=[cls.AlterConfigsResource(resource_type=entity_type, resource_name=name,
                                                             configs=configs)], validate_only=False))
    r = resp.responses[0]
    check_error(r.error_code, f"cannot alter {name}", r.error_message)


def entities(client: ToolClient, entity_type: int) -> list[str]:
    """Every topic (internal ones too), or every broker id then the cluster default "", as kafka-configs."""
    if entity_type == TOPIC:
        return sorted(t.name for t in client.metadata(None).topics)
    if entity_type == GROUP:
        raise ToolError("an --entity-name is needed to describe groups")
    return [*(str(n) for n in client.all_nodes()), ""]


# ---------------------------------------------------------------- users: SCRAM credentials
SCRAM_MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
SCRAM_NAMES = {v: k for k, v in SCRAM_MECHANISMS.items()}
DEFAULT_SCRAM_ITERATIONS = 4096  # ConfigCommand's default, also the mechanisms' minimum
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


def scram_upsertion(user: str, mechanism: str, value: str) -> Any:
    """One upsertion of ``SCRAM-SHA-256=[iterations=8192,password=...]``: salted here, as AdminClient does."""
    m = _CREDENTIAL.fullmatch(value)
    if m is None:
        raise ToolError(f"Invalid credential property {mechanism}={value}")
    iterations = int(m[1]) if m[1] not in (None, "", "-1") else DEFAULT_SCRAM_ITERATIONS
    if iterations < DEFAULT_SCRAM_ITERATIONS:
        raise ToolError(f"Iterations {iterations} is less than the minimum {DEFAULT_SCRAM_ITERATIONS} required for "
                        f"{mechanism}")
    password = m[2]
    if not password:
        raise ToolError("Password must not be empty")
    # Kafka's salt: a random number in base 36, as ASCII bytes
    salt = _base36(int.from_bytes(secrets.token_bytes(17), "big") >> 6).encode("ascii")
    cls = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    return cls(name=user, mechanism=SCRAM_MECHANISMS[mechanism], iterations=iterations, salt=salt,
               salted_password=scram_salted_password(mechanism, password, salt, iterations))


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def alter_scram(client: ToolClient, user: str, add: dict[str, str], delete: list[str]) -> None:
    """AlterUserScramCredentials with every deletion and upsertion of ``user`` in one request, as Kafka's
    ConfigCommand sends them: a broker refuses two changes of one user in a request (DUPLICATE_RESOURCE,
    "A user credential cannot be altered twice in the same request"), and so does this tool then. The keys
    of ``add`` and ``delete`` are SCRAM mechanisms: configs_cli.py sends only those here (quotas.is_quota_alter
    has refused any other key)."""
    if not user:
        raise ToolError("The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials "
                        "using --bootstrap-server.")
    cls = AlterUserScramCredentialsRequest
    deletions = [cls.ScramCredentialDeletion(name=user, mechanism=SCRAM_MECHANISMS[m]) for m in delete]
    upsertions = [scram_upsertion(user, m, v) for m, v in add.items()]
    conn = client.node(client.all_nodes()[0])
    resp = conn.send(cls(deletions=deletions, upsertions=upsertions))
    for r in resp.results:
        check_error(r.error_code, f"cannot alter the SCRAM credentials of {r.user}", r.error_message)


def describe_scram(client: ToolClient, user: str | None) -> list[str]:
    """``SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192`` per user
    (every user without a name; users without credentials are left out, as Kafka's tool does)."""
    conn = client.node(client.all_nodes()[0])
    users = None if user is None else [DescribeUserScramCredentialsRequest.UserName(name=user)]
    resp = conn.send(DescribeUserScramCredentialsRequest(users=users))
    check_error(resp.error_code, "cannot describe SCRAM credentials", resp.error_message)
    lines = []
    for r in resp.results:
        if r.error_code:
            continue
        infos = ", ".join(f"{SCRAM_NAMES.get(i.mechanism, i.mechanism)}=iterations={i.iterations}"
                          for i in r.credential_infos)
        lines.append(f"SCRAM credential configs for user-principal '{r.user}' are {infos}")
    return lines
