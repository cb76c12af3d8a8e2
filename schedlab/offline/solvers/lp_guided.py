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
    Starts from the ``sorted-lp`` order (or from the best of the rules' and Sorted-F's
    orders,
    :func:`~schedlab.offline.solvers.local_search.best_start_order`, when its strict
    decode is better: so a relaxation cut short by the time limit costs no more than the
    rule) and repairs it where it disagrees most with the
    LP: requests are visited by decreasing *lateness* ``p_i - bar p_i`` (decoded start
    minus LP mean start); each is tried ``1, 2, 4, ...`` positions earlier (up to
    ``repair_width``), and the first insertion that lowers the strict-decode objective is
    kept. Passes repeat until one changes nothing or the time is up. Moves are
    evaluated incrementally with :class:`~schedlab.offline.solvers.order_evaluator.OrderEvaluator`
    on backlogs, by full decoding otherwise. The best of the repaired order's strict,
    left-shifted strict and backfilling decodes is returned
    (:func:`~schedlab.offline.solvers.left_shift.decode_compacted`).
``lp-search``
    ``lp-swap``'s repaired order (from the same better start), improved further by
    late-acceptance hill climbing
    (:func:`~schedlab.offline.solvers.local_search.improve_order` with ``strategy="late"``,
    moves within ``width`` positions, exact incremental evaluation unless
    ``screen`` is set) until ``idle`` moves pass without a new best, at most ``work``
    moves (module docs, "Work"); the strict decode of the best order is then
    compacted by :func:`~schedlab.offline.solvers.left_shift.left_shift`, and the best of
    the strict, the left-shifted strict and the backfilling decodes is returned.

    Exact moves by default: an exact move decodes about ``n - lo`` positions, some 2.5
    times the cost of a screened one at n = 1,000, yet long runs with exact moves ended
    lower (``docs/design.md``, "Decision record").

Work (:mod:`schedlab.budget`): the LP runs at most
:data:`~schedlab.offline.bounds.time_indexed.LP_ROUNDS` column-generation rounds, the
repair until a pass changes nothing, the search until ``idle`` moves have passed since
its best objective last fell (:data:`DEFAULT_IDLE`), and at most ``work`` moves (by
default :data:`DEFAULT_MOVES` on a backlog, :data:`RELEASE_MOVES` with release times); so
without a binding wall-clock cap the result depends only on the instance and ``seed``.

