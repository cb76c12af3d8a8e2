"""Time to prove optimality with ``dp`` and ``cpsat`` on Jaillet-parameter instances.

Targets (issue 3): ``dp`` proves ``n = 10`` in <= 10 s; ``cpsat`` proves ``n = 10`` in
<= 20 s median; how far it gets at ``n = 12`` and ``15``. Prints, per solver and size,
the median wall time over ``--trials`` seeds (a run stopped by ``--time-limit`` counts
as the limit) and how many were proven.

Run: ``python benchmarks/exact_scaling.py --sizes 10,12,15 --trials 5 --time-limit 60``.
"""

from __future__ import annotations

import argparse
import statistics

from schedlab.offline.backlogs import jaillet_instance
from schedlab.offline.result import Status
from schedlab.offline.solve import solve
from schedlab.progress import Progress


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,12,15")
    parser.add_argument("--solvers", default="cpsat,dp")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--dp-max-n", type=int, default=10, help="skip dp above this size")
    args = parser.parse_args()
    for solver in args.solvers.split(","):
        for n in (int(x) for x in args.sizes.split(",")):
            if solver == "dp" and n > args.dp_max_n:
                continue
            times, proven = [], 0
            with Progress(f"{solver} n = {n}", args.trials) as bar:
                for seed in range(args.trials):
                    result = solve(
                        jaillet_instance(seed, n=n), solver, time_limit=args.time_limit, bound=None
                    )
                    ok = result.status == Status.OPTIMAL
                    proven += ok
                    times.append(result.runtime if ok else args.time_limit)
                    bar.step()
            print(
                f"{solver:<6} n = {n:>3}: median {statistics.median(times):6.2f} s, "
                f"max {max(times):6.2f} s, proven {proven}/{args.trials}",
                flush=True,
            )


if __name__ == "__main__":
    main()
