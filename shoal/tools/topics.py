"""`shoal topics create|list|describe|delete|alter`: kafka-topics.sh over the wire.

Output as Kafka's tool prints it: ``Created topic T.``; one name per line for
``list``; for ``describe`` a topic line (``Topic: T<TAB>TopicId: ...<TAB>
PartitionCount: N<TAB>ReplicationFactor: R<TAB>Configs: k=v,...``, the configs
whose source is not the default) and a line per partition (``<TAB>Topic:
T<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1<TAB>Isr: 1<TAB>Elr: N/A<TAB>
LastKnownElr: N/A``, ELR being unknown without DescribeTopicPartitions). A
``--topic`` argument is a regular expression matched against whole names
(commas separate alternatives), as Kafka's include lists.
"""

from __future__ import annotations

import base64
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.create_partitions_request import CreatePartitionsRequest
from shoal.protocol.generated.create_topics_request import CreateTopicsRequest
from shoal.protocol.generated.delete_topics_request import DeleteTopicsRequest
from shoal.protocol.generated.describe_configs_request import DescribeConfigsRequest
from shoal.tools.wire import ToolClient, ToolError, check_error

SOURCE_DEFAULT = 5
TOPIC_RESOURCE = 2


@dataclass
class PartitionState:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]


@dataclass
class TopicState:
    name: str
    topic_id: uuid.UUID | None
    internal: bool
    partitions: list[PartitionState] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)  # not at their default
    min_isr: int = 1


def include_pattern(spec: str) -> re.Pattern[str]:
    """Kafka's include list: a regular expression (commas for alternatives), matching whole names."""
    text = spec.strip().strip("'\"").replace(",", "|")
    try:
        return re.compile(text)
    except re.error as e:
        raise ToolError(f"invalid topic pattern {spec!r}: {e}") from None


def topic_names(client: ToolClient, spec: str | None, exclude_internal: bool) -> list[str]:
    """Sorted topic names matching ``spec`` (all when None)."""
    md = client.metadata(None)
    pattern = include_pattern(spec) if spec else None
    out = []
    for t in md.topics:
        internal = bool(getattr(t, "is_internal", False)) or t.name.startswith("__")
        if exclude_internal and internal:
            continue
        if pattern is None or pattern.fullmatch(t.name):
            out.append(t.name)
    return sorted(out)


def ensure_exists(names: list[str], spec: str | None, required: bool) -> None:
    if spec and not names and required:
        raise ToolError(f"Topic '{spec}' does not exist as expected")


def _controller(client: ToolClient) -> Any:
    md = client.metadata(None)
    node = md.controller_id if getattr(md, "controller_id", -1) >= 0 else min(client.brokers)
    return client.node(node)


