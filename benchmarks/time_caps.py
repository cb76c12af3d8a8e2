"""How far past its wall-clock cap each heuristic solver and the ``best`` bound run.

``time_limit`` is an outer safety (:mod:`schedlab.budget`): a method checks it between
units of work and inside its longest ones, so it may overrun by at most one unit. This
script measures the overrun on large mixed backlogs, where one unit is longest: for each
size it builds ``mixed_backlog(n, seed=0)``, then times, one at a time in this process,

* ``solve(instance, solver, time_limit=cap, bound=None)`` for every solver that takes the
  instance (the exact ones refuse such sizes; the rules do not read the cap), the
  schedule's verification included;
* ``lower_bound(instance, "best", time_limit=cap)``.

It prints the seconds, their ratio to the cap and ``stopped_by``. On 2026-12-03 (2 shared
cores, one run at a time): at n = 100,000 and 5 s every solver took 4.8-5.6 s and
``best`` 5.2-5.8 s; at n = 1,000,000 and 10 s the solvers took 10.5-23 s (one
backfilling decode there takes 2-14 s and the LP's set-up about 5 s, neither cut) and
``best`` 0.2 s (``lagrangian`` is left out above 100,000 requests). Run:
``python benchmarks/time_caps.py`` (sizes 100,000 with a 5 s cap and 1,000,000 with
10 s: about ten minutes on a 2-core machine) or ``--sizes 100000:5``. The first call
loads the compiled kernels (about 1 s), counted in the first row.
"""

from __future__ import annotations

import argparse
import time

from schedlab import solve
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds import lower_bound

#: The solvers timed: every heuristic that reads the cap.
SOLVERS = (
    "local-search",
    "alns",
    "lp-search",
    "lp-swap",
    "sorted-lp",
    "receding-horizon",
    "sorted-f",
)


def _sizes(text: str) -> list[tuple[int, float]]:
    pairs = []
    for item in text.split(","):
        n, _, cap = item.partition(":")
        pairs.append((int(n), float(cap)))
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000:5,1000000:10", help="n:cap,...")
    parser.add_argument("--solvers", default=",".join(SOLVERS))
    args = parser.parse_args()
    for n, cap in _sizes(args.sizes):
        instance = mixed_backlog(n, seed=0)
        print(f"mixed_backlog({n:,}, seed=0), cap {cap:g} s", flush=True)
        for solver in args.solvers.split(","):
            began = time.perf_counter()
            result = solve(instance, solver, time_limit=cap, bound=None)
            wall = time.perf_counter() - began
            print(
                f"  {solver:<18} {wall:6.1f} s  {wall / cap:4.2f} x cap  "
                f"stopped_by={result.stats.get('stopped_by')}",
                flush=True,
            )
        began = time.perf_counter()
        bound = lower_bound(instance, "best", time_limit=cap)
        wall = time.perf_counter() - began
        print(
            f"  {'bound best':<18} {wall:6.1f} s  {wall / cap:4.2f} x cap  "
            f"stopped_by={bound.stats.get('stopped_by')}",
            flush=True,
        )


if __name__ == "__main__":
    main()
