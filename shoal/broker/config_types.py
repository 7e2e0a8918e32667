"""The type DescribeConfigs v3+ reports for each config (Kafka's ConfigDef types, KIP-569)."""

from __future__ import annotations

# DescribeConfigsResponse ConfigType codes
UNKNOWN, BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(10)

_TYPES: dict[str, int] = {
    # topic configs (Kafka's TopicConfig / LogConfig definitions)
    "cleanup.policy": LIST, "compression.type": STRING, "delete.retention.ms": LONG,
    "flush.messages": LONG, "flush.ms": LONG, "index.interval.bytes": INT, "max.message.bytes": INT,
    "message.timestamp.type": STRING, "min.compaction.lag.ms": LONG, "min.insync.replicas": INT,
    "retention.bytes": LONG, "retention.ms": LONG, "segment.bytes": INT, "segment.ms": LONG,
    "compression.gzip.level": INT, "compression.lz4.level": INT, "compression.zstd.level": INT,
    "file.delete.delay.ms": LONG, "follower.replication.throttled.replicas": LIST,
    "leader.replication.throttled.replicas": LIST, "local.retention.bytes": LONG, "local.retention.ms": LONG,
    "max.compaction.lag.ms": LONG, "message.downconversion.enable": BOOLEAN,
    "message.timestamp.after.max.ms": LONG, "message.timestamp.before.max.ms": LONG,
    "message.timestamp.difference.max.ms": LONG, "message.format.version": STRING,
    "min.cleanable.dirty.ratio": DOUBLE, "preallocate": BOOLEAN, "remote.storage.enable": BOOLEAN,
    "segment.index.bytes": INT, "segment.jitter.ms": LONG, "unclean.leader.election.enable": BOOLEAN,
    "remote.copy.lag.bytes": LONG, "remote.copy.lag.ms": LONG, "remote.log.copy.disable": BOOLEAN,
    "remote.log.delete.on.disable": BOOLEAN, "errors.deadletterqueue.group.enable": BOOLEAN,
    # broker configs (KafkaConfig and the server modules' definitions)
    "leader.replication.throttled.rate": LONG, "follower.replication.throttled.rate": LONG,
    "replica.alter.log.dirs.io.max.bytes.per.second": LONG,
    "listeners": LIST, "advertised.listeners": LIST, "node.id": INT, "broker.id": INT, "log.dirs": LIST,
    "log.dir": STRING, "num.partitions": INT, "default.replication.factor": INT,
    "auto.create.topics.enable": BOOLEAN, "delete.topic.enable": BOOLEAN, "log.segment.bytes": INT,
    "log.roll.ms": LONG, "log.roll.hours": INT, "log.retention.ms": LONG, "log.retention.minutes": INT,
    "log.retention.hours": INT, "log.retention.bytes": LONG, "log.retention.check.interval.ms": LONG,
    "log.flush.interval.messages": LONG, "log.flush.interval.ms": LONG, "log.flush.scheduler.interval.ms": LONG,
    "log.index.interval.bytes": INT, "log.cleanup.policy": LIST, "log.cleaner.enable": BOOLEAN,
    "log.cleaner.backoff.ms": LONG, "log.cleaner.delete.retention.ms": LONG,
    "log.cleaner.min.compaction.lag.ms": LONG, "log.cleaner.max.compaction.lag.ms": LONG,
    "log.cleaner.min.cleanable.ratio": DOUBLE, "log.message.timestamp.type": STRING, "message.max.bytes": INT,
    "log.message.timestamp.before.max.ms": LONG, "log.message.timestamp.after.max.ms": LONG,
    "log.message.timestamp.difference.max.ms": LONG, "log.message.format.version": STRING,
    "socket.request.max.bytes": INT, "fetch.max.bytes": INT, "queued.max.request.bytes": LONG,
    "connections.max.idle.ms": LONG, "max.connections": INT, "max.connections.per.ip": INT,
    "socket.listen.backlog.size": INT,
    "offsets.topic.num.partitions": INT, "offsets.topic.replication.factor": SHORT,
    "offsets.topic.segment.bytes": INT, "offsets.retention.minutes": INT,
    "offsets.retention.check.interval.ms": LONG, "offset.metadata.max.bytes": INT,
    "group.min.session.timeout.ms": INT, "group.max.session.timeout.ms": INT,
    "group.initial.rebalance.delay.ms": INT, "group.max.size": INT, "cluster.id": STRING,
    "group.consumer.heartbeat.interval.ms": INT, "group.consumer.min.heartbeat.interval.ms": INT,
    "group.consumer.max.heartbeat.interval.ms": INT, "group.consumer.session.timeout.ms": INT,
    "group.consumer.min.session.timeout.ms": INT, "group.consumer.max.session.timeout.ms": INT,
    "group.consumer.max.size": INT, "group.consumer.assignors": LIST, "group.consumer.migration.policy": STRING,
    "group.coordinator.rebalance.protocols": LIST,
    "transaction.state.log.num.partitions": INT, "transaction.state.log.replication.factor": SHORT,
    "transaction.state.log.segment.bytes": INT, "transaction.max.timeout.ms": INT,
    "share.coordinator.state.topic.num.partitions": INT, "share.coordinator.state.topic.replication.factor": SHORT,
    "share.coordinator.state.topic.min.isr": SHORT, "share.coordinator.state.topic.segment.bytes": INT,
    "transactional.id.expiration.ms": INT, "transaction.abort.timed.out.transaction.cleanup.interval.ms": INT,
    "transaction.remove.expired.transaction.cleanup.interval.ms": INT, "producer.id.expiration.ms": INT,
    "num.io.threads": INT, "num.network.threads": INT, "num.replica.fetchers": INT,
    "num.recovery.threads.per.data.dir": INT, "background.threads": INT, "log.cleaner.threads": INT,
    "log.cleaner.dedupe.buffer.size": LONG, "log.cleaner.io.buffer.load.factor": DOUBLE,
    "log.cleaner.io.buffer.size": INT, "log.cleaner.io.max.bytes.per.second": DOUBLE,
    "sasl.enabled.mechanisms": LIST, "sasl.mechanism.inter.broker.protocol": STRING,
    "sasl.kerberos.kinit.cmd": STRING, "sasl.kerberos.min.time.before.relogin": LONG,
    "sasl.kerberos.principal.to.local.rules": LIST, "sasl.kerberos.ticket.renew.jitter": DOUBLE,
    "sasl.kerberos.ticket.renew.window.factor": DOUBLE, "sasl.login.refresh.buffer.seconds": SHORT,
    "sasl.login.refresh.min.period.seconds": SHORT, "sasl.login.refresh.window.factor": DOUBLE,
    "sasl.login.refresh.window.jitter": DOUBLE,
    "log.segment.delete.delay.ms": LONG, "log.local.retention.bytes": LONG,
    "log.local.retention.ms": LONG, "log.preallocate": BOOLEAN, "log.remote.copy.lag.bytes": LONG,
    "log.remote.copy.lag.ms": LONG, "log.index.size.max.bytes": INT,
    "listener.security.protocol.map": STRING, "controller.listener.names": LIST,
    "connections.max.reauth.ms": LONG, "connection.failed.authentication.delay.ms": INT,
    "sasl.server.max.receive.size": INT, "ssl.protocol": STRING, "ssl.enabled.protocols": LIST,
    "ssl.cipher.suites": LIST, "ssl.client.auth": STRING, "ssl.keystore.type": STRING,
    "ssl.keystore.location": STRING, "ssl.keystore.password": PASSWORD, "ssl.key.password": PASSWORD,
    "ssl.keystore.key": PASSWORD, "ssl.keystore.certificate.chain": PASSWORD, "ssl.truststore.type": STRING,
    "ssl.truststore.location": STRING, "ssl.truststore.password": PASSWORD,
    "ssl.truststore.certificates": PASSWORD, "ssl.endpoint.identification.algorithm": STRING,
    "ssl.principal.mapping.rules": STRING,
    "authorizer.class.name": STRING, "sasl.jaas.config": PASSWORD,
    "sasl.oauthbearer.jwks.endpoint.url": STRING, "sasl.oauthbearer.expected.audience": LIST,
    "sasl.oauthbearer.expected.issuer": STRING, "sasl.oauthbearer.sub.claim.name": STRING,
    "sasl.oauthbearer.scope.claim.name": STRING, "sasl.oauthbearer.clock.skew.seconds": INT,
    "quota.window.num": INT, "quota.window.size.seconds": INT,
    # shoal's own
    "metrics.port": INT, "max.records.per.user.op": INT, "request.read.timeout.ms": LONG,
    "log.max.open.segments": INT,
}


def config_type(name: str) -> int:
    """The ConfigType of ``name``; a property shoal does not know is reported as a STRING.

    A per-listener or per-mechanism property (listener.name.<l>.[<mechanism>.]<key>) has its key's type."""
    if name.startswith("listener.name."):
        for i in range(len(name)):
            if name[i] == "." and name[i + 1:] in _TYPES:
                return _TYPES[name[i + 1:]]
    return _TYPES.get(name, STRING)


def is_sensitive(name: str) -> bool:
    """A secret: DescribeConfigs reports it with no value, as Kafka does for PASSWORD configs."""
    return config_type(name) == PASSWORD
