"""Swarm testing: each seed draws its own configuration.

One configuration run on every seed (`SimConfig()`: every kind of client at once, fixed fault
rates) explores schedules around one mix. A swarm seed first draws which kinds of client take
part and how many, how much work each does, how many nodes and partitions there are, and which
faults happen how often, then runs that configuration on its schedule. Groce et al. ("Swarm
Testing", ISSTA 2012) found that leaving features out at random finds more defects per test
than running them all every time: a feature can mask another (a busy network hides a rare
interleaving), and small runs reach corners that large ones average away. Small runs are also
cheap, which is what lets CI run ten thousand seeds.

``python -m shoal.sim --swarm --seeds A..B`` runs them; ``--swarm --seed N`` replays one (the
configuration is a function of the seed alone, so the replay is exact), and `describe` says what
a seed drew in the `--set` form.
"""

from __future__ import annotations

import random
from typing import Any

from shoal.sim.run import SimConfig
from shoal.sim.shrink import changed, with_settings

# The kinds of client, each with the most of it a swarm seed runs (the full configuration's count).
_KINDS = (("producers", 3), ("committers", 4), ("groups", 1), ("consumer_groups", 1), ("txn_producers", 2),
          ("kv_producers", 2), ("admins", 1))
# what sizes the work of each kind
_SIZES = {"producers": ("records_per_producer",), "committers": ("ops_per_committer",),
          "groups": ("members_per_group", "member_lifetime_s"),
          "consumer_groups": ("consumer_members_per_group", "member_lifetime_s"),
          "txn_producers": ("transactions_per_producer",), "kv_producers": ("kv_records_per_producer", "kv_keys"),
          "admins": ("admin_ops",)}
_TAKE_PART = 0.3  # the chance that a kind of client takes part

# Fault rates drawn around the full configuration's: off now and then, else up to this many times it.
_NETWORK_FAULTS = ("slow", "lose_request", "lose_response", "drop_connection", "duplicate")
_DISK_FAULTS = ("write_error", "fsync_error", "lie")
_FAULT_OFF = 0.3
_FAULT_SCALE = 3.0


def swarm_settings(seed: int) -> dict[str, Any]:
    """The settings seed ``seed`` draws (only those it changes from the full configuration's)."""
    rng = random.Random(f"{seed}-swarm")
    full = SimConfig()
    w, rates, disk = full.workload, full.rates, full.disk
    taking_part = {kind for kind, _ in _KINDS if rng.random() < _TAKE_PART}
    if not taking_part:
        taking_part = {rng.choice(_KINDS)[0]}
    s: dict[str, Any] = {}
    for kind, most in _KINDS:  # how many of each kind, and how much each does
        s[kind] = rng.randint(1, most) if kind in taking_part else 0
        for size in _SIZES[kind] if kind in taking_part else ():
            most = getattr(w, size)
            s[size] = (round(rng.uniform(most / 2, most), 1) if size == "member_lifetime_s"
                       else rng.randint(max(1, most // 2), most))
    s["partitions"] = rng.randint(1, 3)
    s["reader_wait_ms"] = rng.choice((500, 1000))  # under the clients' 1.5 s request timeout
    s["nodes"] = rng.choices((1, 2, 3), weights=(0.15, 0.25, 0.6))[0]
    # crashes: now and then none; else a mean interval and a mix of kinds of its own
    s["crash_every_s"] = 0.0 if rng.random() < 0.1 else round(rng.uniform(0.5, 5.0), 2)
    weights = [rng.random() for _ in range(5)]  # clock jump, restart, partition, move, node crash
    total = sum(weights)
    for name, weight in zip(("clock_jump_share", "restart_share", "partition_share", "move_share"), weights[:4],
                            strict=True):
        s[name] = round(weight / total, 3)
    s["power_loss_share"] = round(rng.random(), 3)
    for name in _NETWORK_FAULTS:
        s[name] = _rate(rng, getattr(rates, name))
    for name in _DISK_FAULTS:
        s[name] = _rate(rng, getattr(disk, name))
    # share groups last, so that adding them left every other draw of a seed as it was; they read the
    # data topic, so a seed with a share group has its producers
    if rng.random() < _TAKE_PART:
        s["share_groups"] = 1
        s["share_members_per_group"] = rng.randint(1, w.share_members_per_group)
        s.setdefault("member_lifetime_s", round(rng.uniform(w.member_lifetime_s / 2, w.member_lifetime_s), 1))
        if not s["producers"]:
            s["producers"] = rng.randint(1, 3)
            s["records_per_producer"] = rng.randint(max(1, w.records_per_producer // 2), w.records_per_producer)
    return {k: v for k, v in s.items() if v != _default(full, k)}


def _rate(rng: random.Random, full: float) -> float:
    return 0.0 if rng.random() < _FAULT_OFF else round(full * rng.uniform(0.0, _FAULT_SCALE), 5)


def _default(full: SimConfig, name: str) -> Any:
    for part in (full.workload, full.rates, full.disk):
        if hasattr(part, name):
            return getattr(part, name)
    return full.nodes


def swarm_config(seed: int, changes: dict[str, Any] | None = None) -> SimConfig:
    """Seed ``seed``'s configuration, with ``changes`` (as `--set` gives them) on top."""
    return with_settings(with_settings(SimConfig(), swarm_settings(seed)), changes or {})


def describe(seed: int) -> str:
    """What seed ``seed`` drew, in the form `--set` takes."""
    return changed(swarm_config(seed))
