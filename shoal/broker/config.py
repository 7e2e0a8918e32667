"""Broker configuration: Kafka's property names, Kafka's defaults.

`shoal serve [FILE.properties] [--override KEY=VALUE ...]` reads the same
properties `kafka-server-start.sh` takes. Unknown keys are kept (and logged)
so a real Kafka `server.properties` loads unchanged.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

log = logging.getLogger(__name__)

# Kafka's defaults for the keys shoal reads. Values are strings, as in a
# properties file; typed accessors below convert them.
DEFAULTS: dict[str, str] = {
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "",
    "node.id": "0",
    "log.dirs": "./shoal-data",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "log.segment.bytes": "1073741824",
    "log.roll.ms": "",
    "log.roll.hours": "168",
    "log.retention.ms": "",
    "log.retention.minutes": "",
    "log.retention.hours": "168",
    "log.retention.bytes": "-1",
    "log.retention.check.interval.ms": "300000",
    "log.flush.interval.messages": "9223372036854775807",
    "log.flush.interval.ms": "",
    "log.flush.scheduler.interval.ms": "9223372036854775807",
    "log.index.interval.bytes": "4096",
    "log.cleanup.policy": "delete",
    "log.cleaner.enable": "true",
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.max.compaction.lag.ms": "9223372036854775807",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": "9223372036854775807",
    "log.message.timestamp.after.max.ms": "9223372036854775807",
    "log.message.timestamp.difference.max.ms": "9223372036854775807",
    "log.message.format.version": "3.0-IV1",
    "message.max.bytes": "1048588",
    "socket.request.max.bytes": "104857600",
    "fetch.max.bytes": "57671680",
    "min.insync.replicas": "1",
    # Kafka's default is -1 (no bound); a broker that shares a process with tests and laptops
    # bounds the request bytes it holds: reading pauses when they are spent.
    "queued.max.request.bytes": "536870912",
    "connections.max.idle.ms": "600000",
    "socket.listen.backlog.size": "50",
    "max.connections": "2147483647",
    "max.connections.per.ip": "2147483647",
    # Kafka's controller writes at most 10,000 records per request (fixed there; a property here)
    "max.records.per.user.op": "10000",
    # shoal: segments kept open at once in this process (others are reopened on use); empty:
    # an eighth of the open-file limit
    "log.max.open.segments": "",
    # shoal: Fetch response bytes being built or sent at once, broker-wide (responses are copied,
    # not sent with sendfile); a fetch gets what is left, its first batch always whole
    "fetch.memory.max.bytes": "33554432",
    # shoal: a request whose bytes stop arriving for this long closes its connection
    "request.read.timeout.ms": "60000",
    # client quotas (Kafka's QuotaConfig): a quota's rate is measured over this many samples of this many seconds
    "quota.window.num": "11",
    "quota.window.size.seconds": "1",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.segment.bytes": "104857600",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offset.metadata.max.bytes": "4096",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.initial.rebalance.delay.ms": "3000",
    "group.max.size": "2147483647",
    # KIP-848, the consumer group type (Kafka's GroupCoordinatorConfig names, defaults and bounds)
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "45000",
    "group.consumer.max.session.timeout.ms": "60000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000",
    "group.consumer.max.size": "2147483647",
    "group.consumer.assignors": "uniform,range",
    "cluster.id": "",
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.segment.bytes": "104857600",
    # KIP-932's share coordinator (Kafka's ShareCoordinatorConfig names and defaults)
    "share.coordinator.state.topic.num.partitions": "50",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "share.coordinator.state.topic.segment.bytes": "104857600",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    "producer.id.expiration.ms": "86400000",
    # shoal: the port of the Prometheus endpoint (/metrics, /health, /ready); empty: off
    "metrics.port": "",
    # security (broker/security/): listeners' protocols, TLS, SASL, re-authentication
    "listener.security.protocol.map": "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "controller.listener.names": "",
    "connections.max.reauth.ms": "0",
    "connection.failed.authentication.delay.ms": "100",
    "sasl.server.max.receive.size": "524288",
    "ssl.protocol": "TLSv1.3",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.cipher.suites": "",
    "ssl.client.auth": "none",
    "ssl.keystore.type": "JKS",
    "ssl.keystore.location": "",
    "ssl.keystore.password": "",
    "ssl.key.password": "",
    "ssl.keystore.key": "",
    "ssl.keystore.certificate.chain": "",
    "ssl.truststore.type": "JKS",
    "ssl.truststore.location": "",
    "ssl.truststore.password": "",
    "ssl.truststore.certificates": "",
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.principal.mapping.rules": "DEFAULT",
    "sasl.oauthbearer.jwks.endpoint.url": "",
    "sasl.oauthbearer.expected.audience": "",
    "sasl.oauthbearer.expected.issuer": "",
    "sasl.oauthbearer.sub.claim.name": "sub",
    "sasl.oauthbearer.scope.claim.name": "scope",
    "sasl.oauthbearer.clock.skew.seconds": "30",
    # ACLs: empty (Kafka's default) means no authorizer, every request allowed; the authorizer's
    # own settings (super.users, allow.everyone.if.no.acl.found) are not broker configs and are
    # read from the properties as given (security.authorizer)
    "authorizer.class.name": "",
}

# Configs whose Kafka default is the empty string, not null (DescribeConfigs reports "" for them).
EMPTY_STRING_DEFAULTS = frozenset({"authorizer.class.name", "ssl.cipher.suites", "sasl.oauthbearer.expected.audience"})

# The one authorizer Kafka 4 ships, and so the one class name shoal accepts.
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

# Kafka's dynamic broker configs that shoal keeps and reports but does not act on: thread pools
# (shoal has one event loop), the cleaner's tuning, SASL's Kerberos and login-refresh settings. Tools and
# test suites that change them (librdkafka's alters sasl.kerberos.min.time.before.relogin) work.
PASSIVE_DYNAMIC_BROKER_DEFAULTS: dict[str, str] = {
    "num.io.threads": "8", "num.network.threads": "3", "num.replica.fetchers": "1",
    "num.recovery.threads.per.data.dir": "2", "background.threads": "10",
    "log.cleaner.threads": "1", "log.cleaner.dedupe.buffer.size": "134217728",
    "log.cleaner.io.buffer.load.factor": "0.9", "log.cleaner.io.buffer.size": "524288",
    "log.cleaner.io.max.bytes.per.second": "1.7976931348623157E308",
    "sasl.enabled.mechanisms": "GSSAPI", "sasl.mechanism.inter.broker.protocol": "GSSAPI",
    "sasl.kerberos.kinit.cmd": "/usr/bin/kinit", "sasl.kerberos.min.time.before.relogin": "60000",
    "sasl.kerberos.principal.to.local.rules": "DEFAULT", "sasl.kerberos.ticket.renew.jitter": "0.05",
    "sasl.kerberos.ticket.renew.window.factor": "0.8", "sasl.login.refresh.buffer.seconds": "300",
    "sasl.login.refresh.min.period.seconds": "60", "sasl.login.refresh.window.factor": "0.8",
    "sasl.login.refresh.window.jitter": "0.05",
    # the broker-level defaults of the topic configs shoal keeps without acting on
    # (topic_configs.PASSIVE_TOPIC_SYNONYMS): recompression, preallocation, tiered storage, elections
    "compression.type": "producer", "compression.gzip.level": "-1", "compression.lz4.level": "9",
    "compression.zstd.level": "3", "log.segment.delete.delay.ms": "60000", "log.local.retention.bytes": "-2",
    "log.local.retention.ms": "-2", "log.preallocate": "false", "log.remote.copy.lag.bytes": "-1",
    "log.remote.copy.lag.ms": "0", "log.index.size.max.bytes": "10485760",
    "unclean.leader.election.enable": "false",
}
DEFAULTS.update(PASSIVE_DYNAMIC_BROKER_DEFAULTS)

_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$")


class ConfigError(ValueError):
    """A property has a value Kafka would refuse."""


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type: what a Describe/AlterConfigs resource names."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    """Where a described config's value comes from (Kafka's DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class AlterConfigOpType(IntEnum):
    """An IncrementalAlterConfigs operation (Kafka's AlterConfigOp.OpType)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text (the subset Kafka's files use)."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line = pending + line
        pending = ""
        m = re.match(r"^((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", line)
        if m:
            props[m.group(1).replace("\\", "")] = m.group(2)
        else:
            props[line] = ""
    return props


def parse_listener(spec: str) -> Listener:
    m = _LISTENER.match(spec.strip())
    if not m:
        raise ConfigError(f"listeners: cannot parse {spec!r} (expected NAME://HOST:PORT)")
    host = m.group("host").strip("[]") or "0.0.0.0"
    return Listener(m.group("name"), host, int(m.group("port")))


class BrokerConfig:
    """Typed view over the broker's properties."""

    def __init__(self, props: dict[str, str] | None = None) -> None:
        self.props: dict[str, str] = dict(DEFAULTS)
        # The keys given in the file or on the command line: Kafka reports those as
        # STATIC_BROKER_CONFIG even when the value equals the default.
        self.explicit: frozenset[str] = frozenset()
        for key, value in (props or {}).items():
            if key == "log.dir":  # Kafka's singular form
                key = "log.dirs"
            if key == "broker.id":
                key = "node.id"
            self.props[key] = value
            self.explicit |= {key}
        # Dynamic broker configs (IncrementalAlterConfigs / AlterConfigs), over the static ones:
        # the cluster-wide default (resource name "") and those set for a node.
        self.dynamic_default: dict[str, str] = {}
        self.dynamic_node: dict[str, str] = {}
        self._validate()

    @classmethod
    def load(cls, path: str | Path | None, overrides: list[str] | None = None) -> BrokerConfig:
        props: dict[str, str] = {}
        if path is not None:
            props.update(parse_properties(Path(path).read_text()))
        for item in overrides or []:
            if "=" not in item:
                raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
            key, value = item.split("=", 1)
            props[key.strip()] = value.strip()
        return cls(props)

    # -- typed accessors ---------------------------------------------------
    def get(self, key: str) -> str:
        if key in self.dynamic_node:
            return self.dynamic_node[key]
        if key in self.dynamic_default:
            return self.dynamic_default[key]
        return self.props.get(key, "")

    def with_dynamic(self, default: dict[str, str], node: dict[str, str]) -> BrokerConfig:
        """A copy with these dynamic layers (validated as the static properties are)."""
        copy = BrokerConfig.__new__(BrokerConfig)
        copy.props = self.props
        copy.explicit = self.explicit
        copy.set_dynamic(default, node)
        copy._validate()
        return copy

    def set_dynamic(self, default: dict[str, str], node: dict[str, str]) -> None:
        self.dynamic_default = dict(default)
        self.dynamic_node = dict(node)

    def get_int(self, key: str) -> int:
        value = self.get(key)
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{key}: {value!r} is not an integer") from None

    def get_bool(self, key: str) -> bool:
        value = self.get(key).strip().lower()
        if value not in ("true", "false"):
            raise ConfigError(f"{key}: {value!r} is not true or false")
        return value == "true"

    def get_optional_int(self, key: str) -> int | None:
        return self.get_int(key) if self.get(key).strip() else None

    @property
    def listeners(self) -> list[Listener]:
        return [parse_listener(s) for s in self.get("listeners").split(",") if s.strip()]

    @property
    def advertised_listeners(self) -> list[Listener]:
        spec = self.get("advertised.listeners")
        if not spec.strip():
            return self.listeners
        return [parse_listener(s) for s in spec.split(",") if s.strip()]

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(p.strip()) for p in self.get("log.dirs").split(",") if p.strip()]

    @property
    def retention_ms(self) -> int:
        for key, scale in (("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                           ("log.retention.hours", 3_600_000)):
            value = self.get_optional_int(key)
            if value is not None:
                return value if value < 0 else value * scale
        raise ConfigError("log.retention.hours is empty")

    @property
    def segment_ms(self) -> int:
        value = self.get_optional_int("log.roll.ms")
        if value is not None:
            return value
        return self.get_int("log.roll.hours") * 3_600_000

    def _validate(self) -> None:
        self.listeners  # noqa: B018 - parse to validate
        for key in ("num.partitions", "message.max.bytes", "socket.request.max.bytes", "fetch.max.bytes",
                    "offsets.topic.num.partitions", "log.segment.bytes", "transaction.state.log.num.partitions",
                    "transaction.max.timeout.ms", "share.coordinator.state.topic.num.partitions"):
            if self.get_int(key) <= 0:
                raise ConfigError(f"{key} must be positive, got {self.get(key)}")
        for key in ("quota.window.num", "quota.window.size.seconds"):  # Kafka: atLeast(1)
            if self.get_int(key) < 1:
                raise ConfigError(f"{key} must be at least 1, got {self.get(key)}")
        self.get_bool("auto.create.topics.enable")
        self.retention_ms  # noqa: B018
        self.segment_ms  # noqa: B018
        authorizer = self.get("authorizer.class.name").strip()
        if authorizer not in ("", STANDARD_AUTHORIZER):
            raise ConfigError(f"authorizer.class.name: {authorizer!r} is not supported; shoal's ACLs are "
                              f"Kafka's {STANDARD_AUTHORIZER} (leave it empty for no authorizer)")
        known = set(DEFAULTS) | {"log.dir", "broker.id"}
        for key in self.props:
            if key not in known:
                log.debug("property %s is not used by shoal", key)

