"""One entry point for every solver: :func:`solve`."""

from __future__ import annotations

import math
import time
from typing import Any

from schedlab.errors import SchedlabError, UnknownNameError
from schedlab.offline.bounds import Bound, lower_bound
from schedlab.offline.instance import Instance
from schedlab.offline.result import Result, Status, relative_gap
from schedlab.offline.schedule import Schedule
from schedlab.offline.solvers import SOLVERS
from schedlab.offline.verify import verify

__all__ = ["SolverError", "available_solvers", "solve"]


class SolverError(SchedlabError, RuntimeError):
    """A solver returned a schedule that the independent verifier rejects (a bug)."""


def available_solvers() -> list[str]:
    """Names accepted by :func:`solve`, sorted."""
    _load_builtin()
    return sorted(SOLVERS)


def check_time_limit(time_limit: float | None) -> float | None:
    """Return ``time_limit`` if it is ``None`` or a positive finite number of seconds."""
    if time_limit is None:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, int | float):
        raise SchedlabError(f"time_limit: expected seconds, got {time_limit!r}")
    if not math.isfinite(time_limit) or time_limit <= 0:
        raise SchedlabError(f"time_limit: must be a positive number of seconds, got {time_limit}")
    return float(time_limit)


def solve(
    instance: Instance,
    solver: str = "mc-sf",
    *,
    time_limit: float | None = None,
    seed: int = 0,
    bound: str | Bound | None = "best",
    **options: Any,
) -> Result:
    """Solve ``instance`` with the named solver and certify the result.

    Parameters
    ----------
    instance
        The instance.
    solver
        A name from :func:`available_solvers`.
    time_limit
        Wall seconds for the solver (and, separately, for the bound); ``None``: none.
    seed
        Seed of every random choice; the same seed gives the same result.
    bound
        ``"best"`` or another :func:`~schedlab.offline.bounds.lower_bound` method, a precomputed
        :class:`~schedlab.offline.bounds.Bound`, or ``None`` for no bound.
    **options
        Solver-specific options.

    Returns
    -------
    Result
        With a verified schedule. Status is ``OPTIMAL`` when the solver proved it or
        the objective meets the lower bound.

    Raises
    ------
    UnknownNameError
        (a ``ValueError``) for an unknown solver name; the message lists the known ones.
    SolverError
        If the solver's schedule fails verification.
    """
    _load_builtin()
    if solver not in SOLVERS:
        raise UnknownNameError("solver", solver, list(SOLVERS))
    time_limit = check_time_limit(time_limit)
    began = time.perf_counter()
    output = SOLVERS[solver](instance, time_limit=time_limit, seed=seed, **options)
    runtime = time.perf_counter() - began
    schedule = Schedule(instance, output.starts)
    problems = verify(instance, schedule.starts)
    if problems:
        raise SolverError(f"{solver} returned an infeasible schedule: {'; '.join(problems[:5])}")
    stats = dict(output.stats)
    if isinstance(bound, str):
        bound = lower_bound(instance, bound, time_limit=time_limit)
    best = output.lower_bound
    if bound is not None:
        stats["bound"] = {"method": bound.method, "value": bound.value, "runtime_s": bound.runtime}
        best = bound.value if best is None else max(best, bound.value)
    objective = schedule.objective
    status = output.status
    if status is Status.OPTIMAL:  # a proven optimum is also the best possible bound
        best = objective if best is None else max(best, objective)
    if best is not None and objective <= math.ceil(best - 1e-6):
        status = Status.OPTIMAL  # an integral objective meeting a valid bound is optimal
    return Result(
        solver, objective, best, relative_gap(objective, best), status, runtime, schedule, stats
    )


def _load_builtin() -> None:
    """Import the solver modules so that they register themselves."""
    import schedlab.offline.solvers.brute_force
    import schedlab.offline.solvers.local_search
    import schedlab.offline.solvers.lp_guided
    import schedlab.offline.solvers.receding_horizon
    import schedlab.offline.solvers.rules
    import schedlab.offline.solvers.sorted_f  # noqa: F401
    from schedlab.offline.solvers import cpsat, dp  # noqa: F401
