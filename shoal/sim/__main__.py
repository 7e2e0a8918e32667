"""`python -m shoal.sim`: run seeds of the simulator, replay one, or plant a bug.

    python -m shoal.sim --seeds 1..200            one summary line; exit 1 naming failing seeds
    python -m shoal.sim --seed 17                 replay seed 17 and print its trace
    python -m shoal.sim --seeds 1..20 --plant ack-before-append
    python -m shoal.sim --plant list
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from shoal.sim.plants import PLANTS
from shoal.sim.run import SimResult, run_seed


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


def _replay(seed: int, plant: str | None) -> int:
    result = run_seed(seed, plant=plant)
    for line in result.lines:
        print(line)
    print(_summary([result], 0.0))
    return 0 if result.ok else 1


def _summary(results: list[SimResult], elapsed: float) -> str:
    faults: Counter[str] = Counter()
    for r in results:
        faults.update(r.faults)
    bad = [r for r in results if not r.ok]
    rate = f", {len(results) / elapsed:.1f} seeds/s" if elapsed > 0 else ""
    plant = f" with plant {results[0].plant}" if results and results[0].plant else ""
    return (f"{len(results)} seeds run{plant}{rate}; faults: {_faults(faults)}; "
            f"violations: {sum(len(r.violations) for r in bad)} in {len(bad)} seeds")


def _run_range(seeds: range, plant: str | None, stop_at_first: bool) -> int:
    results: list[SimResult] = []
    started = time.perf_counter()
    for seed in seeds:
        result = run_seed(seed, plant=plant, keep_lines=False)
        results.append(result)
        if not result.ok and stop_at_first:
            break
    print(_summary(results, time.perf_counter() - started))
    bad = [r for r in results if not r.ok]
    for r in bad[:10]:
        print(f"seed {r.seed} FAILED: {r.violations[0]} (replay: python -m shoal.sim --seed {r.seed}"
              f"{f' --plant {plant}' if plant else ''})")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shoal.sim", description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--seeds", type=_seed_range, help="run this range of seeds, A..B")
    what.add_argument("--seed", type=int, help="replay one seed and print its trace")
    parser.add_argument("--plant", help="switch on a planted bug ('list' names them)")
    parser.add_argument("--first", action="store_true", help="stop at the first failing seed")
    args = parser.parse_args(argv)
    if args.plant == "list":
        for p in PLANTS.values():
            seeds = "seed" if p.found_within == 1 else "seeds"
            print(f"{p.name:28} {p.description} (found within {p.found_within} {seeds} from 1)")
        return 0
    if args.plant is not None and args.plant not in PLANTS:
        parser.error(f"no plant named {args.plant!r}; try --plant list")
    if args.seed is not None:
        return _replay(args.seed, args.plant)
    return _run_range(args.seeds or range(1, 11), args.plant, args.first)


if __name__ == "__main__":
    sys.exit(main())
