"""Solvers guided by the time-indexed LP relaxation (Wang, Ye, Zhou, arXiv 2508.06133).

All three use :func:`schedlab.offline.bounds.time_indexed.lp_relaxation`, whose fractional solution
gives every request a mean start ``bar p_i = sum_t t x_{i,t}``, and whose certified value
is returned as the solver's lower bound.

``sorted-lp``
    Priority order by increasing ``bar p_i`` (ties by ``o_i``, then index), decoded by
    :func:`~schedlab.offline.decoder.list_schedule` strict and backfilling; the better
    schedule is returned. The list-scheduling analogue of LP-order rounding for total
    completion time (Hall, Schulz, Shmoys, Wein 1997).
``lp-swap``
    Starts from the ``sorted-lp`` order and repairs it where it disagrees most with the
    LP: requests are visited by decreasing *lateness* ``p_i - bar p_i`` (decoded start
    minus LP mean start); each is tried ``1, 2, 4, ...`` positions earlier (up to
    ``window``), and the first insertion that lowers the strict-decode objective is
    kept. Passes repeat until one changes nothing or the time is up. Moves are
    evaluated incrementally with :class:`~schedlab.offline.solvers.local_search.OrderEvaluator`
    on backlogs, by full decoding otherwise.
``lp-search``
    ``lp-swap``'s repaired order, improved further by late-acceptance hill climbing
    (:func:`~schedlab.offline.solvers.local_search.improve_order` with ``strategy="late"``,
    moves within ``neighbourhood`` positions, exact incremental evaluation) for
    ``moves`` moves; the strict decode of the best order is then compacted by
    :func:`~schedlab.offline.solvers.left_shift.left_shift`, and the best of the strict, the
    left-shifted strict and the backfilling decodes is returned. With
    ``time_limit=None`` every phase runs to its end (LP to convergence, repair until a
    pass changes nothing, all ``moves``), so the result depends only on the instance
    and ``seed``. With a time limit, the LP gets a quarter of it, the repair runs until
    half of it has passed, and the search stops at nine tenths; a phase cut short makes
    the result depend on the machine's speed.

For ``sorted-lp`` and ``lp-swap``, half of ``time_limit`` (default 10 s when ``None``)
goes to the LP.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from schedlab.offline.bounds.time_indexed import LPRelaxation, lp_relaxation
from schedlab.offline.decoder import decode_best, list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.result import SolverOutput
from schedlab.offline.schedule import total_latency
from schedlab.offline.solvers import register_solver
from schedlab.offline.solvers.left_shift import left_shift
from schedlab.offline.solvers.local_search import OrderEvaluator, improve_order

__all__ = ["lp_order", "lp_swap_repair"]


def lp_order(instance: Instance, relaxation: LPRelaxation) -> np.ndarray:
    """Requests by increasing LP mean start, ties by output length then index."""
    mean = np.round(np.asarray(relaxation.mean_start, dtype=float), 9)
    return np.lexsort((np.arange(instance.n), instance.output, mean))


def _relax(instance: Instance, time_limit: float | None) -> LPRelaxation:
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
    time_limit: float | None,
    window: int = 64,
) -> tuple[np.ndarray, dict[str, int]]:
    """The LP-guided insertion repair of ``lp-swap`` (module docs); ``time_limit=None``:
    until a pass changes nothing."""
    deadline = math.inf if time_limit is None else time.perf_counter() + time_limit
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


@register_solver("lp-search")
def lp_search(
    instance: Instance,
    *,
    time_limit: float | None = None,
    seed: int = 0,
    window: int = 64,
    moves: int = 30_000,
    history: int = 150,
    neighbourhood: int = 5,
    **options: Any,
) -> SolverOutput:
    """``lp-swap``, then late-acceptance search and a left-shift pass (module docs).

    Parameters
    ----------
    time_limit
        Wall seconds (``None``: every phase runs to its end; see module docs).
    seed
        Seed of the search's moves.
    window
        ``lp-swap``'s repair window.
    moves
        Moves of the late-acceptance search.
    history
        Its late-acceptance list length.
    neighbourhood
        The second position of a move lies within this many positions of the first.
    """
    if options:
        raise TypeError(f"lp-search: unknown option(s) {', '.join(sorted(options))}")
    began = time.perf_counter()

    def until(share: float) -> float | None:
        """Seconds left until ``share`` of the time limit has passed (``None``: no limit)."""
        if time_limit is None:
            return None
        return max(share * time_limit - (time.perf_counter() - began), 1e-3)

    relaxation = _relax(instance, until(0.25))
    lp_done = time.perf_counter()
    order = lp_order(instance, relaxation)
    order, repair = lp_swap_repair(
        instance, order, relaxation.mean_start, time_limit=until(0.5), window=window
    )
    repaired = total_latency(instance, list_schedule(instance, order))
    repair_done = time.perf_counter()
    order, search = improve_order(
        instance,
        order,
        time_limit=until(0.9),
        seed=seed,
        strategy="late",
        window=neighbourhood,
        history=history,
        screen=None,
        max_moves=moves,
    )
    search_done = time.perf_counter()
    shifted, shift = left_shift(instance, list_schedule(instance, order))
    starts, stats = decode_best(instance, order, {"strict+left-shift": shifted})
    return SolverOutput(
        starts,
        lower_bound=relaxation.value,
        stats={
            **stats,
            **_lp_stats(relaxation),
            "repair": repair,
            "repaired_objective": repaired,
            "repair_s": repair_done - lp_done,
            "search": search,
            "search_s": search_done - repair_done,
            "left_shift": shift,
        },
    )
