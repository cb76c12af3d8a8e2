"""Receding-horizon scheduling over windows of requests (Wang, Ye, Zhou, arXiv 2508.06133).

The requests are taken in a base priority order (the best of the rules' and Sorted-F's
orders, see :func:`~schedlab.offline.solvers.local_search.best_start_order`). Repeatedly:

1. the *window* is the next ``window`` requests not yet committed (in base order);
2. the window is solved as a stand-alone backlog (releases are ignored there) with
   memory ``M`` by an exact solver of :data:`WINDOW_SOLVERS`, called directly (``dp``
   unless ``window_solver`` names another), to proven optimality: a window of a few
   requests takes milliseconds, so the method is deterministic;
3. the window's requests are ranked by their start in that optimal sub-schedule (ties
   by output length) and the first ``commit`` of them are appended to the global order;
   the rest go back to the front of the queue and the window rolls on.

The global order is decoded by :func:`~schedlab.offline.decoder.list_schedule`, strict
and backfilling (unless the wall-clock cap has passed), and the better schedule is
returned. The window model is exact for the
window in isolation; it does not see the memory still held by requests committed
earlier, so the method is a heuristic (no guarantee). It reuses the exact solvers of the
package rather than a model of its own. Under a wall-clock cap each window gets what is
left of it, and once the cap passes the rest of the base order is kept as it is
(``stats["stopped_by"] == "time_limit"``). Windows whose outputs may add up to more than
their solver takes (:data:`WINDOW_ROUNDS`) are refused before the first is solved.

Work and memory: the windows share one work budget, ``work``, in their solver's own
unit (:data:`WINDOW_WORK`: ``dp``'s expansions, ``brute-force``'s nodes, ``cpsat``'s
deterministic time), by default about a minute in all; each window may use what is left
of it, and once it is spent the rest of the base order is kept as it is
(``stopped_by == "work"``). Each window's solver runs under the memory budget of the
call (``dp`` counts its states as they grow and stops at it); ``stats["window_stops"]``
counts the windows each limit stopped, and a window stopped by memory makes
``stopped_by`` ``"memory"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from schedlab.budget import UNLIMITED, Budget, stopped_by
from schedlab.errors import InputError, UnknownNameError
from schedlab.offline.decoder import decode_best
from schedlab.offline.instance import Instance
from schedlab.offline.result import SolverOutput, Status
from schedlab.offline.solvers.brute_force import MAX_REQUESTS as BRUTE_FORCE_MAX
from schedlab.offline.solvers.brute_force import MAX_ROUNDS as BRUTE_FORCE_ROUNDS
from schedlab.offline.solvers.brute_force import brute_force
from schedlab.offline.solvers.contract import SolverFn
from schedlab.offline.solvers.cpsat import MAX_INTERVALS, solve_cpsat
from schedlab.offline.solvers.dp import MAX_DP_ROUNDS, solve_dp
from schedlab.offline.solvers.local_search import best_start_order

__all__ = [
    "WINDOW_ROUNDS",
    "WINDOW_SOLVERS",
    "WINDOW_WORK",
    "WindowWork",
    "receding_horizon",
    "receding_order",
]

#: The exact solvers a window may use, by solver name.
WINDOW_SOLVERS: dict[str, SolverFn] = {
    "dp": solve_dp,
    "cpsat": solve_cpsat,
    "brute-force": brute_force,
}

#: The most rounds a window's outputs may add up to, by window solver: the size each
#: takes with its defaults (a window is a backlog, so that is dp's ``max_rounds`` and
#: cpsat's ``max_intervals``; brute-force's limit is on its rule's objective, at least
#: that sum, so it may still refuse a window below it).
WINDOW_ROUNDS: dict[str, int] = {
    "dp": MAX_DP_ROUNDS,
    "cpsat": MAX_INTERVALS,
    "brute-force": BRUTE_FORCE_ROUNDS,
}


class WindowWork(NamedTuple):
    """How a window solver's work is budgeted (module docs, "Work and memory")."""

    #: The entry of its ``stats`` that reports the work it did.
    done: str
    #: The budget over all windows by default, about a minute.
    default: float
    #: Whether the option takes an integer.
    integer: bool


#: The work budgets of the window solvers, by solver name.
WINDOW_WORK: dict[str, WindowWork] = {
    "dp": WindowWork("expanded", 30_000, True),  # expansions
    "cpsat": WindowWork("deterministic_time", 60.0, False),  # deterministic seconds
    "brute-force": WindowWork("nodes", 50_000, True),  # search nodes
}


