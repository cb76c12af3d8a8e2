"""The long fuzzing run: offline solvers against the independent verifier, and simulator
invariants over random runs.

It runs ``tests/fuzzing.py`` (every registered solver and bound on ``--instances`` random
instances: with the 17 built-in solvers, 600 instances are 10,200 solver runs) and
``tests/serving/random_runs.py`` (``--simulations`` random runs, each checked), prints the
counts, the first reproducers of any broken invariant, and exits 1 if any invariant
broke. Progress goes to standard error. Run from the repository root:
``python benchmarks/fuzz.py`` (defaults: 600 instances, 500 simulations, seed 0), or
``python benchmarks/fuzz.py --instances 50 --simulations 50`` for a quick look.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' helpers

from tests.fuzzing import Tally, fuzz_instance, random_instance
from tests.serving.random_runs import check_case, random_case


def _solvers(count: int, seed: int) -> Tally:
    rng = np.random.default_rng(seed)
    tally = Tally()
    began = time.perf_counter()
    for k in range(count):
        fuzz_instance(random_instance(rng), tally, seed=int(rng.integers(2**16)))
        if (k + 1) % 10 == 0 or k + 1 == count:
            print(
                f"instances {k + 1}/{count}: {tally.runs} solver runs, {tally.broken} broken, "
                f"{time.perf_counter() - began:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    return tally


def _simulations(count: int, seed: int) -> tuple[dict[str, int], list[str]]:
    rng = np.random.default_rng(seed)
    counts = {"simulations": 0, "requests": 0, "unfinished": 0, "preempted": 0, "broken": 0}
    problems: list[str] = []
    began = time.perf_counter()
    for k in range(count):
        case = random_case(rng)
        counts["simulations"] += 1
        try:
            run = check_case(case)
        except AssertionError as exc:
            counts["broken"] += 1
            problems.append(f"simulation {k} of seed {seed}: {exc}")
        else:
            counts["requests"] += len(run.records)
            counts["unfinished"] += sum(not r.finished for r in run.records)
            counts["preempted"] += sum(r.preemptions > 0 for r in run.records)
        if (k + 1) % 25 == 0 or k + 1 == count:
            print(
                f"simulations {k + 1}/{count}: {counts['broken']} broken, "
                f"{time.perf_counter() - began:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    return counts, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=600, help="random instances")
    parser.add_argument("--simulations", type=int, default=500, help="random simulations")
    parser.add_argument("--seed", type=int, default=0, help="seed of every draw")
    args = parser.parse_args()
    began = time.perf_counter()
    tally = _solvers(args.instances, args.seed)
    counts, problems = _simulations(args.simulations, args.seed)
    print(f"offline solvers and bounds (seed {args.seed})")
    print(tally.table())
    print(f"\nsimulator (seed {args.seed})")
    print("\n".join(f"{name:<17} {value:>8,}" for name, value in counts.items()))
    print(f"\n{time.perf_counter() - began:.0f} s")
    for problem in (tally.problems + problems)[:20]:
        print(problem)
    return 1 if tally.broken or counts["broken"] else 0


if __name__ == "__main__":
    sys.exit(main())
