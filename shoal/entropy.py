"""shoal's made-up ids, in one place: the cluster id, topic ids and coordinator-assigned member
ids come from `uuid4` here, so a simulation can draw them from its seed (`shoal.sim`) and one
seed gives one run. The counterpart of `shoal.clock` for randomness.

The seam: `uuid4` reads a module-level source (by default `uuid.uuid4` itself); `set_source`
swaps in another, `reset_source` puts the real one back. Secrets (SCRAM nonces and salts) do not
come from here: they must never be predictable.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable

_uuid4: Callable[[], uuid.UUID] = uuid.uuid4


def uuid4() -> uuid.UUID:
    """A random (version 4) UUID from the installed source."""
    return _uuid4()


def set_source(source: Callable[[], uuid.UUID]) -> None:
    """Make `uuid4` call ``source``. Process-wide, like `shoal.clock.set_source`."""
    global _uuid4
    _uuid4 = source


def seeded(rng: random.Random) -> Callable[[], uuid.UUID]:
    """A version-4 UUID source that draws its bits from ``rng``."""
    return lambda: uuid.UUID(int=rng.getrandbits(128), version=4)


def reset_source() -> None:
    """Back to `uuid.uuid4`."""
    set_source(uuid.uuid4)
