"""The invariants of share groups (KIP-932), judged from the requests nodes handled.

- ``share-exclusive``: a record acquired by a member is not acquired again (by anyone) while its
  acquisition lock stands. The lock is judged to stand from the start of the request that
  acquired it until that start plus the lock duration the answer named, unless before that its
  holder acknowledged it (any type), its holder's share session on that node ended (a request of
  epoch 0 or -1, or the connection closed: the node releases what the member held), or a node
  crashed, the cluster restarted or a leadership moved (the new leader loads the partition's
  state, in which acquired records are available again, as in Kafka); and only on the node that
  took the lock (another node acquiring it leads the partition now, perhaps a restarted node
  taking its partitions back). Every doubt releases the
  lock early, so only an acquisition no release explains fails.
- ``share-accepted-redelivered``: a record whose ACCEPT was answered without error is never
  acquired again, across crashes and restarts: Kafka answers an acknowledgement once the share
  coordinator has written it.
- ``share-delivery-count``: an acquired record's delivery count is between 1 and the group's
  delivery count limit.

Records a lying fsync took with it (the main checker's ``truncated``) are not judged past the
log's recovered end: new records may take their offsets.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shoal.protocol.generated.api_keys import ApiKey

if TYPE_CHECKING:
    from shoal.sim.network import ServerConnection
    from shoal.sim.trace import Trace

Record = tuple[str, uuid.UUID, int, int]  # group, topic id, partition, offset
# Locks are kept in whole milliseconds (as Kafka's): one may run out up to a millisecond before the
# float time of its start plus its duration.
_MS = 0.001


@dataclass
class _Lock:
    member: str
    node: int
    since: float  # the start of the acquiring request (virtual seconds)
    seconds: float
    disruptions: int  # the checker's count of disruptions when it was taken


@dataclass
class ShareChecker:
    trace: Trace
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)  # filled by the run as topics are made
    truncated: dict[tuple[str, int], int] = field(default_factory=dict)  # the main checker's (lying disk)
    ghosts: set[int] = field(default_factory=set)  # tokens of duplicate deliveries (the network's)
    delivery_limit: int = 5
    members: dict[str, str] = field(default_factory=dict)  # client name -> member id
    locks: dict[Record, _Lock] = field(default_factory=dict)
    accepted: set[Record] = field(default_factory=set)
    acquisitions: int = 0
    disruptions: int = 0
    _started: dict[int, float] = field(default_factory=dict)  # token -> start of handling
    _accepting: dict[int, list[Record]] = field(default_factory=dict)  # token -> ACCEPTs it carries
    clock: Any = None  # () -> virtual seconds

    def disrupted(self, *_args: Any) -> None:
        """A node crashed, the cluster restarted or a leadership moved: share partitions reload."""
        self.disruptions += 1

    def connection_closed(self, server: ServerConnection) -> None:
        """A node's side of a connection closed: the share sessions it opened end there."""
        client = server.client
        member = self.members.get(client.client) if client is not None else None
        if member is not None:
            self._release_member(member, server.node_id)

    def _release_member(self, member: str, node: int) -> None:
        for record in [r for r, lock in self.locks.items() if lock.member == member and lock.node == node]:
            del self.locks[record]

    def observe(self, node_id: int, token: int, api_key: int, version: int, request: Any, response: Any,
                phase: str) -> None:
        if api_key not in (ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE):
            return
        if phase == "start":
            self._start(node_id, token, request)
        else:
            self._end(node_id, token, request, response)

    def _start(self, node_id: int, token: int, request: Any) -> None:
        """Before the node handles the request: what it releases (conservatively, before it does)."""
        group, member = request.group_id, request.member_id
        self._started[token] = self.clock()
        if request.share_session_epoch in (0, -1):
            self._release_member(member, node_id)  # the session is replaced or closed
        accepting: list[Record] = []
        for t in request.topics or []:
            for p in t.partitions or []:
                for batch in p.acknowledgement_batches or []:
                    types = list(batch.acknowledge_types)
                    for i, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
                        kind = types[0] if len(types) == 1 else types[i] if i < len(types) else 0
                        record = (group, t.topic_id, p.partition_index, offset)
                        lock = self.locks.get(record)
                        if kind and lock is not None and lock.member == member:
                            del self.locks[record]
                        if kind == 1:
                            accepting.append(record)
        if accepting:
            self._accepting[token] = accepting

    def _end(self, node_id: int, token: int, request: Any, response: Any) -> None:
        """The node answered: ACCEPTs answered without error, and what it acquired."""
        group, member = request.group_id, request.member_id
        started = self._started.pop(token, self.clock())
        accepting = self._accepting.pop(token, [])
        if response is None or response.error_code != 0:
            return
        for t in response.responses:
            for p in t.partitions:
                key = (t.topic_id, p.partition_index)
                if p.acknowledge_error_code == 0:
                    self.accepted.update(r for r in accepting if (r[1], r[2]) == key)
                for acquired in getattr(p, "acquired_records", None) or []:
                    for offset in range(acquired.first_offset, acquired.last_offset + 1):
                        self._acquired((group, t.topic_id, p.partition_index, offset), member, node_id, started,
                                       response.acquisition_lock_timeout_ms / 1000, acquired.delivery_count)
        if token in self.ghosts:  # a duplicate's connection closes once answered: what it took is released
            self._release_member(member, node_id)

    def _acquired(self, record: Record, member: str, node: int, started: float, lock_s: float, count: int) -> None:
        self.acquisitions += 1
        _group, topic_id, partition, offset = record
        name = self.topic_names.get(topic_id, str(topic_id))
        where = f"{name}-{partition}@{offset}"
        end = self.truncated.get((name, partition))
        if end is not None and offset >= end:
            self.accepted.discard(record)  # the log was cut back by a lying disk: a new record here
            self.locks.pop(record, None)
        if not 1 <= count <= self.delivery_limit:
            self.trace.violation("share-delivery-count", f"{where} delivered with count {count} "
                                                         f"(limit {self.delivery_limit})")
        if record in self.accepted:
            self.trace.violation("share-accepted-redelivered", f"{where} acquired by {member} again after "
                                                               "its ACCEPT was answered")
        now = self.clock()
        lock = self.locks.get(record)
        # judged on the node that took the lock only: another node leads now (a restarted node may take
        # its partitions back) and loaded the partition's state, where acquired records are available
        if lock is not None and lock.node == node and lock.disruptions == self.disruptions \
                and now < lock.since + lock.seconds - _MS:
            self.trace.violation("share-exclusive", f"{where} acquired by {member} on node {node} while "
                                                    f"{lock.member}'s lock from node {lock.node} stood "
                                                    f"(taken at {lock.since * 1000:.0f} ms for {lock.seconds:g} s)")
        self.locks[record] = _Lock(member, node, started, lock_s, self.disruptions)
