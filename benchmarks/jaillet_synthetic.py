"""MC-SF against proven optima and certified bounds on Jaillet et al.'s synthetic protocol.

Jaillet et al. ("Online Scheduling for LLM Inference with KV Cache Constraints", arXiv
2502.07115, Gurobi): all requests at time 0, ``M ~ U[30, 50]``, ``s ~ U[1, 5]``,
``o ~ U[1, M - s]``, ``n ~ U[40, 60]``, 200 trials; MC-SF / optimum = 1.005 on average,
worst 1.074, 114/200 exactly optimal. Generator: :func:`schedlab.workloads.jaillet_instance`.

(a) ``n = --small-n`` (default 10): CP-SAT proves the optimum; MC-SF / OPT mean, worst
    and exactly-optimal count over the proven trials.
(b) ``n ~ U[40, 60]``: CP-SAT with ``--time-limit`` seconds, warm-started from the best
    rule; "best found" = least objective of CP-SAT and every rule, "best bound" = the
    largest of CP-SAT's proven bound and ``lower_bound(..., "best")``. Reports MC-SF /
    best found and best found / best bound.

Run: ``python benchmarks/jaillet_synthetic.py --trials-small 30 --trials-large 20
--time-limit 20`` (about 10 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import statistics
import time

from schedlab.bounds import lower_bound
from schedlab.result import Status
from schedlab.solve import available_solvers, solve
from schedlab.solvers.rules import RULES
from schedlab.workloads import jaillet_instance

PUBLISHED = {"mean": 1.005, "worst": 1.074, "exact": "114/200"}


def _summary(ratios: list[float], label: str) -> str:
    if not ratios:
        return "no trials"
    equal = sum(1 for r in ratios if r <= 1 + 1e-12)
    return (
        f"mean {statistics.fmean(ratios):.4f}  worst {max(ratios):.4f}  "
        f"{label} {equal}/{len(ratios)}"
    )


def part_a(trials: int, n: int, time_limit: float, workers: int) -> None:
    ratios, times = [], []
    unproven = 0
    for seed in range(trials):
        inst = jaillet_instance(seed, n=n)
        exact = solve(inst, "cpsat", time_limit=time_limit, bound=None, num_workers=workers)
        times.append(exact.runtime)
        if exact.status != Status.OPTIMAL:
            unproven += 1
            continue
        mcsf = solve(inst, "mc-sf", bound=None).objective
        ratios.append(mcsf / exact.objective)
    print(f"(a) n = {n}, {trials} trials, CP-SAT limit {time_limit:g} s")
    print(f"    MC-SF / OPT: {_summary(ratios, 'exactly optimal')}  (unproven: {unproven})")
    print(f"    CP-SAT time: median {statistics.median(times):.2f} s, max {max(times):.2f} s")


def part_b(trials: int, time_limit: float, workers: int, seed0: int) -> None:
    mc_ratios, gap_ratios, proven = [], [], 0
    heuristics = [name for name in available_solvers() if name in RULES]
    for seed in range(seed0, seed0 + trials):
        inst = jaillet_instance(seed)
        exact = solve(inst, "cpsat", time_limit=time_limit, bound=None, num_workers=workers)
        found = min([exact.objective] + [solve(inst, h, bound=None).objective for h in heuristics])
        bound = max(
            exact.lower_bound or 0.0, lower_bound(inst, "best", time_limit=time_limit / 4).value
        )
        proven += found <= bound + 1e-6
        mc_ratios.append(solve(inst, "mc-sf", bound=None).objective / found)
        gap_ratios.append(found / bound)
    print(f"(b) n ~ U[40, 60], {trials} trials, CP-SAT limit {time_limit:g} s")
    print(f"    MC-SF / best found:      {_summary(mc_ratios, 'equal to best found')}")
    print(
        f"    best found / best bound: mean {statistics.fmean(gap_ratios):.4f}  "
        f"worst {max(gap_ratios):.4f}  proven optimal {proven}/{trials}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials-small", type=int, default=30)
    parser.add_argument("--small-n", type=int, default=10)
    parser.add_argument("--trials-large", type=int, default=20)
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per instance")
    parser.add_argument("--small-time-limit", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2, help="CP-SAT workers")
    parser.add_argument("--large-seed", type=int, default=1000, help="first seed of (b)")
    args = parser.parse_args()
    print(
        f"published (Jaillet et al., Gurobi, n ~ U[40,60], 200 trials): MC-SF / OPT mean "
        f"{PUBLISHED['mean']}, worst {PUBLISHED['worst']}, exactly optimal {PUBLISHED['exact']}"
    )
    began = time.perf_counter()
    if args.trials_small:
        part_a(args.trials_small, args.small_n, args.small_time_limit, args.workers)
    if args.trials_large:
        part_b(args.trials_large, args.time_limit, args.workers, args.large_seed)
    print(f"total {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
