"""Moves per second and objective of ``local-search`` on the mixed n = 1,000 backlog.

Run: ``python benchmarks/local_search_speed.py [--seconds 10 60] [--seeds 3]
[--instance instances/mixed-n1000.json]``. Starting from the best rule's order, runs
:func:`~schedlab.offline.solvers.local_search.improve_order` for each time budget and
setting (first improvement, exact: ``screen=None``; first improvement, screened: the
default ``screen=8``; late acceptance, exact, ``--late-window`` positions) and prints
medians over seeds of: moves evaluated per second, positions decoded per move
(a full decode is ``n``), evaluations that stopped where the runs met, and the strict
objective reached. Target (issue 13): >= 30,000 exact moves/s (``screen=None``).

``--engines`` instead times the two engines of the ``late`` search (the compiled loop
and the reference ``engine="python"``) on the same moves: ``--moves`` moves (a work
budget, no time limit) of each setting (the default, screened; exact; the long
``lp-search`` setting of ``benchmarks/offline_targets.py``: window 3, history 5,000,
``screen=8``) on the shipped mixed n = 200 and n = 1,000, seeds ``0 .. --seeds - 1``,
the engines alternating; it prints the median microseconds per move of each, their
ratio, and whether every pair ended with the same order and counts.

``--spacings 1 4 8 16 32`` instead times ``--moves`` late-acceptance moves (window 5,
exact and screened) of the compiled engine on the shipped mixed n = 200 and n = 1,000
with the evaluator's states saved every so many positions (``checkpoint``; the default
is :func:`~schedlab.offline.solvers.order_evaluator.checkpoint_spacing`), and prints moves
per second (median of ``--seeds`` seeds), the objective reached by seed 0, and whether
seed 0 ended with the same order at every spacing: it must for exact moves; screened
ones may differ (see ``checkpoint_spacing``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from schedlab.budget import Budget
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.instance_io import read_instance
from schedlab.offline.solvers.local_search import SearchSettings, best_start_order, improve_order

ROOT = Path(__file__).resolve().parent.parent
TARGET_EXACT = 30_000


#: The ``late`` settings ``--engines`` times: label, options of :class:`SearchSettings`.
ENGINE_SETTINGS = (
    ("default (screen 8)", {}),
    ("exact", {"screen": None}),
    ("long lp-search", {"width": 3, "history": 5_000}),
)


def engines(moves: int, seeds: int) -> None:
    """The ``--engines`` table (module docs)."""
    print(
        "instance, setting, moves, median us/move compiled, median us/move python, "
        "python / compiled, same moves"
    )
    for name in ("mixed-n200", "mixed-n1000"):
        inst = read_instance(ROOT / f"instances/{name}.json")
        start, _ = best_start_order(inst)
        for label, options in ENGINE_SETTINGS:
            times: dict[str, list[float]] = {"compiled": [], "python": []}
            same = True
            for seed in range(seeds):
                ends = [
                    _timed(inst, start, SearchSettings(work=moves, engine=e, **options), seed)
                    for e in ("compiled", "python")
                ]
                for engine, (seconds, _) in zip(("compiled", "python"), ends, strict=True):
                    times[engine].append(1e6 * seconds / moves)
                same = same and ends[0][1] == ends[1][1]
            fast, slow = (statistics.median(times[e]) for e in ("compiled", "python"))
            print(
                f"{name}, {label}, {moves}, {fast:.1f}, {slow:.1f}, {slow / fast:.2f}, {same}",
                flush=True,
            )


def spacings(values: list[int], moves: int, seeds: int) -> None:
    """The ``--spacings`` table (module docs)."""
    print(
        "instance, screen, "
        + ", ".join(f"spacing {v} moves/s" for v in values)
        + ", objective (seed 0), same order at every spacing"
    )
    for name in ("mixed-n200", "mixed-n1000"):
        inst = read_instance(ROOT / f"instances/{name}.json")
        start, _ = best_start_order(inst)
        for screen in (None, 8):
            rates, ends = [], []
            for spacing in values:
                settings = SearchSettings(screen=screen, work=moves, checkpoint=spacing)
                runs = [_timed(inst, start, settings, seed) for seed in range(seeds)]
                rates.append(statistics.median(moves / seconds for seconds, _ in runs))
                order, objective = runs[0][1][0], runs[0][1][3]
                ends.append((order, objective))
            same = all(end == ends[0] for end in ends)
            print(
                f"{name}, {screen}, "
                + ", ".join(f"{rate:,.0f}" for rate in rates)
                + f", {ends[0][1]:,}, {same}",
                flush=True,
            )


def _timed(
    inst: Instance, start: np.ndarray, settings: SearchSettings, seed: int
) -> tuple[float, tuple]:
    """Seconds of one search, and what both engines must agree on."""
    improve_order(inst, start, SearchSettings(work=10, engine=settings.engine))  # warm
    began = time.perf_counter()
    order, stats = improve_order(inst, start, settings, seed=seed)
    seconds = time.perf_counter() - began
    same = ("moves", "accepted", "objective_strict", "met", "decoded_per_move")
    return seconds, (order.tolist(), *(stats[key] for key in same))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, nargs="+", default=[10.0, 60.0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--instance", type=Path, default=ROOT / "instances/mixed-n1000.json")
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--late-window", type=int, default=5)
    parser.add_argument("--engines", action="store_true")
    parser.add_argument("--moves", type=int, default=60_000)
    parser.add_argument("--spacings", type=int, nargs="+")
    args = parser.parse_args()
    if args.engines:
        engines(args.moves, args.seeds)
        return
    if args.spacings:
        spacings(args.spacings, args.moves, args.seeds)
        return
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
                    SearchSettings(strategy, width=window, screen=screen, work=None),
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
