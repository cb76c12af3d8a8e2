"""Speed of every list-scheduling rule on mixed backlogs of 10,000 and 100,000 requests.

Targets (issue 2): each rule on 100,000 requests in <= 5 s, and going from 10,000 to
100,000 requests costs <= 15x the time. Prints the median of ``--repeats`` runs and
the ratio; run ``python benchmarks/list_scheduling_speed.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from schedlab import solve
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.solvers.rules import RULES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    instances = {n: mixed_backlog(n, seed=1) for n in sizes}
    print(f"{'rule':<11}" + "".join(f"{f'n={n:,} (s)':>16}" for n in sizes) + f"{'ratio':>8}")
    for rule in RULES:
        medians = []
        for n in sizes:
            times = []
            for _ in range(args.repeats):
                began = time.perf_counter()
                solve(instances[n], rule, bound=None)
                times.append(time.perf_counter() - began)
            medians.append(statistics.median(times))
        ratio = medians[-1] / medians[0]
        print(f"{rule:<11}" + "".join(f"{m:>16.3f}" for m in medians) + f"{ratio:>8.1f}")


if __name__ == "__main__":
    main()
