"""The deterministic simulator (shoal/sim): virtual time, replayable seeds, clean runs, planted
bugs found."""

from __future__ import annotations

import asyncio
import time

import pytest

from shoal import clock
from shoal.sim import loop as sim_loop
from shoal.sim.__main__ import main as sim_main
from shoal.sim.plants import PLANTS
from shoal.sim.run import run_seed

CLEAN_SEEDS = range(1, 41)


def test_virtual_time_takes_no_real_time_and_drives_shoal_clock() -> None:
    seen: list[tuple[float, int, int]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(3600)  # an hour of virtual time
        seen.append((loop.time(), clock.monotonic_ms(), clock.now_ms()))

    started = time.perf_counter()
    sim_loop.run(main)
    assert time.perf_counter() - started < 5
    assert seen == [(3600.0, 3_600_000, sim_loop.WALL_EPOCH_MS + 3_600_000)]
    assert clock.source_is_real()  # put back after the run


def test_timers_fire_in_virtual_order_and_deadlock_is_reported() -> None:
    order: list[str] = []

    async def sleeper(name: str, s: float) -> None:
        await asyncio.sleep(s)
        order.append(name)

    async def main() -> None:
        await asyncio.gather(sleeper("c", 3), sleeper("a", 1), sleeper("b", 2))

    sim_loop.run(main)
    assert order == ["a", "b", "c"]

    async def stuck() -> None:
        await asyncio.get_running_loop().create_future()

    with pytest.raises(sim_loop.Deadlock):
        sim_loop.run(stuck)


def test_same_seed_same_trace() -> None:
    # seed 2 has every kind of crash (a node, the whole cluster) besides the network's faults
    first, second = run_seed(2), run_seed(2)
    assert first.lines == second.lines
    assert first.digest == second.digest
    assert first.steps > 50 and first.acked_records > 0
    assert {"node-crash", "cluster-restart"} <= set(first.faults)


def test_seeds_run_clean_with_faults_injected() -> None:
    faults: dict[str, int] = {}
    for seed in CLEAN_SEEDS:
        result = run_seed(seed, keep_lines=False)
        assert result.ok, f"seed {seed}: {result.violations[0]} (python -m shoal.sim --seed {seed})"
        for kind, n in result.faults.items():
            faults[kind] = faults.get(kind, 0) + n
    # every kind of fault happened somewhere in the range, so the clean result means something
    assert {"delay", "lose-request", "lose-response", "drop-connection", "duplicate", "node-crash",
            "member-pause", "producer-pause", "cluster-restart", "clock-jump"} <= set(faults)


@pytest.mark.parametrize("name", sorted(PLANTS))
def test_each_plant_is_found_within_its_stated_seeds(name: str) -> None:
    plant = PLANTS[name]
    for seed in range(1, plant.found_within + 1):
        if not run_seed(seed, plant=name, keep_lines=False).ok:
            return
    pytest.fail(f"plant {name} not found within {plant.found_within} seeds")


def test_plants_are_removed_after_the_run() -> None:
    import shoal.broker.handlers.produce as produce

    real = produce.append
    run_seed(1, plant="ack-before-append", keep_lines=False)
    assert produce.append is real


def test_cli_summary_and_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    assert sim_main(["--seeds", "1..2"]) == 0
    out = capsys.readouterr().out
    assert "2 seeds run" in out and "violations: 0" in out
    assert sim_main(["--seeds", "1..1", "--plant", "ack-before-append"]) == 1
    assert "seed 1 FAILED: ack-durable" in capsys.readouterr().out
    assert sim_main(["--plant", "list"]) == 0
    assert "replay-without-tombstones" in capsys.readouterr().out
