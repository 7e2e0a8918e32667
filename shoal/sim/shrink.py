"""Shrinking a failing seed: the same seed on a smaller configuration that still fails.

A seed's schedule is drawn from its configuration (how many clients, how much work, which
faults at what rates), so a shorter schedule comes from a smaller configuration: no faults of a
kind, no crashes, fewer clients, less work each. `shrink` tries such reductions greedily and
keeps each one under which the run still breaks the same invariant in no more steps, until none
helps. The result replays with `--seed N --set k=v,...`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from shoal.sim.disk import DiskRates
from shoal.sim.network import FaultRates
from shoal.sim.run import SimConfig, SimResult, run_seed
from shoal.sim.workload import WorkloadConfig

# Fault kinds switched off whole, then counts halved toward their floor (field, floor).
_OFF = ("slow", "lose_request", "lose_response", "drop_connection", "duplicate",
        "crash_every_s", "restart_share", "clock_jump_share", "partition_share", "move_share", "power_loss_share",
        "write_error", "fsync_error", "lie")
_COUNTS = (("admins", 0), ("txn_producers", 0), ("consumer_groups", 0), ("groups", 0), ("committers", 0), ("producers", 0),
           ("share_groups", 0), ("share_members_per_group", 1),
           ("members_per_group", 1), ("consumer_members_per_group", 1), ("records_per_producer", 1),
           ("ops_per_committer", 1), ("transactions_per_producer", 1), ("admin_ops", 1), ("nodes", 1))


def settings(config: SimConfig) -> dict[str, Any]:
    """Every setting of ``config`` by name (the names `--set` takes)."""
    return {"nodes": config.nodes, **dataclasses.asdict(config.workload), **dataclasses.asdict(config.rates),
            **dataclasses.asdict(config.disk)}


def with_settings(config: SimConfig, changes: dict[str, Any]) -> SimConfig:
    """``config`` with some settings changed; a string value is parsed as the setting's type."""
    workload, rates = dataclasses.asdict(config.workload), dataclasses.asdict(config.rates)
    disk = dataclasses.asdict(config.disk)
    nodes = config.nodes
    known = settings(config)
    for name, value in changes.items():
        if name not in known:
            raise ValueError(f"no setting {name!r}; have: {', '.join(sorted(known))}")
        current = known[name]
        if isinstance(value, str):
            value = _parse(value, current)
        if name == "nodes":
            nodes = int(value)
        elif name in workload:
            workload[name] = value
        elif name in disk:
            disk[name] = value
        else:
            rates[name] = value
    return SimConfig(nodes, WorkloadConfig(**workload), FaultRates(**rates), DiskRates(**disk))


def _parse(text: str, like: Any) -> Any:
    if isinstance(like, bool):
        return text.lower() in ("1", "true", "yes")
    if isinstance(like, tuple):
        return tuple(float(x) for x in text.split(":"))
    return type(like)(text)


def changed(config: SimConfig) -> str:
    """The settings where ``config`` differs from the default, as `--set` takes them."""
    default = settings(SimConfig())
    parts = []
    for name, value in settings(config).items():
        if value != default[name]:
            parts.append(f"{name}={':'.join(map(str, value)) if isinstance(value, tuple) else value}")
    return ",".join(parts)


def _candidates(config: SimConfig) -> Iterator[dict[str, Any]]:
    now = settings(config)
    for name in _OFF:
        if now[name]:
            yield {name: type(now[name])(0)}
    for name, floor in _COUNTS:
        if now[name] > floor:
            yield {name: max(floor, now[name] // 2)}
            if now[name] - 1 >= floor:
                yield {name: now[name] - 1}


def shrink(seed: int, plant: str | None, config: SimConfig | None = None,
           progress: Callable[[str], None] = lambda _line: None) -> tuple[SimConfig, SimResult, SimResult]:
    """(smallest configuration found, the first failing run, the run under that configuration).

    Raises ValueError if the seed does not fail to begin with.
    """
    config = config or SimConfig()
    first = run_seed(seed, plant=plant, config=config, keep_lines=False)
    if first.ok:
        raise ValueError(f"seed {seed} does not fail: nothing to shrink")
    invariant = first.violations[0].invariant
    best, best_result = config, first
    improved = True
    while improved:
        improved = False
        for change in _candidates(best):
            trial = with_settings(best, change)
            result = run_seed(seed, plant=plant, config=trial, keep_lines=False)
            if not result.ok and result.violations[0].invariant == invariant and result.steps <= best_result.steps:
                best, best_result, improved = trial, result, True
                progress(f"  {changed(best)}: {result.steps} steps")
    return best, first, best_result
