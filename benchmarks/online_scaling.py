"""How the online policies' running time grows with the number of requests (issue 53).

Each policy of :data:`~schedlab.offline.online.policies.POLICIES` plays
``mixed_backlog(n, seed=1)`` with ``interval:0.5`` predictions (seed 1) through
:func:`schedlab.solve` (no bound), for each ``n`` of ``--sizes``; the median wall seconds
of ``--repeats`` runs, each size's time over the first size's, and the growth exponent
``log(t_n / t_first) / log(n / first)``. Targets (issue 53): ``a-min`` at 3,000 requests
at most 4 times its time at 1,000, and growth at most ``n^1.15`` from 1,000 to 10,000.

Run: ``python benchmarks/online_scaling.py`` (``--page docs/online-scaling.md`` writes the
results page); wall seconds on a shared machine: noisy.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

from schedlab import solve
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.online.policies import POLICIES

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside it: results_page
from results_page import command_line, tee_page


def seconds(name: str, n: int, repeats: int) -> float:
    """Median wall seconds of ``name`` on ``mixed_backlog(n, seed=1)``."""
    instance = mixed_backlog(n, seed=1)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        solve(instance, name, bound=None, predictions="interval:0.5", seed=1)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,3000,10000", help="request counts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--page", type=Path, default=None, help="also write a results page")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    command = command_line("online_scaling.py", sys.argv[1:])
    solve(mixed_backlog(50, seed=1), "a-min", bound=None)  # imports, outside the timing
    with tee_page(args.page, "Online policies: time against the number of requests", command):
        print(f"{'policy':<17}" + "".join(f"{n:>10,}" for n in sizes) + "   ratios, growth")
        for name in POLICIES:
            times = [seconds(name, n, args.repeats) for n in sizes]
            growth = [
                f"{t / times[0]:.2f}x (n^{math.log(t / times[0]) / math.log(n / sizes[0]):.2f})"
                for n, t in zip(sizes[1:], times[1:], strict=True)
            ]
            print(
                f"{name:<17}" + "".join(f"{t:>9.2f}s" for t in times) + "   " + ", ".join(growth),
                flush=True,
            )
        print(f"\nmedian of {args.repeats} runs; ratios and growth against n = {sizes[0]:,}")


if __name__ == "__main__":
    main()
