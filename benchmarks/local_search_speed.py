"""Moves per second of ``local-search`` on the mixed n = 1,000 backlog.

Run: ``python benchmarks/local_search_speed.py [--seconds 5] [--seeds 3]``. For each
evaluation setting (exact suffix replay, screened replay) prints the median over seeds
of candidate moves evaluated per second, of full suffix replays per second, and of the
objective reached, starting from the best rule's order.
"""

from __future__ import annotations

import argparse
import statistics

from schedlab.list_scheduling import list_schedule
from schedlab.solvers.local_search import best_start_order, improve_order
from schedlab.workloads import mixed_backlog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--n", type=int, default=1000)
    args = parser.parse_args()
    inst = mixed_backlog(args.n, seed=0)
    start, name = best_start_order(inst)
    base = int((list_schedule(inst, start) + inst.output).sum())
    print(f"n = {inst.n}, start order {name}, strict objective {base}")
    print("screen, window, median moves/s, median full replays/s, median objective")
    for screen, window in ((None, 50), (32, 50), (8, 10)):
        rates, fulls, values = [], [], []
        for seed in range(args.seeds):
            _, stats = improve_order(
                inst, start, time_limit=args.seconds, seed=seed, screen=screen, window=window
            )
            rates.append(stats["moves_per_s"])
            fulls.append(stats["full_evaluations"] / args.seconds)
            values.append(stats["objective_strict"])
        print(
            f"{screen}, {window}, {statistics.median(rates):.0f}, "
            f"{statistics.median(fulls):.0f}, {statistics.median(values):.0f}"
        )


if __name__ == "__main__":
    main()
