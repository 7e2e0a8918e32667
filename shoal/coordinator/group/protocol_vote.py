"""Choosing a classic group's protocol (assignor) by members' votes.

Candidates are the protocols every member supports; each member votes for the
first of its own protocols among the candidates; most votes wins. Kafka
counts votes in a java.util.HashMap and takes the first maximum in the map's
iteration order, so ties are broken by that order, which `java_hashmap_order`
reproduces (bucket index of the spread String hash, then insertion order).
"""

from __future__ import annotations

from collections.abc import Iterable

from shoal.coordinator.partitioning import hash_map_order, java_string_hash


def first_supported(preferences: Iterable[str], candidates: set[str]) -> str | None:
    for name in preferences:
        if name in candidates:
            return name
    return None


def candidate_protocols(member_protocols: list[list[str]]) -> set[str]:
    """Protocols supported by every member."""
    if not member_protocols:
        return set()
    common = set(member_protocols[0])
    for names in member_protocols[1:]:
        common &= set(names)
    return common


def java_hashmap_order(keys_in_insertion_order: list[str]) -> list[str]:
    """Iteration order of a java.util.HashMap<String, ?> holding these keys."""
    keys = keys_in_insertion_order
    return hash_map_order(keys, [java_string_hash(k) & 0xFFFFFFFF for k in keys], 16)


def select_protocol(member_protocols: list[list[str]]) -> str:
    """The group's protocol given each member's ordered protocol names."""
    candidates = candidate_protocols(member_protocols)
    if not candidates:
        raise ValueError("no protocol is supported by all members")
    votes: dict[str, int] = {}
    for names in member_protocols:
        choice = first_supported(names, candidates)
        assert choice is not None
        votes[choice] = votes.get(choice, 0) + 1
    best: str | None = None
    for name in java_hashmap_order(list(votes)):
        if best is None or votes[name] > votes[best]:
            best = name
    assert best is not None
    return best
