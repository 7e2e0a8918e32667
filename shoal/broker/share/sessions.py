"""Share sessions (KIP-932): which partitions a share consumer fetches, and its session epoch.

A share session belongs to one member of one share group, `(group id, member id)`. ShareFetch
with epoch 0 opens it (with the partitions the request names), later requests carry the next
epoch (1, 2, ... wrapping to 1 after 2^31 - 1) and add partitions (`topics`) or drop them
(`forgotten_topics_data`); epoch -1 (the final request) closes it. A session also ends when the
connection that opened it closes. Whoever owns the session is told when it ends, to release the
records the member still holds.

Pure: no clock, no IO.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from shoal.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

SessionKey = tuple[str, str]  # (group id, member id)
TopicIdPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka wraps back to 1, never to 0 or negatives)."""
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


@dataclass
class ShareSession:
    """One member's share session: its partitions (in the order they were added) and the epoch
    its next request must carry."""

    group_id: str
    member_id: str
    connection: object | None
    epoch: int = 1
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)

    @property
    def key(self) -> SessionKey:
        return self.group_id, self.member_id

    def update(self, added: Iterable[TopicIdPartition], forgotten: Iterable[TopicIdPartition]) -> None:
        for tp in forgotten:
            self.partitions.pop(tp, None)
        for tp in added:
            self.partitions.setdefault(tp, None)


class ShareSessionCache:
    """Every open share session of the broker, by (group id, member id) and by connection."""

    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[SessionKey, ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str, connection: object | None,
             partitions: Iterable[TopicIdPartition]) -> tuple[ShareSession | None, ShareSession | None, ErrorCode]:
        """Epoch 0: a new session for the member, replacing the one it had (returned second, so
        its records can be released); SHARE_SESSION_LIMIT_REACHED when the cache is full."""
        old = self._sessions.pop((group_id, member_id), None)
        if len(self._sessions) >= self.max_sessions:
            if old is not None:
                self._sessions[old.key] = old
            return None, None, ErrorCode.SHARE_SESSION_LIMIT_REACHED
        session = ShareSession(group_id, member_id, connection)
        session.update(partitions, ())
        self._sessions[session.key] = session
        return session, old, ErrorCode.NONE

    def check(self, group_id: str, member_id: str, epoch: int) -> tuple[ShareSession | None, ErrorCode]:
        """A later request's session: SHARE_SESSION_NOT_FOUND without one, INVALID_SHARE_SESSION_EPOCH
        when ``epoch`` is not the one expected (-1, the final epoch, is always accepted)."""
        session = self._sessions.get((group_id, member_id))
        if session is None:
            return None, ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return None, ErrorCode.INVALID_SHARE_SESSION_EPOCH
        return session, ErrorCode.NONE

    def advance(self, session: ShareSession) -> None:
        """A request of the session was accepted: the next must carry the next epoch."""
        session.epoch = next_epoch(session.epoch)

    def close(self, session: ShareSession) -> None:
        if self._sessions.get(session.key) is session:
            del self._sessions[session.key]

    def close_connection(self, connection: object) -> list[ShareSession]:
        """The connection went away: its sessions end (returned, for their records' release)."""
        gone = [s for s in self._sessions.values() if s.connection is connection]
        for s in gone:
            del self._sessions[s.key]
        return gone

    def sessions(self) -> list[ShareSession]:
        return list(self._sessions.values())
