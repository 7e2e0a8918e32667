"""Configuration: Kafka's property names (as a dict) with Kafka's defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COMMON_DEFAULTS: dict[str, Any] = {
    "bootstrap.servers": "localhost:9092",
    "client.id": "shoal-python",
    "request.timeout.ms": 30000,
    "socket.connection.setup.timeout.ms": 10000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "retry.backoff.ms": 100,
    "metadata.max.age.ms": 300000,
    "connections.max.idle.ms": 540000,
    "client.rack": "",
    # Security, with Kafka's names and defaults (see security.py): TLS key and trust stores are
    # PEM only; no trust store means the system's CAs.
    "security.protocol": "PLAINTEXT",
    "sasl.mechanism": "GSSAPI",
    "sasl.jaas.config": None,
    "sasl.oauthbearer.token.endpoint.url": None,
    "ssl.protocol": "TLSv1.3",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.cipher.suites": None,
    "ssl.truststore.type": "JKS",
    "ssl.truststore.location": None,
    "ssl.truststore.password": None,
    "ssl.truststore.certificates": None,
    "ssl.keystore.type": "JKS",
    "ssl.keystore.location": None,
    "ssl.keystore.password": None,
    "ssl.keystore.key": None,
    "ssl.keystore.certificate.chain": None,
    "ssl.key.password": None,
    # shoal extension: {api_key: max_version} caps on top of ApiVersions negotiation.
    "api.version.caps": None,
}

PRODUCER_DEFAULTS: dict[str, Any] = {
    **COMMON_DEFAULTS,
    "acks": "all",
    "batch.size": 16384,
    "linger.ms": 5,
    "buffer.memory": 33554432,
    "compression.type": "none",
    "retries": 2147483647,
    "delivery.timeout.ms": 120000,
    "max.in.flight.requests.per.connection": 5,
    "max.request.size": 1048576,
    "max.block.ms": 60000,
    # None: on unless another setting rules it out (acks != all, retries = 0, more than 5 in flight),
    # as Kafka 3+ producers default.
    "enable.idempotence": None,
    "transactional.id": None,
    "transaction.timeout.ms": 60000,
    "key.serializer": None,
    "value.serializer": None,
    "partitioner": None,
}

CONSUMER_DEFAULTS: dict[str, Any] = {
    **COMMON_DEFAULTS,
    "group.id": None,
    "group.instance.id": None,
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5000,
    "auto.offset.reset": "latest",
    "max.poll.records": 500,
    "max.poll.interval.ms": 300000,
    "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000,
    "fetch.min.bytes": 1,
    "fetch.max.bytes": 52428800,
    "fetch.max.wait.ms": 500,
    "max.partition.fetch.bytes": 1048576,
    "isolation.level": "read_uncommitted",
    "partition.assignment.strategy": "range,cooperative-sticky",
    "check.crcs": True,
    "exclude.internal.topics": True,
    "allow.auto.create.topics": True,
    "key.deserializer": None,
    "value.deserializer": None,
    "default.api.timeout.ms": 60000,
    # "classic" (JoinGroup/SyncGroup/Heartbeat) or "consumer" (KIP-848: ConsumerGroupHeartbeat).
    "group.protocol": "classic",
    # The broker-side assignor a "consumer" protocol member asks for (None: the broker's default).
    "group.remote.assignor": None,
}

ADMIN_DEFAULTS: dict[str, Any] = {**COMMON_DEFAULTS, "default.api.timeout.ms": 60000}

_INT_KEYS = {
    k
    for d in (PRODUCER_DEFAULTS, CONSUMER_DEFAULTS)
    for k, v in d.items()
    if isinstance(v, int) and not isinstance(v, bool)
}
_BOOL_KEYS = {k for d in (PRODUCER_DEFAULTS, CONSUMER_DEFAULTS) for k, v in d.items() if isinstance(v, bool)} | {
    "enable.idempotence"}


def make_config(defaults: Mapping[str, Any], config: Mapping[str, Any] | None, **kwargs: Any) -> dict[str, Any]:
    """Merge user settings over ``defaults``.

    Keyword arguments may use underscores (``group_id=...``) for convenience; string
    values of numeric/boolean settings are converted as Kafka property files would.
    Security settings that cannot be used raise ``SecurityConfigError`` (a ValueError) here, as
    Kafka's client throws ConfigException when it is built.
    """
    out = dict(defaults)
    merged: dict[str, Any] = dict(config or {})
    for k, v in kwargs.items():
        merged[k.replace("_", ".")] = v
    for k, v in merged.items():
        if k in _INT_KEYS and isinstance(v, str):
            v = int(v)
        elif k in _BOOL_KEYS and isinstance(v, str):
            v = v.strip().lower() in ("true", "1", "yes")
        out[k] = v
    from .security import validate_security  # imported here: security imports the errors module

    validate_security(out)
    return out


def parse_bootstrap(servers: str | list[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` -> ``[("h1", 9092), ("h2", 9093)]``, a bare host on 9092; ValueError if malformed."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = port, "9092"
        try:
            if not host:
                raise ValueError
            out.append((host.strip("[]"), int(port)))
        except ValueError:
            raise ValueError(f"bad bootstrap server {item!r} (expected HOST:PORT)") from None
    return out
