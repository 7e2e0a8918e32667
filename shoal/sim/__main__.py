"""`python -m shoal.sim`: run seeds of the simulator, replay one, or plant a bug.

    python -m shoal.sim --seeds 1..200            one summary line; exit 1 naming failing seeds
    python -m shoal.sim --seeds 1..10000 --jobs 2 the same, the seeds shared by two processes
    python -m shoal.sim --seed 17                 replay seed 17 and print its trace
    python -m shoal.sim --seeds 1..20 --plant ack-before-append
    python -m shoal.sim --plant list
    python -m shoal.sim --seed 4 --plant skip-epoch-fence --shrink
                                                  the same failure on a smaller configuration
    python -m shoal.sim --seed 4 --set producers=1,lose_request=0   replay on changed settings
    python -m shoal.sim --swarm --seeds 1..10000 --jobs 2
                                                  each seed draws its own configuration (shoal/sim/swarm.py)
    python -m shoal.sim --swarm --seed 17         replay swarm seed 17 (and print what it drew)
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import sys
import time
from collections import Counter
from collections.abc import Iterator

from shoal.sim.plants import PLANTS
from shoal.sim.run import SimConfig, SimResult, run_seed
from shoal.sim.shrink import changed, shrink, with_settings
from shoal.sim.swarm import describe, swarm_config


def _seed_range(text: str) -> range:
    first, sep, last = text.partition("..")
    if not sep:
        raise argparse.ArgumentTypeError("expected A..B, e.g. 1..100")
    a, b = int(first), int(last)
    if b < a:
        raise argparse.ArgumentTypeError(f"empty range {text}")
    return range(a, b + 1)


def _faults(counter: Counter[str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(counter.items())) or "none"


def _replay(seed: int, plant: str | None, config: SimConfig) -> int:
    result = run_seed(seed, plant=plant, config=config)
    for line in result.lines:
        print(line)
    print(_summary([result], 0.0))
    return 0 if result.ok else 1


def _summary(results: list[SimResult], elapsed: float, swarm: bool = False) -> str:
    faults: Counter[str] = Counter()
    for r in results:
        faults.update(r.faults)
    bad = [r for r in results if not r.ok]
    rate = f", {len(results) / elapsed:.1f} seeds/s" if elapsed > 0 else ""
    plant = f" with plant {results[0].plant}" if results and results[0].plant else ""
    kind = "swarm seeds" if swarm else "seeds"
    return (f"{len(results)} {kind} run{plant}{rate}; faults: {_faults(faults)}; "
            f"violations: {sum(len(r.violations) for r in bad)} in {len(bad)} seeds")


def _shrink(seed: int, plant: str | None, config: SimConfig) -> int:
    try:
        best, first, last = shrink(seed, plant, config, progress=print)
    except ValueError as e:
        print(e)
        return 0
    again = f" --plant {plant}" if plant else ""
    print(f"seed {seed}: {first.violations[0].invariant} in {first.steps} steps; "
          f"shrunk to {last.steps} steps: {last.violations[0]}")
    print(f"replay: python -m shoal.sim --seed {seed}{again} --set {changed(best) or '(defaults)'}")
    return 1


def _run_one(seed: int, plant: str | None, config: SimConfig | None = None,
             swarm: dict[str, str] | None = None) -> SimResult:
    if swarm is not None:  # the seed draws its configuration; ``swarm`` holds --set's changes on top
        config = swarm_config(seed, swarm)
    return run_seed(seed, plant=plant, config=config, keep_lines=False)


def _results(seeds: range, plant: str | None, jobs: int, stop_at_first: bool,
             config: SimConfig | None, swarm: dict[str, str] | None = None) -> Iterator[SimResult]:
    """Each seed's result, in seed order. With ``jobs`` > 1 the seeds run in that many forked
    processes; a seed's run depends only on the seed, so where it runs changes nothing."""
    if jobs <= 1:
        yield from (_run_one(seed, plant, config, swarm) for seed in seeds)
        return
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        chunk = max(1, min(50, len(seeds) // (jobs * 8)))
        run = functools.partial(_run_one, plant=plant, config=config, swarm=swarm)
        for result in pool.imap(run, seeds, chunksize=chunk):
            yield result
            if stop_at_first and not result.ok:
                pool.terminate()
                return


def _run_range(seeds: range, plant: str | None, stop_at_first: bool, jobs: int = 1,
               config: SimConfig | None = None, swarm: dict[str, str] | None = None) -> int:
    results: list[SimResult] = []
    started = time.perf_counter()
    for result in _results(seeds, plant, jobs, stop_at_first, config, swarm):
        results.append(result)
        if not result.ok and stop_at_first:
            break
    print(_summary(results, time.perf_counter() - started, swarm is not None))
    bad = [r for r in results if not r.ok]
    for r in bad[:10]:
        print(f"seed {r.seed} FAILED: {r.violations[0]} (replay: python -m shoal.sim"
              f"{' --swarm' if swarm is not None else ''} --seed {r.seed}{f' --plant {plant}' if plant else ''})")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shoal.sim", description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--seeds", type=_seed_range, help="run this range of seeds, A..B")
    what.add_argument("--seed", type=int, help="replay one seed and print its trace")
    parser.add_argument("--plant", help="switch on a planted bug ('list' names them)")
    parser.add_argument("--first", action="store_true", help="stop at the first failing seed")
    parser.add_argument("--jobs", type=int, default=1, help="processes to share the seeds among (default 1)")
    parser.add_argument("--set", default="", metavar="K=V,...",
                        help="change settings of the run (workload sizes, fault rates), as --shrink prints them")
    parser.add_argument("--shrink", action="store_true",
                        help="with --seed: find a smaller configuration on which the seed still fails")
    parser.add_argument("--swarm", action="store_true",
                        help="each seed draws its own configuration (--set changes it further)")
    args = parser.parse_args(argv)
    if args.plant == "list":
        for p in PLANTS.values():
            full = "" if p.found_within is None else \
                f"{p.found_within} {'seed' if p.found_within == 1 else 'seeds'} from 1, "
            print(f"{p.name:28} {p.description} (found within {full}{p.found_within_swarm} swarm seeds)")
        return 0
    if args.plant is not None and args.plant not in PLANTS:
        parser.error(f"no plant named {args.plant!r}; try --plant list")
    sets = dict(kv.split("=", 1) for kv in args.set.split(",") if kv)
    try:
        config = with_settings(SimConfig(), sets)
        if args.swarm and args.seed is not None:
            config = swarm_config(args.seed, sets)
    except ValueError as e:
        parser.error(f"--set: {e}")
    if args.shrink:
        if args.seed is None:
            parser.error("--shrink works on one failing seed: give --seed N")
        return _shrink(args.seed, args.plant, config)
    if args.seed is not None:
        if args.swarm:
            print(f"swarm seed {args.seed} draws: --set {describe(args.seed)}")
        return _replay(args.seed, args.plant, config)
    return _run_range(args.seeds or range(1, 11), args.plant, args.first, args.jobs, config,
                      sets if args.swarm else None)


if __name__ == "__main__":
    sys.exit(main())
