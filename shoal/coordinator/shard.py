"""The shard contract the runtime drives, and the skeleton the coordinators' shards share.

A shard is the sans-IO coordinator of one partition of its internal topic:
requests (`handle`) and time (`poll`) go in, a CoordinatorResult (responses,
records to append first, markers) comes out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from shoal.coordinator.result import CoordinatorResult, ShardRequest
from shoal.coordinator.timers import Timers
from shoal.protocol.generated.api_keys import ApiKey

log = logging.getLogger(__name__)

Handler = Callable[[ShardRequest, Any, int], Any]


class CoordinatorShard(Protocol):
    """What a CoordinatorRuntime drives; each step returns a CoordinatorResult. `replay_loaded` takes
    what the runtime read back and yields now and then (long loads must not stall the loop)."""

    timers: Timers  # anchored by the runtime before every step

    def handle(self, ctx: ShardRequest, request: Any, now_ms: int) -> CoordinatorResult: ...
    def poll(self, now_ms: int) -> CoordinatorResult: ...
    def next_deadline(self) -> int | None: ...  # on the monotonic clock
    def replay_loaded(self, loaded: Any) -> Iterator[None]: ...
    def on_loaded(self, now_ms: int) -> CoordinatorResult: ...
    def unload(self) -> CoordinatorResult: ...


class ShardSkeleton:
    """`handle` and `poll` as every shard runs them: periodic timers armed, the request dispatched
    through `handlers` (API key -> handler), its answer queued, then every due timer fired."""

    _out: CoordinatorResult | None = None
    handlers: dict[ApiKey, Handler]

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.timers = Timers()
        self.handlers = {}
        self._skipped_versions: set[int] = set()

    # ---------------------------------------------------------------- hooks
    def _ensure_timers(self, now_ms: int) -> None:
        """Arm the shard's periodic timers if they are not."""

    def _unsupported(self, ctx: ShardRequest, request: Any) -> Any:
        raise NotImplementedError

    # ---------------------------------------------------------------- output
    def _begin(self) -> None:
        if self._out is None:
            self._out = CoordinatorResult()

    def _end(self) -> CoordinatorResult:
        out, self._out = self._out, None
        assert out is not None
        return out

    def respond(self, token: Any, response: Any) -> None:
        assert self._out is not None, "respond outside of a step"
        self._out.responses.append((token, response))

    def skip_record(self, key_version: int) -> None:
        """A record of a key version no one here replays: kept out of state, logged once."""
        if key_version not in self._skipped_versions:
            self._skipped_versions.add(key_version)
            log.warning("Partition %d: skipping records with unknown key version %d (no coordinator "
                        "component replays them)", self.partition, key_version)

    # ---------------------------------------------------------------- steps
    def handle(self, ctx: ShardRequest, request: Any, now_ms: int) -> CoordinatorResult:
        """Apply one request; its response may come now or from a later step."""
        self._begin()
        self._ensure_timers(now_ms)
        handler = self.handlers.get(ctx.api_key)
        response = self._unsupported(ctx, request) if handler is None else handler(ctx, request, now_ms)
        if response is not None:
            self.respond(ctx.token, response)
        self._fire_due(now_ms)
        return self._end()

    def poll(self, now_ms: int) -> CoordinatorResult:
        """Fire every timer due at `now_ms`."""
        self._begin()
        self._ensure_timers(now_ms)
        self._fire_due(now_ms)
        return self._end()

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def _fire_due(self, now_ms: int) -> None:
        while (due := self.timers.pop_due(now_ms)) is not None:
            due[1](now_ms)
