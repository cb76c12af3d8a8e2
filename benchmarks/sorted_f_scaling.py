"""Sorted-F speed at scale and Sorted-F vs FCFS on mixed backlogs.

Run: ``python benchmarks/sorted_f_scaling.py [--repeats 3]``. Prints, per size, the
median wall time of the fast batch selection and of the whole ``sorted-f`` solver, and
the total-latency ratio FCFS / Sorted-F on the same backlog, after one small solve
that loads the compiled kernels. Target (issue 13): the whole
``sorted-f`` solver on 10^6 requests in <= 10 s (``--sizes 1000000 --repeats 1``).
"""

from __future__ import annotations

import argparse
import statistics
import time

from schedlab import solve
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.solvers.sorted_f import sorted_f_batches

TARGET_S = {1_000_000: 10.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    print(
        "n, median fast selection s, median sorted-f s, batches, FCFS objective, "
        "sorted-f objective, FCFS / sorted-f, target sorted-f s"
    )
    # load the compiled kernels (numba's cache; compiling them is timed apart, by
    # ``benchmarks/list_scheduling_speed.py --compile``)
    solve(mixed_backlog(50, seed=0), "sorted-f", method="fast", bound=None)
    for n in args.sizes:
        inst = mixed_backlog(n, seed=0)
        select, whole = [], []
        for _ in range(args.repeats):
            began = time.perf_counter()
            batches, _ = sorted_f_batches(inst, method="fast")
            select.append(time.perf_counter() - began)
            result = solve(inst, "sorted-f", method="fast", bound=None)
            whole.append(result.runtime)
        fcfs = solve(inst, "fcfs", bound=None).objective
        print(
            f"{n}, {statistics.median(select):.2f}, {statistics.median(whole):.2f}, "
            f"{len(batches)}, {fcfs}, {result.objective}, {fcfs / result.objective:.3f}, "
            f"{f'<= {TARGET_S[n]:g}' if n in TARGET_S else '-'}",
            flush=True,
        )


if __name__ == "__main__":
    main()
