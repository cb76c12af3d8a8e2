"""Receding-horizon scheduling over windows of requests (Wang, Ye, Zhou, arXiv 2508.06133).

The requests are taken in a base priority order (the best of the rules' and Sorted-F's
orders, see :func:`~schedlab.offline.solvers.local_search.best_start_order`). Repeatedly:

1. the *window* is the next ``window`` requests not yet committed (in base order);
2. the window is solved as a stand-alone backlog (releases are ignored there) with
   memory ``M`` by an exact solver through :func:`schedlab.offline.solve` (``dp``, ``cpsat``
   or ``brute-force``, whichever is registered, in that preference, unless
   ``window_solver`` names one), with ``window_time_limit`` seconds;
3. the window's requests are ranked by their start in that optimal sub-schedule (ties
   by output length) and the first ``commit`` of them are appended to the global order;
   the rest go back to the front of the queue and the window rolls on.

The global order is decoded by :func:`~schedlab.offline.decoder.list_schedule`, strict
and backfilling, and the better schedule is returned. The window model is exact for the
window in isolation; it does not see the memory still held by requests committed
earlier, so the method is a heuristic (no guarantee). It reuses the exact solvers of the
package rather than a model of its own.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from schedlab.errors import SchedlabError, UnknownNameError
from schedlab.offline.decoder import decode_best
from schedlab.offline.instance import Instance
from schedlab.offline.result import SolverOutput
from schedlab.offline.solvers import SOLVERS, register_solver
from schedlab.offline.solvers.local_search import best_start_order

__all__ = ["WINDOW_SOLVERS", "receding_order"]

#: exact solvers tried for the window model, in order of preference
WINDOW_SOLVERS: tuple[str, ...] = ("dp", "cpsat", "brute-force")


def _window_solver(name: str | None, window: int) -> str:
    from schedlab.offline.solve import available_solvers

    available_solvers()  # imports every registered solver module
    if name is not None:
        if name not in SOLVERS:
            raise UnknownNameError("solver", name, list(SOLVERS))
        return name
    for candidate in WINDOW_SOLVERS:
        if candidate in SOLVERS and not (candidate == "brute-force" and window > 8):
            return candidate
    raise SchedlabError(
        f"receding-horizon: no exact window solver for window = {window} "
        f"(registered: {', '.join(sorted(SOLVERS))})"
    )


def receding_order(
    instance: Instance,
    base: np.ndarray,
    *,
    window: int,
    commit: int,
    solver: str,
    window_time_limit: float,
    deadline: float,
    seed: int = 0,
) -> tuple[np.ndarray, dict[str, Any]]:
    """The global priority order built by the receding-horizon loop (module docs)."""
    from schedlab.offline.solve import solve

    queue = [int(i) for i in base]
    order: list[int] = []
    windows = optimal = 0
    timed_out = False
    while queue:
        if time.perf_counter() >= deadline:
            timed_out = True
            order.extend(queue)  # out of time: keep the base order for the rest
            break
        chunk = queue[:window]
        sub = Instance.from_arrays(
            instance.memory, instance.prompt[chunk], instance.output[chunk], name="window"
        )
        left = max(min(window_time_limit, deadline - time.perf_counter()), 1e-3)
        result = solve(sub, solver, time_limit=left, seed=seed, bound=None)
        windows += 1
        optimal += str(result.status) == "OPTIMAL"
        ranked = np.lexsort((np.arange(len(chunk)), sub.output, result.starts))
        take = len(chunk) if len(queue) <= window else commit
        committed = [chunk[k] for k in ranked[:take].tolist()]
        order.extend(committed)
        kept = [chunk[k] for k in ranked[take:].tolist()]
        queue = kept + queue[window:]
    return np.array(order, dtype=np.int64), {
        "windows": windows,
        "windows_optimal": optimal,
        "timed_out": timed_out,
    }


@register_solver("receding-horizon")
def receding_horizon(
    instance: Instance,
    *,
    time_limit: float | None = None,
    seed: int = 0,
    window: int = 5,
    commit: int = 2,
    window_solver: str | None = None,
    window_time_limit: float = 1.0,
    **options: Any,
) -> SolverOutput:
    """Receding-horizon scheduling (module docs).

    Parameters
    ----------
    window
        Requests per window model (``>= 1``).
    commit
        Requests committed per window (``1 <= commit <= window``).
    window_solver
        Exact solver for the window; ``None``: the first registered of
        :data:`WINDOW_SOLVERS`.
    window_time_limit
        Seconds per window model.
    """
    if options:
        raise TypeError(f"receding-horizon: unknown option(s) {', '.join(sorted(options))}")
    if not 1 <= commit <= window:
        raise SchedlabError(
            f"receding-horizon: need 1 <= commit <= window, got {commit}, {window}"
        )
    began = time.perf_counter()
    deadline = began + (60.0 if time_limit is None else 0.9 * time_limit)
    solver = _window_solver(window_solver, window)
    base, start = best_start_order(instance)
    order, stats = receding_order(
        instance,
        base,
        window=window,
        commit=commit,
        solver=solver,
        window_time_limit=window_time_limit,
        deadline=deadline,
        seed=seed,
    )
    starts, chosen = decode_best(instance, order)
    return SolverOutput(starts, stats={**stats, "base": start, "window_solver": solver, **chosen})
