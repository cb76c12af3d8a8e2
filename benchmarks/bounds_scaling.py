"""Certified gaps on mixed backlogs: volume, LP (column generation) and Lagrangian bounds.

Targets (issue 3): mixed ``n = 200`` (the shipped instance and fresh seeds): best bound
within 2 minutes certifying the best heuristic within 2%; mixed ``n = 1,000`` within 10
minutes: report the certified gap; ``n = 1,000`` and ``10,000``: a bound clearly tighter
than the volume bound.

For every instance it prints the volume bound, each Lagrangian-type bound with its
runtime, the best heuristic's objective (rules, plus the other registered heuristics
with ``--heuristic-time-limit``) and the certified gap ``best heuristic / best bound - 1``.

Run: ``python benchmarks/bounds_scaling.py --sizes 200,1000 --time-limit 120``
(``--time-limit`` is per bound method and instance).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from schedlab.bounds import LARGE_N, lower_bound
from schedlab.instance import Instance
from schedlab.instance_io import read_instance
from schedlab.solve import available_solvers, solve
from schedlab.solvers.rules import RULES
from schedlab.workloads import mixed_backlog

SHIPPED = Path(__file__).resolve().parents[1] / "instances"
EXTRA_HEURISTICS = ("local-search", "sorted-f", "sorted-lp", "lp-swap")


def _instances(sizes: list[int], seeds: int) -> list[Instance]:
    out = []
    for n in sizes:
        shipped = SHIPPED / f"mixed-n{n}.json"
        if shipped.exists():
            out.append(read_instance(shipped))
        out += [mixed_backlog(n, seed=100 + k) for k in range(seeds)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200,1000")
    parser.add_argument("--seeds", type=int, default=1, help="fresh seeds per size")
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--heuristic-time-limit", type=float, default=30.0)
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    known = available_solvers()
    extra = [h for h in EXTRA_HEURISTICS if h in known]
    for inst in _instances(sizes, args.seeds):
        rules = {h: solve(inst, h, bound=None).objective for h in RULES}
        for h in extra if inst.n <= 2000 else ():
            rules[h] = solve(inst, h, bound=None, time_limit=args.heuristic_time_limit).objective
        best_name = min(rules, key=rules.__getitem__)
        best = rules[best_name]
        volume = lower_bound(inst, "volume").value
        methods = ["lagrangian"] + (["lp"] if inst.n < LARGE_N else [])
        print(f"{inst.name}: n = {inst.n}, best heuristic {best_name} = {best:,}")
        print(f"  volume      {volume:>16,.0f}  gap {best / volume - 1:7.2%}")
        top = volume
        for method in methods:
            began = time.perf_counter()
            bound = lower_bound(inst, method, time_limit=args.time_limit)
            took = time.perf_counter() - began
            top = max(top, bound.value)
            print(
                f"  {method:<11} {bound.value:>16,.0f}  gap {best / bound.value - 1:7.2%}  "
                f"+{bound.value / volume - 1:6.2%} vs volume  {took:6.1f} s  {bound.status}"
            )
        print(f"  certified gap of the best heuristic: {best / top - 1:.2%}", flush=True)


if __name__ == "__main__":
    main()