The search ends by itself because no fixed count fits every size: searches settle after
very different counts of moves on different sizes (``docs/design.md``, "Decision
record"). With release times every move is a full decode in Python, about ``n`` times
dearer, so there the cap is ``local-search``'s 60,000. A tiny instance with releases
stops after about 20,000 moves.

Under a cap the LP gets a quarter of it (``sorted-lp`` nine tenths, ``lp-swap`` half),
the repair runs until half of it has passed, and the search stops at nine tenths; a
phase cut short makes the result depend on the machine's speed, and
``stats["stopped_by"]`` says so. Once the cap has passed, the backfilling decode is left
out (:func:`~schedlab.offline.decoder.decode_best`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from schedlab.budget import UNLIMITED, Budget, stopped_by
from schedlab.offline.bounds.time_indexed import LP_ROUNDS, LPRelaxation, lp_relaxation
from schedlab.offline.decoder import decode_best, list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.result import SolverOutput
from schedlab.offline.schedule import total_latency
from schedlab.offline.solvers.contract import integer_option
from schedlab.offline.solvers.left_shift import decode_compacted
from schedlab.offline.solvers.local_search import SearchSettings, best_start_order, improve_order
from schedlab.offline.solvers.order_evaluator import OrderEvaluator

__all__ = ["DEFAULT_IDLE", "DEFAULT_MOVES", "RELEASE_MOVES", "lp_order", "lp_swap_repair"]

#: ``lp-search``'s default end: moves since the search's best last fell, and the most moves
#: on a backlog and with release times (module docs, "Work").
DEFAULT_IDLE, DEFAULT_MOVES, RELEASE_MOVES = 20_000, 1_000_000, 60_000


def lp_order(instance: Instance, relaxation: LPRelaxation) -> np.ndarray:
    """Requests by increasing LP mean start, ties by output length then index."""
    mean = np.round(np.asarray(relaxation.mean_start, dtype=float), 9)
    return np.lexsort((np.arange(instance.n), instance.output, mean))


def _relax(instance: Instance, budget: Budget) -> LPRelaxation:
    return lp_relaxation(instance, budget=budget, max_rounds=LP_ROUNDS)


def _start(instance: Instance, relaxation: LPRelaxation, budget: Budget) -> tuple[np.ndarray, str]:
    """The LP order, or the best of the rules' and Sorted-F's orders when its strict decode
    is better."""
    order = lp_order(instance, relaxation)
    rule_order, rule = best_start_order(instance, budget=budget)
    lp_value = total_latency(instance, list_schedule(instance, order))
    if total_latency(instance, list_schedule(instance, rule_order)) < lp_value:
        return rule_order, rule
    return order, "lp"


def _lp_stats(relaxation: LPRelaxation) -> dict[str, Any]:
    return {
        "lp_status": relaxation.status,
        "lp_value": relaxation.value,
        "lp_runtime_s": relaxation.runtime,
        "lp_stopped_by": relaxation.stats["stopped_by"],
    }


def lp_swap_repair(
    instance: Instance,
    order: np.ndarray,
    mean_start: np.ndarray,
    *,
    budget: Budget = UNLIMITED,
    repair_width: int = 64,
) -> tuple[np.ndarray, dict[str, Any]]:
    """The LP-guided insertion repair of ``lp-swap`` (module docs): passes until one
    changes nothing, or until ``budget``'s wall-clock cap."""
    current = [int(i) for i in order]
    backlog = int(instance.arrival.max()) == 0
    evaluator = OrderEvaluator(instance, np.array(current)) if backlog else None
    value = total_latency(instance, list_schedule(instance, current))
    tried = accepted = passes = 0
    improved, cut = True, False
    while improved and not cut:
        improved = False
        passes += 1
        starts = list_schedule(instance, current)
        lateness = starts - np.asarray(mean_start)
        for i in np.argsort(-lateness, kind="stable").tolist():
            cut = budget.expired()
            if lateness[i] <= 0 or cut:
                break
            pos = current.index(i)
            step = 1
            while step <= min(repair_width, pos):
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
        "stopped_by": "time_limit" if cut else None,
    }


def sorted_lp(instance: Instance, *, budget: Budget = UNLIMITED, seed: int = 0) -> SolverOutput:
    """List scheduling in order of LP mean start times (module docs). ``seed`` unused."""
    relaxation = _relax(instance, budget.share(0.9))
    starts, stats = decode_best(instance, lp_order(instance, relaxation), budget=budget)
    stats = {**stats, **_lp_stats(relaxation), "stopped_by": relaxation.stats["stopped_by"]}
    return SolverOutput(starts, lower_bound=relaxation.value, stats=stats)


def lp_swap(
    instance: Instance, *, budget: Budget = UNLIMITED, seed: int = 0, repair_width: int = 64
) -> SolverOutput:
    """Sorted-LP followed by the LP-guided insertion repair (module docs). ``seed`` unused.

    Raises
    ------
    InputError, InputTypeError
        If ``repair_width`` is not an integer >= 1.
    """
    repair_width = integer_option("lp-swap", "repair_width", repair_width, "", minimum=1)
    relaxation = _relax(instance, budget.share(0.5))
    order, start = _start(instance, relaxation, budget.share(0.1))
    order, repair = lp_swap_repair(
        instance,
        order,
        relaxation.mean_start,
        budget=budget.share(0.85),
        repair_width=repair_width,
    )
    starts, stats = decode_compacted(instance, order, budget=budget)
    stopped = stopped_by(
        relaxation.stats["stopped_by"], repair["stopped_by"], stats["left_shift"]["stopped_by"]
    )
    return SolverOutput(
        starts,
        lower_bound=relaxation.value,
        stats={**stats, **repair, **_lp_stats(relaxation), "start": start, "stopped_by": stopped},
    )


def lp_search(
    instance: Instance,
    *,
    budget: Budget = UNLIMITED,
    seed: int = 0,
    repair_width: int = 64,
    work: int | str = "auto",
    idle: int | None = DEFAULT_IDLE,
    history: int = 150,
    width: int = 5,
    screen: int | None = None,
) -> SolverOutput:
    """``lp-swap``, then late-acceptance search and a left-shift pass (module docs).

    Parameters
    ----------
    budget
        Wall-clock cap (none: every phase runs to its own end or its work budget; see
        module docs).
    seed
        Seed of the search's moves.
    repair_width
        ``lp-swap``'s repair: the most positions a request moves earlier (``>= 1``).
    work
        The search's work budget: moves of the late-acceptance search, at most
        (``"auto"``: :data:`DEFAULT_MOVES` on a backlog, :data:`RELEASE_MOVES` with
        release times).
    idle
        The search's own end: it stops once this many moves have passed since its best
        objective last fell (``None``: it runs its ``work``; module docs, "Work").
    history
        Its late-acceptance list length.
    width
        The second position of a move lies within this many positions of the first.
    screen
        First screening distance of a move's evaluation
        (:class:`~schedlab.offline.solvers.local_search.SearchSettings`; ``None``: exact).
    """
    if work == "auto":
        work = DEFAULT_MOVES if int(instance.arrival.max()) == 0 else RELEASE_MOVES
    work = integer_option("lp-search", "work", work, " or 'auto'", minimum=0)
    repair_width = integer_option("lp-search", "repair_width", repair_width, "", minimum=1)
    settings = SearchSettings(
        "late",
        width=width,
        history=history,
        screen=screen,
        work=work,
        idle=idle,
        solver="lp-search",
    )
    relaxation = _relax(instance, budget.share(0.25))
    order, start = _start(instance, relaxation, budget.share(0.1))
    lp_done = time.perf_counter()
    order, repair = lp_swap_repair(
        instance,
        order,
        relaxation.mean_start,
        budget=budget.share(1 / 3),
        repair_width=repair_width,
    )
    repaired = total_latency(instance, list_schedule(instance, order))
    repair_done = time.perf_counter()
    order, search = improve_order(instance, order, settings, budget=budget.share(0.8), seed=seed)
    search_done = time.perf_counter()
    starts, stats = decode_compacted(instance, order, budget=budget)
    return SolverOutput(
        starts,
        lower_bound=relaxation.value,
        stats={
            **stats,
            **_lp_stats(relaxation),
            "start": start,
            "repair": repair,
            "repaired_objective": repaired,
            "repair_s": repair_done - lp_done,
            "search": search,
            "search_s": search_done - repair_done,
            "stopped_by": stopped_by(
                relaxation.stats["stopped_by"],
                repair["stopped_by"],
                search["stopped_by"],
                stats["left_shift"]["stopped_by"],
            ),
        },
    )