def parse_configs(items: list[str]) -> dict[str, str]:
    """``--config k=v`` (repeatable) -> {k: v}."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"Invalid topic config: all configs to be added must be in the format \"key=val\", "
                            f"got {item!r}")
        out[key.strip()] = value.strip()
    return out


def parse_replica_assignment(spec: str) -> list[list[int]]:
    """``0:1,1:2`` -> [[0, 1], [1, 2]] (partitions by comma, replicas by colon), as kafka-topics."""
    out = []
    for part in spec.split(","):
        try:
            replicas = [int(r) for r in part.split(":")]
        except ValueError:
            raise ToolError(f"invalid --replica-assignment {spec!r}") from None
        if len(set(replicas)) != len(replicas):
            raise ToolError(f"Partition replica lists may not contain duplicate entries: {part}")
        out.append(replicas)
    return out


def create_topic(client: ToolClient, name: str, *, partitions: int | None, replication_factor: int | None,
                 configs: dict[str, str], assignment: list[list[int]] | None, if_not_exists: bool) -> bool:
    """CreateTopics; False when it exists and ``if_not_exists``. ToolError with the broker's message."""
    if replication_factor is not None and not 1 <= replication_factor <= 32767:
        raise ToolError("The replication factor must be between 1 and 32767 inclusive")
    if partitions is not None and partitions < 1:
        raise ToolError("The partitions must be greater than 0")
    if assignment is not None and (partitions is not None or replication_factor is not None):
        raise ToolError("Option \"[replica-assignment]\" can't be used with option \"[partitions]\" or "
                        "\"[replication-factor]\"")
    cls = CreateTopicsRequest
    topic = cls.CreatableTopic(
        name=name, num_partitions=-1 if partitions is None else partitions,
        replication_factor=-1 if replication_factor is None else replication_factor,
        assignments=[cls.CreatableReplicaAssignment(partition_index=i, broker_ids=r)
                     for i, r in enumerate(assignment or [])],
        configs=[cls.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
    conn = _controller(client)
    v = conn.version(ApiKey.CREATE_TOPICS)
    if v < 4 and (partitions is None or replication_factor is None) and assignment is None:
        raise ToolError("this broker needs --partitions and --replication-factor (CreateTopics < v4)")
    resp = conn.send(cls(topics=[topic], timeout_ms=30000, validate_only=False), v)
    r = resp.topics[0]
    if r.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and if_not_exists:
        return False
    check_error(r.error_code, f"cannot create topic {name}", getattr(r, "error_message", None))
    return True


def delete_topics(client: ToolClient, names: list[str]) -> None:
    conn = _controller(client)
    v = conn.version(ApiKey.DELETE_TOPICS, 5)  # names, not topic ids
    resp = conn.send(DeleteTopicsRequest(topic_names=names, timeout_ms=30000), v)
    for r in resp.responses:
        check_error(r.error_code, f"cannot delete topic {r.name}", getattr(r, "error_message", None))


def add_partitions(client: ToolClient, names: list[str], count: int,
                   assignment: list[list[int]] | None) -> None:
    """CreatePartitions up to ``count``; with an assignment, its entries past the current count."""
    md = {t.name: t for t in client.metadata(None).topics}
    cls = CreatePartitionsRequest
    topics = []
    for name in names:
        extra = None
        if assignment is not None:
            current = len(md[name].partitions) if name in md else 0
            extra = [cls.CreatePartitionsAssignment(broker_ids=r) for r in assignment[current:]]
        topics.append(cls.CreatePartitionsTopic(name=name, count=count, assignments=extra))
    resp = _controller(client).send(cls(topics=topics, timeout_ms=30000, validate_only=False))
    for r in resp.results:
        check_error(r.error_code, f"cannot add partitions to {r.name}", r.error_message)


def describe_topics(client: ToolClient, names: list[str]) -> list[TopicState]:
    md = client.metadata(None)
    by_name = {t.name: t for t in md.topics}
    out = []
    for name in names:
        t = by_name.get(name)
        if t is None:
            continue
        check_error(t.error_code, f"cannot describe topic {name}")
        tid = getattr(t, "topic_id", None)
        state = TopicState(name, tid if tid and tid != uuid.UUID(int=0) else None,
                           bool(getattr(t, "is_internal", False)))
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            state.partitions.append(PartitionState(p.partition_index, p.leader_id, list(p.replica_nodes),
                                                   list(p.isr_nodes)))
        out.append(state)
    if out:
        _fill_configs(client, out)
    return out


def _fill_configs(client: ToolClient, states: list[TopicState]) -> None:
    conn = client.node(min(client.brokers))
    v = conn.version(ApiKey.DESCRIBE_CONFIGS)
    resp = conn.send(DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=s.name,
                                                       configuration_keys=None) for s in states],
        include_synonyms=False, include_documentation=False), v)
    by_name = {s.name: s for s in states}
    for r in resp.results:
        s = by_name.get(r.resource_name)
        if s is None or r.error_code:
            continue
        for c in r.configs:
            not_default = (c.config_source != SOURCE_DEFAULT) if v >= 1 else not c.is_default
            if not_default and c.value is not None:
                s.configs[c.name] = c.value
            if c.name == "min.insync.replicas" and c.value and c.value.isdigit():
                s.min_isr = int(c.value)


@dataclass
class DescribeFilter:
    under_replicated: bool = False
    unavailable: bool = False
    under_min_isr: bool = False
    at_min_isr: bool = False
    with_overrides: bool = False

    @property
    def any_partition_filter(self) -> bool:
        return self.under_replicated or self.unavailable or self.under_min_isr or self.at_min_isr


def format_description(states: list[TopicState], live: set[int], f: DescribeFilter | None = None) -> list[str]:
    """kafka-topics --describe lines."""
    f = f or DescribeFilter()
    lines = []
    for s in states:
        if not f.any_partition_filter and (not f.with_overrides or s.configs):
            rf = len(s.partitions[0].replicas) if s.partitions else 0
            head = f"Topic: {s.name}"
            if s.topic_id is not None:
                head += f"\tTopicId: {_kafka_uuid(s.topic_id)}"
            head += (f"\tPartitionCount: {len(s.partitions)}\tReplicationFactor: {rf}"
                     f"\tConfigs: {','.join(f'{k}={v}' for k, v in s.configs.items())}")
            lines.append(head)
        if f.with_overrides:
            continue
        for p in s.partitions:
            has_leader = p.leader >= 0
            show = not f.any_partition_filter or (
                (f.under_replicated and len(p.replicas) - len(p.isr) > 0)
                or (f.unavailable and (not has_leader or p.leader not in live))
                or (f.under_min_isr and (not has_leader or len(p.isr) < s.min_isr))
                or (f.at_min_isr and len(p.isr) == s.min_isr))
            if show:
                lines.append(f"\tTopic: {s.name}\tPartition: {p.partition}\t"
                             f"Leader: {p.leader if has_leader else 'none'}\t"
                             f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\t"
                             "Elr: N/A\tLastKnownElr: N/A")
    return lines


def _kafka_uuid(u: uuid.UUID) -> str:
    """Kafka prints topic ids as url-safe base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")
