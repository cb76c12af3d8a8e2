"""Moves per second and objective of ``local-search`` on the mixed n = 1,000 backlog.

Run: ``python benchmarks/local_search_speed.py [--seconds 10 60] [--seeds 3]
[--instance instances/mixed-n1000.json]``. Starting from the best rule's order, runs
:func:`~schedlab.offline.solvers.local_search.improve_order` for each time budget and
setting (first improvement, exact: ``screen=None``; first improvement, screened: the
default ``screen=8``; late acceptance, exact, ``--late-window`` positions) and prints
medians over seeds of: moves evaluated per second, positions decoded per move
(a full decode is ``n``), evaluations that stopped where the runs met, and the strict
objective reached. Target (issue 13): >= 30,000 exact moves/s (``screen=None``).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from schedlab.budget import Budget
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance_io import read_instance
from schedlab.offline.solvers.local_search import SearchSettings, best_start_order, improve_order

ROOT = Path(__file__).resolve().parent.parent
TARGET_EXACT = 30_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, nargs="+", default=[10.0, 60.0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--instance", type=Path, default=ROOT / "instances/mixed-n1000.json")
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--late-window", type=int, default=5)
    args = parser.parse_args()
    inst = read_instance(args.instance)
    start, name = best_start_order(inst)
    base = int((list_schedule(inst, start) + inst.output).sum())
    print(f"{inst.name}: n = {inst.n}, start order {name}, strict objective {base}")
    settings = (
        ("first", None, args.window),
        ("first", 8, args.window),
        ("late", None, args.late_window),
    )
    print(
        "seconds, strategy, screen, window, median moves/s, median decoded/move, "
        f"median met, median objective (target: >= {TARGET_EXACT:,} moves/s with screen None)"
    )
    for seconds in args.seconds:
        for strategy, screen, window in settings:
            rows = [
                improve_order(
                    inst,
                    start,
                    SearchSettings(strategy, window=window, screen=screen, max_moves=None),
                    budget=Budget(seconds),
                    seed=seed,
                )[1]
                for seed in range(args.seeds)
            ]
            print(
                f"{seconds:g}, {strategy}, {screen}, {window}, "
                f"{statistics.median(r['moves_per_s'] for r in rows):.0f}, "
                f"{statistics.median(r['decoded_per_move'] for r in rows):.0f}, "
                f"{statistics.median(r['met'] for r in rows):.0f}, "
                f"{statistics.median(r['objective_strict'] for r in rows):.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
