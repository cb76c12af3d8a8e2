"""Each bound method's estimated work against the work it counts and its seconds (issue 54).

``best`` (:func:`schedlab.offline.bounds.lower_bound`) plans by the estimates of
:mod:`schedlab.offline.bounds.cost` and stops every built-in method at its estimate, so
the value depends only on the instance. This script runs every method ``best`` chooses,
one at a time, on random and degenerate instances (identical requests, ``M`` equal to the
largest request's peak, every request released at round 0, and mixed backlogs) and
prints, per method, its estimate, the work it counted (``stats["work"]``, else its
estimate), their ratio, its wall seconds and the nanoseconds per unit of work; then
``best`` itself: its value, the work it charged and counted against
:data:`~schedlab.offline.bounds.BEST_WORK`, and its seconds. The kept instance of issue
54 (105 identical requests, ``identical-105-staggered``) is the first row.

A second table solves the time-indexed LP (:func:`~schedlab.offline.bounds.time_indexed.
lp_relaxation`) of the first instance of each size and of a mixed backlog with the
restricted master's simplex as shipped (primal, :mod:`schedlab.offline.bounds.master`)
and with HiGHS's dual simplex instead: master solves, simplex iterations, value, seconds.

Run: ``python benchmarks/bound_budget.py`` (``--sizes 50,105,200``, ``--page
docs/bound-budget.md`` to write the results page); timings are wall seconds on a shared
machine: noisy.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds import BOUNDS, lower_bound, master
from schedlab.offline.bounds.time_indexed import LP_ROUNDS, lp_relaxation
from schedlab.offline.instance import Instance

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside it: results_page
from results_page import command_line, tee_page

#: HiGHS's ``simplex_strategy`` values compared: its dual simplex and its primal.
SIMPLEX = {"primal (shipped)": 4, "dual": 1}


def families(n: int, seed: int) -> list[Instance]:
    """The instances of size ``n``: identical, tight, released together, mixed."""
    rng = np.random.default_rng(seed)
    output = rng.integers(1, 40, n)
    prompt = rng.integers(0, 30, n)
    peak = int((prompt + output).max())
    k = np.arange(n)
    return [
        Instance.from_arrays(
            68, np.full(n, 19), np.full(n, 21), k % 21, f"identical-{n}-staggered"
        ),
        Instance.from_arrays(400, np.full(n, 100), np.full(n, 150), None, f"identical-{n}"),
        Instance.from_arrays(peak, prompt, output, rng.integers(0, 60, n), f"tight-{n}"),
        Instance.from_arrays(2 * peak, prompt, output, None, f"together-{n}"),
        mixed_backlog(n, seed=seed),
    ]


def measure(inst: Instance) -> None:
    """One line per method ``best`` plans for ``inst``, then ``best``'s."""
    best = lower_bound(inst)
    for name in best.stats["values"]:
        estimate = BOUNDS[name].work
        planned = 0.0 if estimate is None else estimate(inst)
        began = time.perf_counter()
        bound = lower_bound(inst, name)
        seconds = time.perf_counter() - began
        counted = float(bound.stats.get("work", planned))
        ratio = counted / planned if planned else 0.0
        per_unit = 1e9 * seconds / counted if counted else 0.0
        print(
            f"{inst.name:<24} {name:<19} {planned:>10.3g} {counted:>10.3g} {ratio:>6.2f} "
            f"{seconds:>8.2f} {per_unit:>8.1f}  {bound.value:>12,.0f}"
        )
    stats = best.stats
    print(
        f"{inst.name:<24} {'best':<19} {stats['work']:>10.3g} {stats['work_done']:>10.3g} "
        f"{stats['work_done'] / stats['work_budget']:>6.2f} {best.runtime:>8.2f} "
        f"{'':>8}  {best.value:>12,.0f} ({best.method}; out of reach: "
        f"{', '.join(stats['out_of_reach']) or 'none'})"
    )


@contextmanager
def simplex(strategy: int, iterations: list[int]) -> Iterator[None]:
    """Restricted masters made in the block use HiGHS's ``strategy``; each solve's
    simplex iterations are appended to ``iterations``."""
    made, solve = master.RestrictedMaster.__init__, master.RestrictedMaster.solve

    def init(self: master.RestrictedMaster, *args: object, **kwargs: object) -> None:
        made(self, *args, **kwargs)  # type: ignore[arg-type]
        self.highs.setOptionValue("simplex_strategy", strategy)

    def counted(self: master.RestrictedMaster, *args: object) -> str | None:
        reason = solve(self, *args)  # type: ignore[arg-type]
        iterations.append(max(self.highs.getInfo().simplex_iteration_count, 0))
        return reason

    master.RestrictedMaster.__init__ = init  # type: ignore[method-assign]
    master.RestrictedMaster.solve = counted  # type: ignore[method-assign]
    try:
        yield
    finally:
        master.RestrictedMaster.__init__ = made  # type: ignore[method-assign]
        master.RestrictedMaster.solve = solve  # type: ignore[method-assign]


def compare_simplex(inst: Instance) -> None:
    """One line per simplex strategy: the LP of ``inst`` as the ``lp`` bound runs it."""
    for name, strategy in SIMPLEX.items():
        iterations: list[int] = []
        with simplex(strategy, iterations):
            began = time.perf_counter()
            relax = lp_relaxation(inst, max_rounds=LP_ROUNDS)
            seconds = time.perf_counter() - began
        print(
            f"{inst.name:<24} {name:<17} {len(iterations):>6} {sum(iterations):>10,} "
            f"{relax.value:>14,.2f} {relax.status:>8} {seconds:>8.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,105,200", help="request counts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--page", type=Path, default=None, help="also write a results page")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    command = command_line("bound_budget.py", sys.argv[1:])
    with tee_page(args.page, "Bound budget: estimated and counted work", command):
        print(
            f"{'instance':<24} {'method':<19} {'estimate':>10} {'counted':>10} {'ratio':>6} "
            f"{'seconds':>8} {'ns/unit':>8}  {'value':>12}"
        )
        for n in sizes:
            for inst in families(n, args.seed):
                measure(inst)
        print(
            f"\n{'instance':<24} {'master simplex':<17} {'solves':>6} {'iterations':>10} "
            f"{'LP value':>14} {'status':>8} {'seconds':>8}"
        )
        for n in sizes:
            first, *_, mixed = families(n, args.seed)
            compare_simplex(first)
            compare_simplex(mixed)


if __name__ == "__main__":
    main()
