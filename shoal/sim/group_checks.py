"""Invariants of classic consumer groups, judged from what the coordinators answered.

- ``group-exclusive``: in one generation of a group, no partition is given to two members.
- ``committed-offset-monotonic``: offsets members commit (generation >= 0) to a partition never
  go back: each new owner starts from what the last one committed. (A duplicate delivery of an
  old commit may legitimately set an older value, as a stale request would in Kafka: that one
  is excused, and what follows is judged from the lower of it and what was committed before.)
- ``generation-fence``: an OffsetCommit from a member (generation >= 0) is refused once a newer
  generation is stored, and always from a member that is not in its generation: a zombie (a
  member that paused past its session) must not commit over the partition's new owner.

A generation counts as stored once a member's SyncGroup succeeded in it (the coordinator writes
the group with its assignment before answering SyncGroup). A generation only formed (JoinGroup
answered) may legitimately vanish: if the coordinator moves before the SyncGroup, the new one
loads the generation before it, exactly as Kafka's classic coordinator does. Members of a
generation are learned from its leader's JoinGroup answer. A commit is judged against what was
stored before it reached the coordinator, so the order in which answers are reported cannot
fake a failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shoal.protocol.generated.api_keys import ApiKey
from shoal.sim.groups import assigned_partitions

if TYPE_CHECKING:
    from shoal.sim.trace import Trace


@dataclass
class _Generation:
    generation: int
    members: set[str] = field(default_factory=set)
    stored_at: int | None = None  # when a SyncGroup in it first succeeded


@dataclass
class GroupChecker:
    trace: Trace
    ghosts: set[int] = field(default_factory=set)  # tokens of duplicate deliveries (the network's)
    _highest: dict[tuple[str, str, int], int] = field(default_factory=dict)
    _clock: int = 0
    _generations: dict[str, list[_Generation]] = field(default_factory=dict)
    _owners: dict[tuple[str, int], dict[tuple[str, int], str]] = field(default_factory=dict)
    _commit_start: dict[int, int] = field(default_factory=dict)
    generations_seen: int = 0

    def observe(self, node_id: int, token: int, api_key: int, version: int, request: Any, response: Any,
                phase: str) -> None:
        self._clock += 1
        if api_key == ApiKey.OFFSET_COMMIT:
            if phase == "start":
                self._commit_start[token] = self._clock
            else:
                start = self._commit_start.pop(token, self._clock)
                if self._committed(request, response, start):
                    self._monotonic(request, stale=token in self.ghosts)
        if api_key not in (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP):
            return
        if phase != "end" or response is None or response.error_code != 0:
            return
        if api_key == ApiKey.JOIN_GROUP:
            self._joined(request.group_id, response)
        else:
            self._synced(request, response)

    def _generation(self, group: str, generation: int) -> _Generation:
        gens = self._generations.setdefault(group, [])
        for g in gens:
            if g.generation == generation:
                return g
        g = _Generation(generation)
        gens.append(g)
        self.generations_seen += 1
        return g

    def _joined(self, group: str, response: Any) -> None:
        g = self._generation(group, response.generation_id)
        g.members.add(response.member_id)
        g.members.update(m.member_id for m in response.members)

    def _synced(self, request: Any, response: Any) -> None:
        g = self._generation(request.group_id, request.generation_id)
        if g.stored_at is None:
            g.stored_at = self._clock
        owners = self._owners.setdefault((request.group_id, request.generation_id), {})
        for tp in assigned_partitions(response.assignment):
            other = owners.setdefault(tp, request.member_id)
            if other != request.member_id:
                self.trace.violation("group-exclusive", f"group {request.group_id} generation "
                                                        f"{request.generation_id}: {tp} given to {other} "
                                                        f"and {request.member_id}")

    def _monotonic(self, request: Any, stale: bool) -> None:
        for t in request.topics:
            for p in t.partitions:
                key = (request.group_id, t.name, p.partition_index)
                before = self._highest.get(key, -1)
                if stale:  # a late copy: if it set the offset back, owners after it start from there;
                    # if it set it forward, the owner never saw that value and goes on from its own (seed 2907)
                    self._highest[key] = min(before, p.committed_offset)
                elif p.committed_offset < before:
                    self.trace.violation("committed-offset-monotonic", f"group {key[0]} {key[1]}-{key[2]}: "
                                                                       f"{request.member_id} committed "
                                                                       f"{p.committed_offset} after {before}")
                else:
                    self._highest[key] = p.committed_offset

    def _committed(self, request: Any, response: Any, start: int) -> bool:
        """Check an accepted member commit against the generations; True if it was one."""
        generation = request.generation_id_or_member_epoch
        if response is None or generation < 0:
            return False
        accepted = response.topics and all(p.error_code == 0 for t in response.topics for p in t.partitions)
        if not accepted:
            return False
        gens = self._generations.get(request.group_id, [])
        stored = [g.generation for g in gens if g.stored_at is not None and g.stored_at < start]
        if stored and generation < max(stored):
            self.trace.violation("generation-fence", f"group {request.group_id}: commit from "
                                                     f"{request.member_id} with generation {generation} "
                                                     f"accepted after generation {max(stored)} was stored")
            return True
        g = next((g for g in gens if g.generation == generation), None)
        if g is not None and g.members and request.member_id not in g.members:
            self.trace.violation("generation-fence", f"group {request.group_id}: commit from "
                                                     f"{request.member_id}, not a member of generation "
                                                     f"{generation}, accepted")
        return True
