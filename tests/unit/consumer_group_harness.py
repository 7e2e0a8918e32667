"""A fake-clock harness for the consumer group type (KIP-848) on GroupCoordinatorShard.

The server-side assignors come from `shoal.assignors.server` when it has them; otherwise (and for
tests that need a fixed layout) a tiny test-only assignor spreads each topic's partitions over its
subscribers in member-id order.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping
from typing import Any

from shoal.assignors.server import GroupSpec, TopicSpec
from shoal.coordinator.group.consumer.group import ConsumerGroup
from shoal.coordinator.group.consumer.target import resolve_assignors
from shoal.coordinator.group.consumer.topics import StaticTopics, TopicMeta
from shoal.coordinator.group.shard import GroupCoordinatorShard
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.consumer_group_describe_request import ConsumerGroupDescribeRequest
from shoal.protocol.generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from tests.unit.test_group_harness import Harness

CGHB, CGD = ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE
TOPIC_IDS = {name: uuid.UUID(int=i + 1) for i, name in enumerate(["t", "u", "v", "w"])}


class SpreadAssignor:
    """Test-only: partition p of a topic goes to its (p mod n)-th subscriber in member-id order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0

    def assign(self, group: GroupSpec, topics: Mapping[uuid.UUID, TopicSpec]) -> dict[str, Any]:
        self.calls += 1
        out: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in group.members}
        for topic_id, spec in topics.items():
            subscribers = sorted(m for m, s in group.members.items() if topic_id in s.subscribed_topic_ids)
            for p in range(spec.num_partitions):
                if subscribers:
                    owner = out[subscribers[p % len(subscribers)]]
                    owner[topic_id] = owner.get(topic_id, frozenset()) | {p}
        return out


def real_assignors() -> dict[str, Any]:
    return resolve_assignors(["uniform", "range"])


class CGHarness(Harness):
    """The classic harness's shard, with topics and assignors for consumer groups."""

    def __init__(self, topics: dict[str, int] | None = None, assignors: dict[str, Any] | None = None,
                 **config: Any) -> None:
        super().__init__(**config)
        self.topics = StaticTopics()
        for name, n in (topics if topics is not None else {"t": 6}).items():
            self.set_topic(name, n)
        if assignors is None:
            assignors = {"uniform": SpreadAssignor("uniform"), "range": SpreadAssignor("range")}
        self.assignors = assignors
        ids = itertools.count(1)
        self.shard = GroupCoordinatorShard(0, self.config, member_id_suffix=lambda: f"m{next(ids)}",
                                           topics=self.topics, assignors=assignors)

    def set_topic(self, name: str, partitions: int) -> None:
        topic_id = TOPIC_IDS.get(name) or uuid.uuid5(uuid.NAMESPACE_DNS, name)
        self.topics.put(TopicMeta(topic_id=topic_id, name=name, num_partitions=partitions))

    def cgroup(self, gid: str = "g") -> ConsumerGroup:
        group = self.shard.groups.get(gid)
        assert isinstance(group, ConsumerGroup), group
        return group

    def hb(self, member_id: str = "", epoch: int = 0, *, gid: str = "g", topics: list[str] | None = None,
           owned: dict[str, set[int]] | dict[uuid.UUID, set[int]] | None = None, instance: str | None = None,
           rack: str | None = None, rebalance: int = -1, assignor: str | None = None, regex: str | None = None,
           version: int = 1, client_id: str = "c") -> Any:
        """Send one ConsumerGroupHeartbeat; `owned` keys are topic names or ids."""
        tps = None
        if owned is not None:
            tps = [ConsumerGroupHeartbeatRequest.TopicPartitions(
                topic_id=TOPIC_IDS[t] if isinstance(t, str) else t, partitions=sorted(ps)) for t, ps in owned.items()]
        req = ConsumerGroupHeartbeatRequest(
            group_id=gid, member_id=member_id, member_epoch=epoch, instance_id=instance, rack_id=rack,
            rebalance_timeout_ms=rebalance, subscribed_topic_names=topics, subscribed_topic_regex=regex,
            server_assignor=assignor, topic_partitions=tps)
        return self.resp(self.send(CGHB, version, req, client_id))

    def cg_join(self, member_id: str, topics: list[str] | None = None, **kw: Any) -> Any:
        kw.setdefault("rebalance", 30000)
        return self.hb(member_id, 0, topics=topics or ["t"], owned={}, **kw)

    def describe_cg(self, *gids: str, ops: bool = False) -> Any:
        req = ConsumerGroupDescribeRequest(group_ids=list(gids), include_authorized_operations=ops)
        return self.resp(self.send(CGD, 0, req))


class Consumer:
    """A well-behaved KIP-848 client: adopts each assignment it gets, revoking at once."""

    def __init__(self, h: CGHarness, member_id: str, topics: list[str] | None = None,
                 instance: str | None = None, rebalance: int = 30000) -> None:
        self.h, self.member_id, self.topics, self.instance, self.rebalance = h, member_id, topics or ["t"], instance, rebalance
        self.epoch = 0
        self.owned: dict[uuid.UUID, set[int]] = {}
        self.last: Any = None

    def _apply(self, resp: Any) -> Any:
        self.last = resp
        if resp.error_code == 0:
            self.epoch = resp.member_epoch
            if resp.assignment is not None:
                self.owned = {tp.topic_id: set(tp.partitions) for tp in resp.assignment.topic_partitions}
        return resp

    def join(self) -> Any:
        self.owned = {}
        return self._apply(self.h.cg_join(self.member_id, self.topics, instance=self.instance, rebalance=self.rebalance))

    def beat(self) -> Any:
        return self._apply(self.h.hb(self.member_id, self.epoch, owned=self.owned, instance=self.instance))

    def leave(self, epoch: int = -1) -> Any:
        return self.h.hb(self.member_id, epoch, instance=self.instance)

    def partitions(self, topic: str = "t") -> set[int]:
        return set(self.owned.get(TOPIC_IDS[topic], set()))


def converge(consumers: list[Consumer], rounds: int = 10) -> None:
    """Heartbeat every consumer until the group is Stable (bounded), checking exclusivity each step."""
    h = consumers[0].h
    for _ in range(rounds):
        for c in consumers:
            c.beat()
            assert_exclusive(h.cgroup())
        if h.cgroup().state_name == "Stable":
            return
    raise AssertionError(f"group did not converge: {h.cgroup().state_name}")


def assert_exclusive(group: ConsumerGroup) -> None:
    """No partition is assigned to (or still owned by) two members at once."""
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for m in group.members.values():
        for parts in (m.assigned, m.pending_revocation):
            for topic_id, ps in parts.items():
                for p in ps:
                    assert (topic_id, p) not in seen, f"{topic_id}-{p} owned by {seen[(topic_id, p)]} and {m.member_id}"
                    seen[(topic_id, p)] = m.member_id


def snapshot(shard: GroupCoordinatorShard) -> dict[str, Any]:
    """Everything a consumer group holds, comparable across shards."""
    out = {}
    for gid, g in shard.groups.items():
        if isinstance(g, ConsumerGroup):
            out[gid] = (g.group_epoch, g.assignment_epoch, g.state_name, dict(g.members), dict(g.static_members),
                        dict(g.target), dict(g.subscription_metadata), dict(g.partition_epochs))
    return out


def replayed(h: CGHarness) -> GroupCoordinatorShard:
    """A fresh shard that replayed every record the harness's shard wrote."""
    fresh = GroupCoordinatorShard(0, h.config, topics=h.topics, assignors=h.assignors)
    for key, value in h.records:
        fresh.replay(key, value)
    return fresh
