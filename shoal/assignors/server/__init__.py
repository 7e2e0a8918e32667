"""Server-side assignors of the consumer group protocol (KIP-848): pure functions run by the
group coordinator, chosen by `group.consumer.assignors` and a member's `group.remote.assignor`.

The shape follows Kafka's `ConsumerGroupPartitionAssignor`: a `GroupSpec` (each member's
subscribed topic ids, rack and current target assignment, for stickiness) and the subscribed
topics' metadata in, a member id -> topic id -> partitions map out. Topics are named by id, as
the consumer protocol's records and heartbeats name them.

Two assignors, as in Kafka 4.0: `uniform` (Kafka's default, first in `group.consumer.assignors`)
and `range`. Both return an entry, possibly {}, for every member of the group, and ignore
subscribed topics missing from `topics` (Kafka's coordinator only hands its assignors topics
that exist in the metadata image, so an unknown or deleted topic simply has nothing to assign).
"""

from __future__ import annotations

from shoal.assignors.server.range import RangeAssignor
from shoal.assignors.server.spec import (
    Assignment,
    GroupSpec,
    MemberSpec,
    ServerAssignor,
    SubscriptionType,
    TopicSpec,
)
from shoal.assignors.server.uniform import UniformAssignor

__all__ = [
    "Assignment",
    "GroupSpec",
    "MemberSpec",
    "RangeAssignor",
    "SERVER_ASSIGNORS",
    "ServerAssignor",
    "SubscriptionType",
    "TopicSpec",
    "UniformAssignor",
    "UnknownServerAssignorError",
    "lookup",
]

# By name, in Kafka's default `group.consumer.assignors` order (the first is the default).
SERVER_ASSIGNORS: dict[str, ServerAssignor] = {
    UniformAssignor.name: UniformAssignor(),
    RangeAssignor.name: RangeAssignor(),
}


class UnknownServerAssignorError(KeyError):
    """No server-side assignor has this name (a bad `group.remote.assignor` or config entry)."""

    def __str__(self) -> str:
        # KeyError's str() is the repr of its argument; this message is meant for people.
        return str(self.args[0]) if self.args else "unknown server-side assignor"


def lookup(name: str) -> ServerAssignor:
    """The server-side assignor called `name`; raises UnknownServerAssignorError naming the
    known ones if there is none."""
    try:
        return SERVER_ASSIGNORS[name]
    except KeyError:
        known = ", ".join(sorted(SERVER_ASSIGNORS))
        raise UnknownServerAssignorError(
            f"unknown server-side assignor {name!r}; known assignors: {known}"
        ) from None
