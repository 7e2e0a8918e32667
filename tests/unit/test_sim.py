"""The deterministic simulator (shoal/sim): virtual time, replayable seeds, clean runs, planted
bugs found."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from shoal import clock
from shoal.sim import loop as sim_loop
from shoal.sim.__main__ import main as sim_main
from shoal.sim.invariants import Checker
from shoal.sim.plants import PLANTS
from shoal.sim.run import SimConfig, run_seed
from shoal.sim.shrink import with_settings
from shoal.sim.swarm import describe, swarm_config, swarm_settings

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
    # seed 6 has every kind of crash (a node, the whole cluster, a power cut) and a leadership move
    # besides the network's and the disk's faults (re-chosen when the simulator's schedules change)
    first, second = run_seed(6), run_seed(6)
    assert first.lines == second.lines
    assert first.digest == second.digest
    assert first.steps > 50 and first.acked_records > 0
    assert {"node-crash", "cluster-restart", "power-loss", "leader-move"} <= set(first.faults)
    replays = re.search(r"(\d+) coordinator replays compared", first.lines[-1])
    assert replays and int(replays[1]) > 0, first.lines[-1]  # the replay-state invariant had work to do


def test_seeds_run_clean_with_faults_injected() -> None:
    faults: dict[str, int] = {}
    for seed in CLEAN_SEEDS:
        result = run_seed(seed, keep_lines=False)
        assert result.ok, f"seed {seed}: {result.violations[0]} (python -m shoal.sim --seed {seed})"
        for kind, n in result.faults.items():
            faults[kind] = faults.get(kind, 0) + n
    # every kind of fault happened somewhere in the range, so the clean result means something
    assert {"delay", "lose-request", "lose-response", "drop-connection", "duplicate", "node-crash",
            "member-pause", "producer-pause", "cluster-restart", "clock-jump", "network-partition",
            "power-loss", "disk-full", "write-error", "fsync-error", "fsync-lie"} <= set(faults)


def test_a_lying_fsync_loses_acknowledged_records_and_only_they_are_excused(monkeypatch: pytest.MonkeyPatch) -> None:
    # half the fsyncs of the data topic lie, and every whole-cluster restart is a power cut: the first
    # seed where a cut lands between a lie and the file's next fsync (seed 2 today)
    config = with_settings(SimConfig(), {"lie": 0.5, "restart_share": 0.4, "power_loss_share": 1.0})
    seed, result = next((s, r) for s in range(1, 21)
                        if (r := run_seed(s, config=config, keep_lines=False)).faults["lie-exposed"])
    assert result.ok, result.violations[0]
    # without the excuse the loss is a violation: the lie really cost acknowledged records
    monkeypatch.setattr(Checker, "lost_to_a_lie", lambda self, broker, dirs: None)
    unexcused = run_seed(seed, config=config, keep_lines=False)
    assert "acked-record-lost" in {v.invariant for v in unexcused.violations}


# (the share-group plants break what only swarm seeds run: the full configuration has no share group)
@pytest.mark.parametrize("name", sorted(n for n, p in PLANTS.items() if p.found_within is not None))
def test_each_plant_is_found_within_its_stated_seeds(name: str) -> None:
    plant = PLANTS[name]
    assert plant.found_within is not None
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


def test_seeds_in_parallel_processes_give_the_same_runs() -> None:
    from shoal.sim.__main__ import _results

    serial = [r.digest for r in _results(range(5, 9), None, 1, False, None)]
    parallel = [r.digest for r in _results(range(5, 9), None, 2, False, None)]
    assert serial == parallel


def test_shrink_keeps_the_failure_on_a_shorter_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    from shoal.sim.shrink import changed, shrink

    # a swarm seed (smaller than the full configuration, so shrinking it is quicker)
    seed = next(s for s in range(1, 6) if not run_seed(s, plant="ack-before-append", config=swarm_config(s),
                                                         keep_lines=False).ok)
    best, first, last = shrink(seed, "ack-before-append", swarm_config(seed))
    assert not last.ok and last.violations[0].invariant == first.violations[0].invariant == "ack-durable"
    assert last.steps < first.steps and changed(best) != changed(swarm_config(seed))
    # the printed replay settings give that run again (they name every setting that differs from the
    # full configuration, so the replay needs no --swarm)
    again = run_seed(seed, plant="ack-before-append", config=with_settings(SimConfig(), dict(
        kv.split("=", 1) for kv in changed(best).split(","))), keep_lines=False)
    assert again.digest == last.digest
    with pytest.raises(ValueError, match="nothing to shrink"):
        shrink(seed, None, swarm_config(seed))
    assert sim_main(["--swarm", "--seed", str(seed), "--plant", "ack-before-append", "--shrink"]) == 1
    assert f"replay: python -m shoal.sim --seed {seed} --plant ack-before-append --set " in capsys.readouterr().out


# Seeds that find a defect on the code before its fix, replayed as they run today. A seed's schedule
# changes as the simulator grows, so each is re-chosen then (by a sweep with the fix reverted); the
# unit test named beside it keeps the defect covered meanwhile.
REGRESSION_SEEDS = {
    # test_sim_disk.py::test_recovery_keeps_the_aborted_index_it_rebuilds_before_its_snapshot; first seen at
    # seeds 516, 673, 875, 1016; re-chosen on the schedules since 6a50f58 (clients that look leaders up again),
    # where 388 no longer fails with the fix reverted: 7 of seeds 1-1000 do (22, 267, 504, 716, 872, 912, 946)
    22: "recovery rebuilt the aborted-transaction index unsynced, then synced a snapshot that skips the "
        "rebuild: after a second power cut read_committed delivered an aborted record",
    # tests/interop/test_wall_clock_step.py; 5 of seeds 1-60 (35, 42, 45, 49, 55) on the code of 2026-12-02
    # with the coordinators' timers on the wall clock again; 42 still fails so on the schedules since 6a50f58
    42: "a clock-jump expired a KIP-848 member's session at once: its partitions went to another member "
        "it had not revoked",
    # test_coordinator_runtime.py::test_a_rebuild_after_a_failed_write_does_not_run_on_a_stopped_node; first seen
    # at seeds 4347, 5189, 5211 of a sweep of 4001-6000; 4347 still fails with the fix reverted since 6a50f58
    4347: "a coordinator partition's rebuild after a failed write ran on a node that had stopped meanwhile; "
          "the node served that stale shard when it came back (an offset commit lost)",
}


@pytest.mark.parametrize("seed", sorted(REGRESSION_SEEDS))
def test_regression_seeds_run_clean(seed: int) -> None:
    result = run_seed(seed, keep_lines=False)
    assert result.ok, f"seed {seed} ({REGRESSION_SEEDS[seed]}): {result.violations[0]}"


# Swarm seeds of the long sweeps (docs/reliability.md) that failed, each on the code just before its fix:
# 15502, 15495, 15100 and 19517 on 9754a06's schedules; 1008, 15031 and 61278 on those since 6a50f58, whose
# clients look leaders up again after a network error (it changed every seed's schedule).
SWARM_REGRESSION_SEEDS = {
    # test_share_fetch.py::test_a_fetch_whose_connection_closed_while_the_state_loaded_gives_its_records_back
    15502: "a ShareFetch waiting for its partition's state went on after its node stopped and acquired records "
           "for an answer never sent",
    # the simulator's own: a power cut left running the handlers of connections a node crash had closed
    15495: "an acknowledgement on a crashed node's connection was answered from the dead process after the "
           "power cut, and its record delivered again after the restart",
    # the simulator's own: liveness judged while a single node was cut off more often than not
    15100: "a committer could not finish while the faults went on; it does once they stop",
    # test_share_fetch.py::test_closing_a_session_with_a_former_leader_leaves_what_the_member_holds_on_the_new_one
    # (1008 and 2709 of swarm seeds 1-3000 once the clients looked leaders up again after a network error)
    1008: "a member's session with a partition's old leader ended and released what the member held through "
          "its session with the new leader",
    # the simulator's own: a DeleteTopics that went unanswered through every attempt had been done
    15031: "the admin judged a topic whose delete went unanswered as still there; the delete had landed",
    # the simulator's own: a late EndTxn (transaction version 1) was put down to the transaction before the
    # one it ended, which had added its partitions but had no record acknowledged yet
    61278: "a late copy of an abort's EndTxn ended the next transaction, which the checker then judged",
    # the simulator's own: the transactional producer gave up init_transactions for good after 40 tries
    19517: "InitProducerId went unanswered through crashes every 0.6 s; the producer now initializes again",
    # tests/unit/test_waits.py; asyncio.wait_for (Python 3.11) dropped a cancel that raced a Fetch's answer,
    # and the reader read on forever in virtual time (the sweep hung); with it back in the simulated network
    # this seed is client-stuck now, as the end of a run is bounded
    247245: "a reader cancelled at the end of the run read on forever",
}


@pytest.mark.parametrize("seed", sorted(SWARM_REGRESSION_SEEDS))
def test_swarm_regression_seeds_run_clean(seed: int) -> None:
    result = run_seed(seed, config=swarm_config(seed), keep_lines=False)
    assert result.ok, f"swarm seed {seed} ({SWARM_REGRESSION_SEEDS[seed]}): {result.violations[0]}"


# -- swarm seeds (shoal/sim/swarm.py): each seed draws its own configuration; CI runs 10,000 of them

def test_a_swarm_seed_replays_bit_for_bit() -> None:
    seed = next(s for s in range(1, 100) if (c := swarm_config(s)).workload.share_groups and c.nodes == 3)
    first = run_seed(seed, config=swarm_config(seed))
    second = run_seed(seed, config=swarm_config(seed))
    assert first.lines == second.lines and first.digest == second.digest
    assert first.acked_records > 0
    shared = re.search(r"(\d+) share acquisitions", first.lines[-1])
    assert shared and int(shared[1]) > 0, first.lines[-1]  # the share-group invariants had work to do


def test_swarm_seeds_draw_every_kind_of_client_and_fault_both_on_and_off() -> None:
    drawn = [swarm_config(seed) for seed in range(1, 201)]
    kinds = ("producers", "committers", "groups", "consumer_groups", "txn_producers", "kv_producers", "admins",
             "share_groups")
    for kind in kinds:
        assert {getattr(c.workload, kind) > 0 for c in drawn} == {True, False}, kind
    assert all(any(getattr(c.workload, kind) for kind in kinds) for c in drawn)  # never nobody at all
    for name in ("slow", "lose_request", "lose_response", "drop_connection", "duplicate"):
        assert {getattr(c.rates, name) > 0 for c in drawn} == {True, False}, name
    for name in ("write_error", "fsync_error", "lie"):
        assert {getattr(c.disk, name) > 0 for c in drawn} == {True, False}, name
    assert {c.nodes for c in drawn} == {1, 2, 3}
    assert {c.workload.crash_every_s > 0 for c in drawn} == {True, False}
    # a function of the seed alone, and printed in the form --set takes back
    assert swarm_settings(17) == swarm_settings(17) != swarm_settings(18)
    assert swarm_config(17) == with_settings(SimConfig(), dict(kv.split("=", 1) for kv in describe(17).split(",")))


def test_swarm_seeds_run_clean() -> None:
    for seed in range(1, 101):
        result = run_seed(seed, config=swarm_config(seed), keep_lines=False)
        assert result.ok, f"swarm seed {seed}: {result.violations[0]} (python -m shoal.sim --swarm --seed {seed})"


@pytest.mark.parametrize("name", sorted(PLANTS))
def test_each_plant_is_found_within_its_stated_swarm_seeds(name: str) -> None:
    plant = PLANTS[name]
    for seed in range(1, plant.found_within_swarm + 1):
        if not run_seed(seed, plant=name, config=swarm_config(seed), keep_lines=False).ok:
            return
    pytest.fail(f"plant {name} not found within {plant.found_within_swarm} swarm seeds")


def test_cli_swarm(capsys: pytest.CaptureFixture[str]) -> None:
    assert sim_main(["--swarm", "--seeds", "1..3"]) == 0
    assert "3 swarm seeds run" in capsys.readouterr().out
    seed = next(s for s in range(1, 6) if not run_seed(s, plant="ack-before-append", config=swarm_config(s),
                                                         keep_lines=False).ok)
    assert sim_main(["--swarm", "--seeds", f"1..{seed}", "--plant", "ack-before-append"]) == 1
    out = capsys.readouterr().out
    assert f"seed {seed} FAILED: ack-durable" in out and f"python -m shoal.sim --swarm --seed {seed} --plant" in out
    assert sim_main(["--swarm", "--seed", str(seed), "--plant", "ack-before-append"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"swarm seed {seed} draws: --set {describe(seed)}\n") and "ack-durable" in out
    # --set on top of a swarm seed's draw
    assert sim_main(["--swarm", "--seeds", "1..1", "--set", "crash_every_s=0"]) == 0
    assert "node-crash" not in capsys.readouterr().out