def _window_solver(name: str, window: int, output: np.ndarray) -> Callable[..., SolverOutput]:
    """The window solver called ``name`` (a solver taking a ``work`` budget), once
    checked to take windows of ``window`` of requests with these outputs (the longest
    ones' included)."""
    if name not in WINDOW_SOLVERS:
        raise UnknownNameError("window solver", name, tuple(WINDOW_SOLVERS))
    if name == "brute-force" and window > BRUTE_FORCE_MAX:
        raise InputError(
            f"receding-horizon: brute-force takes windows of at most {BRUTE_FORCE_MAX} "
            f"requests, got window = {window}"
        )
    size = min(window, output.size)
    widest = int(np.sort(output)[-size:].sum())
    if widest > WINDOW_ROUNDS[name]:
        raise InputError(
            f"receding-horizon: a window of the {size} longest requests runs {widest:,} "
            f"rounds in all (sum of outputs), above the {WINDOW_ROUNDS[name]:,} that {name} "
            "takes; use a smaller window, or local-search or lp-search"
        )
    return WINDOW_SOLVERS[name]


def receding_order(
    instance: Instance,
    base: np.ndarray,
    *,
    window: int,
    commit: int,
    solver: str,
    budget: Budget,
    seed: int = 0,
    work: float | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """The global priority order built by the receding-horizon loop (module docs), its
    windows sharing ``work`` units of work (``None``: :data:`WINDOW_WORK`'s
    default for the solver)."""
    solve_window = _window_solver(solver, window, instance.output)
    budget_of = WINDOW_WORK[solver]
    left = budget_of.default if work is None else work
    queue = [int(i) for i in base]
    order: list[int] = []
    windows = optimal = 0
    stops: dict[str, int] = {}
    stopped = None
    while queue:
        if budget.expired() or left <= 0:
            stopped = "time_limit" if budget.expired() else "work"
            order.extend(queue)  # out of time or work: keep the base order for the rest
            break
        chunk = queue[:window]
        sub = Instance.from_arrays(
            instance.kv_tokens, instance.prompt[chunk], instance.output[chunk], name="window"
        )
        share = math.ceil(left) if budget_of.integer else left
        result = solve_window(sub, budget=budget, seed=seed, work=share)
        left -= result.stats.get(budget_of.done, 0)
        windows += 1
        optimal += result.status is Status.OPTIMAL
        if (reason := result.stats.get("stopped_by")) is not None:
            stops[reason] = stops.get(reason, 0) + 1
        ranked = np.lexsort((np.arange(len(chunk)), sub.output, result.starts))
        take = len(chunk) if len(queue) <= window else commit
        committed = [chunk[k] for k in ranked[:take].tolist()]
        order.extend(committed)
        kept = [chunk[k] for k in ranked[take:].tolist()]
        queue = kept + queue[window:]
    return np.array(order, dtype=np.int64), {
        "windows": windows,
        "windows_optimal": optimal,
        "window_stops": stops,
        "stopped_by": stopped_by(stopped, "memory" if "memory" in stops else None),
    }


def receding_horizon(
    instance: Instance,
    *,
    budget: Budget = UNLIMITED,
    seed: int = 0,
    window: int = 5,
    commit: int = 2,
    window_solver: str = "dp",
    work: float | None = None,
) -> SolverOutput:
    """Receding-horizon scheduling (module docs).

    Parameters
    ----------
    window
        Requests per window model (``>= 1``).
    commit
        Requests committed per window (``1 <= commit <= window``).
    window_solver
        Exact solver for the windows, a name of :data:`WINDOW_SOLVERS`.
    work
        The work budget of all windows together, in the window solver's unit
        (:data:`WINDOW_WORK`; ``None``: its default there, about a minute).

    Raises
    ------
    InputError
        On bad ``commit``, ``window`` or ``work``, or windows too large for their
        solver (:data:`WINDOW_ROUNDS`).
    UnknownNameError
        On an unknown ``window_solver``.
    """
    if not 1 <= commit <= window:
        raise InputError(f"receding-horizon: need 1 <= commit <= window, got {commit}, {window}")
    if work is not None and not work > 0:
        raise InputError(f"receding-horizon: work must be > 0, got {work}")
    _window_solver(window_solver, window, instance.output)  # refused before any work
    base, start = best_start_order(instance, budget=budget.share(0.25))
    order, stats = receding_order(
        instance,
        base,
        window=window,
        commit=commit,
        solver=window_solver,
        budget=budget.share(0.9),
        seed=seed,
        work=work,
    )
    starts, chosen = decode_best(instance, order, budget=budget)
    return SolverOutput(
        starts, stats={**stats, "base": start, "window_solver": window_solver, **chosen}
    )
