"""The assignor side the consumer uses: resolving strategies, the consumer-protocol blobs."""

from __future__ import annotations

from typing import Any

import shoal.assignors as _assignors
from shoal.assignors.types import Assignment, Subscription

__all__ = ["resolve_assignors", "encode_subscription", "decode_subscription", "encode_assignment", "decode_assignment"]


def _cp() -> Any:
    from shoal.assignors import consumer_protocol

    return consumer_protocol


def resolve_assignors(strategy: Any) -> list[Any]:
    """``partition.assignment.strategy`` -> assignor objects, in preference order.

    Accepts a comma-separated string of names ("range,cooperative-sticky"), Java class
    names (the part after the last dot, e.g. ``RangeAssignor``), assignor objects or a list
    mixing them.
    """
    items = [s.strip() for s in strategy.split(",")] if isinstance(strategy, str) else list(strategy)
    out = []
    for item in items:
        if not item:
            continue
        if isinstance(item, str):
            out.append(_assignors.lookup(_java_alias(item)))
        elif isinstance(item, type):
            out.append(item())
        else:
            out.append(item)
    if not out:
        raise ValueError("partition.assignment.strategy names no assignor")
    return out


_JAVA = {
    "rangeassignor": "range",
    "roundrobinassignor": "roundrobin",
    "stickyassignor": "sticky",
    "cooperativestickyassignor": "cooperative-sticky",
}


def _java_alias(name: str) -> str:
    short = name.rsplit(".", 1)[-1].lower()
    return _JAVA.get(short, name)


def encode_subscription(sub: Subscription) -> bytes:
    return bytes(_cp().encode_subscription(sub))


def decode_subscription(buf: bytes) -> Subscription:
    return _cp().decode_subscription(buf)


def encode_assignment(a: Assignment) -> bytes:
    return bytes(_cp().encode_assignment(a))


def decode_assignment(buf: bytes) -> Assignment:
    return _cp().decode_assignment(buf)
