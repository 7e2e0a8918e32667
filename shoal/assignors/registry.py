"""Name -> assignor lookup, with the built-ins and whatever users register."""

from __future__ import annotations

from collections.abc import Callable

from .base import PartitionAssignor
from .range import RangeAssignor
from .roundrobin import RoundRobinAssignor
from .sticky import CooperativeStickyAssignor, StickyAssignor

_Factory = Callable[[], PartitionAssignor]

_registry: dict[str, PartitionAssignor | _Factory] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    StickyAssignor.name: StickyAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}


def register(assignor: PartitionAssignor | type[PartitionAssignor], name: str | None = None) -> None:
    """Make ``assignor`` available to :func:`lookup` under ``name`` (default: its ``.name``).

    Register a class to get a fresh instance (with its own state) per lookup, or an
    instance to share that one object.
    """
    key = name or assignor.name
    if not key:
        raise ValueError("assignor has no name")
    _registry[key] = assignor


def unregister(name: str) -> None:
    """Forget a registered assignor (built-ins included)."""
    _registry.pop(name, None)


def lookup(name: str) -> PartitionAssignor:
    """The assignor registered as ``name``; KeyError if none."""
    try:
        entry = _registry[name]
    except KeyError:
        raise KeyError(f"unknown partition assignor {name!r}; known: {sorted(_registry)}") from None
    if isinstance(entry, PartitionAssignor):
        return entry
    return entry()


def names() -> list[str]:
    """Names :func:`lookup` knows, sorted."""
    return sorted(_registry)
