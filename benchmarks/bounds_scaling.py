"""Certified gaps on mixed backlogs: volume, mean-busy-time, fluid- and completion-spacing,
Lagrangian, LP and ``best``.

Targets (issue 3): mixed ``n = 200`` (the shipped instance and fresh seeds): best bound
within 2 minutes certifying the best heuristic within 2%; mixed ``n = 1,000`` within 10
minutes: report the certified gap; ``n = 1,000`` and ``10,000``: a bound clearly tighter
than the volume bound.

For every instance it prints the volume bound, each chosen bound method with its value,
its gain over the volume bound and its runtime, the best heuristic's objective (rules,
plus the other registered heuristics up to ``--heuristic-max-n`` requests, each given
``--heuristic-time-limit``) and the certified gap ``best heuristic / best bound - 1``.
``best`` is :func:`schedlab.offline.bounds.lower_bound` with ``method="best"``: all of its
methods within ``--time-limit`` together, as ``solve`` and ``compare`` use it; the other
methods get ``--time-limit`` each.

``completion-spacing`` evaluates every start of every request, so it runs only up to
``--spacing-max-n`` requests (``best`` itself uses it up to ``SPACING_MAX_N``).

Run: ``python benchmarks/bounds_scaling.py --sizes 200,1000 --time-limit 120``;
``--sizes 10000 --first-seed 0 --no-shipped`` is ``mixed_backlog(10000, seed=0)``.
Timings are wall seconds on a shared machine: noisy.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds import LARGE_N, lower_bound
from schedlab.offline.instance import Instance
from schedlab.offline.instance_io import read_instance
from schedlab.offline.solve import available_solvers, solve
from schedlab.offline.solvers.rules import RULES
from schedlab.progress import Progress

SHIPPED = Path(__file__).resolve().parents[1] / "instances"
EXTRA_HEURISTICS = ("local-search", "sorted-f", "sorted-lp", "lp-swap")


def _instances(sizes: list[int], seeds: int, first_seed: int, shipped: bool) -> list[Instance]:
    out = []
    for n in sizes:
        path = SHIPPED / f"mixed-n{n}.json"
        if shipped and path.exists():
            out.append(read_instance(path))
        out += [mixed_backlog(n, seed=first_seed + k) for k in range(seeds)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200,1000")
    parser.add_argument("--seeds", type=int, default=1, help="fresh seeds per size")
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--no-shipped", action="store_true", help="skip instances/mixed-n*")
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--heuristic-time-limit", type=float, default=30.0)
    parser.add_argument("--heuristic-max-n", type=int, default=2000)
    parser.add_argument(
        "--spacing-max-n", type=int, default=1000, help="run completion-spacing up to this n"
    )
    parser.add_argument(
        "--methods", default="mean-busy-time,fluid-spacing,completion-spacing,lagrangian,lp,best"
    )
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    known = available_solvers()
    extra = [h for h in EXTRA_HEURISTICS if h in known]
    chosen = args.methods.split(",")
    for inst in _instances(sizes, args.seeds, args.first_seed, not args.no_shipped):
        rules = {h: solve(inst, h, bound=None).objective for h in RULES}
        for h in extra if inst.n <= args.heuristic_max_n else ():
            rules[h] = solve(inst, h, bound=None, time_limit=args.heuristic_time_limit).objective
        best_name = min(rules, key=rules.__getitem__)
        best = rules[best_name]
        volume = lower_bound(inst, "volume").value
        methods = [
            m
            for m in chosen
            if (m != "lp" or inst.n < LARGE_N)
            and (m != "completion-spacing" or inst.n <= args.spacing_max_n)
        ]
        print(f"{inst.name}: n = {inst.n}, best heuristic {best_name} = {best:,}")
        print(f"  {'volume':<30} {volume:>16,.0f}  gap {best / volume - 1:7.2%}")
        top = volume
        for method in methods:
            began = time.perf_counter()
            with Progress(f"bound {method}") as bar:
                bar.doing(f"n = {inst.n}")
                bound = lower_bound(inst, method, time_limit=args.time_limit)
            took = time.perf_counter() - began
            top = max(top, bound.value)
            label = f"best({bound.method})" if method == "best" else method
            print(
                f"  {label:<30} {bound.value:>16,.0f}  gap {best / bound.value - 1:7.2%}  "
                f"+{bound.value / volume - 1:6.3%} vs volume  {took:7.2f} s  {bound.status}"
            )
        print(f"  certified gap of the best heuristic: {best / top - 1:.2%}", flush=True)


if __name__ == "__main__":
    main()
