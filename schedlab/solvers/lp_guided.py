"""Solvers guided by the time-indexed LP relaxation (Wang, Ye, Zhou, arXiv 2508.06133).

Both use :func:`schedlab.bounds.time_indexed.lp_relaxation`, whose fractional solution
gives every request a mean start ``bar p_i = sum_t t x_{i,t}``, and whose certified value
is returned as the solver's lower bound.

``sorted-lp``
    Priority order by increasing ``bar p_i`` (ties by ``o_i``, then index), decoded by
    :func:`~schedlab.list_scheduling.list_schedule` strict and backfilling; the better
    schedule is returned. The list-scheduling analogue of LP-order rounding for total
    completion time (Hall, Schulz, Shmoys, Wein 1997).
``lp-swap``
    Starts from the ``sorted-lp`` order and repairs it where it disagrees most with the
    LP: requests are visited by decreasing *lateness* ``p_i - bar p_i`` (decoded start
    minus LP mean start); each is tried ``1, 2, 4, ...`` positions earlier (up to
    ``window``), and the first insertion that lowers the strict-decode objective is
    kept. Passes repeat until one changes nothing or the time is up. Moves are
    evaluated incrementally with :class:`~schedlab.solvers.local_search.OrderEvaluator`
    on backlogs, by full decoding otherwise.

Half of ``time_limit`` (default 10 s when ``None``) goes to the LP.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from schedlab.bounds.time_indexed import LPRelaxation, lp_relaxation
from schedlab.instance import Instance
from schedlab.list_scheduling import decode_best, list_schedule
from schedlab.result import SolverOutput
from schedlab.schedule import total_latency
from schedlab.solvers import register_solver
from schedlab.solvers.local_search import OrderEvaluator

__all__ = ["lp_order", "lp_swap_repair"]


def lp_order(instance: Instance, relaxation: LPRelaxation) -> np.ndarray:
    """Requests by increasing LP mean start, ties by output length then index."""
    mean = np.round(np.asarray(relaxation.mean_start, dtype=float), 9)
    return np.lexsort((np.arange(instance.n), instance.output, mean))


def _relax(instance: Instance, time_limit: float) -> LPRelaxation:
    return lp_relaxation(instance, time_limit=time_limit)


def _lp_stats(relaxation: LPRelaxation) -> dict[str, Any]:
    return {
        "lp_status": relaxation.status,
        "lp_value": relaxation.value,
        "lp_runtime_s": relaxation.runtime,
    }


def lp_swap_repair(
    instance: Instance,
    order: np.ndarray,
    mean_start: np.ndarray,
    *,
    time_limit: float,
    window: int = 64,
) -> tuple[np.ndarray, dict[str, int]]:
    """The LP-guided insertion repair of ``lp-swap`` (module docs)."""
    deadline = time.perf_counter() + time_limit
    current = [int(i) for i in order]
    backlog = int(instance.arrival.max()) == 0
    evaluator = OrderEvaluator(instance, np.array(current)) if backlog else None
    value = total_latency(instance, list_schedule(instance, current))
    tried = accepted = passes = 0
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        passes += 1
        starts = list_schedule(instance, current)
        lateness = starts - np.asarray(mean_start)
        for i in np.argsort(-lateness, kind="stable").tolist():
            if lateness[i] <= 0 or time.perf_counter() >= deadline:
                break
            pos = current.index(i)
            step = 1
            while step <= min(window, pos):
                tried += 1
                candidate = list(current)
                candidate.insert(pos - step, candidate.pop(pos))
                if evaluator is not None:
                    replay = evaluator.try_move(candidate, pos - step, pos, None)
                    better = replay is not None
                else:
                    total = total_latency(instance, list_schedule(instance, candidate))
                    better = total < value
                if better:
                    current = candidate
                    if evaluator is not None and replay is not None:
                        evaluator.accept(candidate, replay)
                        value = evaluator.objective()
                    else:
                        value = total
                    accepted += 1
                    improved = True
                    break
                step *= 2
    return np.array(current, dtype=np.int64), {
        "tried": tried,
        "accepted": accepted,
        "passes": passes,
    }


@register_solver("sorted-lp")
def sorted_lp(
    instance: Instance, *, time_limit: float | None = None, seed: int = 0, **options: Any
) -> SolverOutput:
    """List scheduling in order of LP mean start times (module docs). ``seed`` unused."""
    if options:
        raise TypeError(f"sorted-lp: unknown option(s) {', '.join(sorted(options))}")
    relaxation = _relax(instance, 10.0 if time_limit is None else 0.9 * time_limit)
    starts, stats = decode_best(instance, lp_order(instance, relaxation))
    return SolverOutput(
        starts, lower_bound=relaxation.value, stats={**stats, **_lp_stats(relaxation)}
    )


@register_solver("lp-swap")
def lp_swap(
    instance: Instance,
    *,
    time_limit: float | None = None,
    seed: int = 0,
    window: int = 64,
    **options: Any,
) -> SolverOutput:
    """Sorted-LP followed by the LP-guided insertion repair (module docs). ``seed`` unused."""
    if options:
        raise TypeError(f"lp-swap: unknown option(s) {', '.join(sorted(options))}")
    began = time.perf_counter()
    budget = 10.0 if time_limit is None else time_limit
    relaxation = _relax(instance, budget / 2)
    left = max(0.85 * budget - (time.perf_counter() - began), 1e-3)
    order, repair = lp_swap_repair(
        instance,
        lp_order(instance, relaxation),
        relaxation.mean_start,
        time_limit=left,
        window=window,
    )
    starts, stats = decode_best(instance, order)
    return SolverOutput(
        starts,
        lower_bound=relaxation.value,
        stats={**stats, **repair, **_lp_stats(relaxation)},
    )
