"""The long fuzzing run: offline solvers against the independent verifier, simulator
invariants over random runs, and every command fed bad input.

It runs ``tests/fuzzing.py`` (every registered solver and bound on ``--instances`` random
instances: with the 21 built-in solvers, 600 instances are 12,600 solver runs),
``tests/serving/random_runs.py`` (``--simulations`` random runs, each checked) and, with
``--bad-inputs SCALE``, the bad-input corpus (``tests/cli/test_fuzz.py`` and
``tests/bad_inputs``) with each hypothesis test drawing ``SCALE`` times its CI examples;
prints the counts, the first reproducers of any broken invariant, and exits 1 if any
broke. Progress goes to standard error; ``--page`` also writes the output as a results
page. Run from the repository root: ``python benchmarks/fuzz.py --bad-inputs 10 --page
docs/fuzz.md`` (defaults: 600 instances, 500 simulations, seed 0), or ``python
benchmarks/fuzz.py --instances 50 --simulations 50`` for a quick look.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' helpers

from benchmarks.results_page import command_line, tee_page
from tests.conftest import FUZZ_SCALE_ENV
from tests.fuzzing import Tally, fuzz_instance, random_instance
from tests.serving.random_runs import check_case, random_case

ROOT = Path(__file__).resolve().parents[1]

#: The bad-input corpus the long run scales up.
BAD_INPUTS = ("tests/cli/test_fuzz.py", "tests/bad_inputs")


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


def _bad_inputs(scale: int) -> tuple[str, int]:
    """pytest's summary line of the bad-input corpus at ``scale`` times its examples, and
    its exit code (0: every bad input refused as it must be)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *BAD_INPUTS, "-q", "-p", "no:randomly", "-x"],
        cwd=ROOT,
        env=os.environ | {FUZZ_SCALE_ENV: str(scale)},
        capture_output=True,
        text=True,
        check=False,
    )
    lines = done.stdout.strip().splitlines() or [done.stderr.strip()]
    if done.returncode:
        print(done.stdout[-4000:], file=sys.stderr)
    return lines[-1], done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=600, help="random instances")
    parser.add_argument("--simulations", type=int, default=500, help="random simulations")
    parser.add_argument(
        "--bad-inputs",
        type=int,
        default=0,
        metavar="SCALE",
        help="also run the bad-input corpus, each hypothesis test drawing SCALE times its "
        "CI examples (default 0: not run)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of every draw")
    parser.add_argument("--page", type=Path, default=None, help="also write a results page")
    args = parser.parse_args()
    command = command_line("fuzz.py", sys.argv[1:])
    with tee_page(args.page, "Fuzzing: solvers, bounds, simulator and bad inputs", command):
        began = time.perf_counter()
        tally = _solvers(args.instances, args.seed)
        counts, problems = _simulations(args.simulations, args.seed)
        print(f"offline solvers and bounds (seed {args.seed})")
        print(tally.table())
        print(f"\nsimulator (seed {args.seed})")
        print("\n".join(f"{name:<17} {value:>8,}" for name, value in counts.items()))
        code = 0
        if args.bad_inputs:
            summary, code = _bad_inputs(args.bad_inputs)
            print(f"\nbad inputs ({', '.join(BAD_INPUTS)}; {args.bad_inputs}x examples)")
            print(summary)
        print(f"\n{time.perf_counter() - began:.0f} s")
        for problem in (tally.problems + problems)[:20]:
            print(problem)
    return 1 if tally.broken or counts["broken"] or code else 0


if __name__ == "__main__":
    sys.exit(main())
