"""One entry point for every solver: :func:`solve`."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

from schedlab.arguments_check import check_seed
from schedlab.budget import Budget, memory_guard
from schedlab.errors import BoundError, InputTypeError, SolverError
from schedlab.interrupts import held_interrupts
from schedlab.offline.bounds import Bound, bound_steps, bound_within
from schedlab.offline.instance import Instance, check_instance
from schedlab.offline.result import Result, Status, relative_gap
from schedlab.offline.schedule import Schedule
from schedlab.offline.solvers import SolverInfo, available_solvers, get_solver
from schedlab.offline.solvers.contract import check_options
from schedlab.offline.verify import verify
from schedlab.progress import Progress, progress_for

__all__ = ["BOUND_TOLERANCE", "available_solvers", "solve", "with_bound"]


#: How far (relative to the objective, at least 1e-6 absolute) a lower bound computed in
#: floating point may lie above a verified objective before it is called wrong.
BOUND_TOLERANCE = 1e-6


def _load_kernels() -> None:
    """Import the numba kernels before the clock starts.

    They compile when imported, the first time on a machine (seconds: ``schedlab.jit``),
    and load from numba's cache after that; neither is the solver's time, nor may it eat
    the solver's time limit. Later calls in the process cost nothing. Ctrl-C or SIGTERM
    during a compile is held until it ends, then raised
    (:func:`schedlab.interrupts.held_interrupts`): raised inside numba's compiler it would
    be lost.
    """
    with held_interrupts() as caught:
        from schedlab.offline import compiled_decoder  # noqa: F401
        from schedlab.offline.solvers import (  # noqa: F401
            compiled_left_shift,
            compiled_search,
            compiled_sorted_f,
        )
    if caught:
        raise KeyboardInterrupt


def solve(
    instance: Instance,
    solver: str = "mc-sf",
    *,
    time_limit: float | None = None,
    max_memory: int | None = None,
    seed: int = 0,
    bound: str | Bound | None = "best",
    progress: bool | Progress = False,
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
        Wall-clock cap in seconds for the solver (and, separately, for the bound);
        ``None``: none. Solvers end at their own work budgets (:mod:`schedlab.budget`),
        so without a binding cap the result depends only on the instance, the options
        and the seed; a cap that binds is recorded in ``stats["stopped_by"]``.
    max_memory
        Memory budget in bytes for the solver (and, separately, for the bound); ``None``:
        a quarter of the machine's memory (:mod:`schedlab.budget`).
    seed
        Seed of every random choice; the same seed gives the same result.
    bound
        ``"best"`` or another :func:`~schedlab.offline.bounds.lower_bound` method, a
        precomputed :class:`~schedlab.offline.bounds.Bound`, or ``None`` for no bound.
    progress
        ``True``: a bar on standard error counts the solver and each bound method and
        names the one running (:mod:`schedlab.progress`); or the caller's bar to step.
    **options
        The solver's own options (its keyword-only parameters).

    Returns
    -------
    Result
        With a verified schedule. Status is ``OPTIMAL`` when the solver proved it or
        the objective meets a lower bound checked against it (:func:`with_bound`).

    Raises
    ------
    UnknownNameError
        (a ``ValueError``) for an unknown solver name; the message lists the known ones.
    UnknownOptionError
        (a ``TypeError``) for an option the solver does not take; lists those it does.
    SolverError
        If the solver's schedule fails verification.
    BoundError
        If the bound, or the solver's own, lies above the verified objective: it is
        wrong, and no certificate is given (:func:`with_bound`).
    InputTypeError
        (a ``TypeError``) for an ``instance`` that is not an
        :class:`~schedlab.offline.instance.Instance`, a ``seed`` that is not an integer,
        or a ``bound`` of another type.
    InputError
        (a ``ValueError``) for a negative ``seed`` or a ``time_limit`` that is not a
        positive number of seconds.
    MemoryBudgetError
        (a ``MemoryError``) if the solver or the bound would pass ``max_memory``.
    """
    check_instance(instance, "solve")
    info = get_solver(solver)
    options = check_options(solver, info.fn, options)
    check_seed(seed, "seed")
    if bound is not None and not isinstance(bound, str | Bound):
        raise InputTypeError(
            f"bound: expected a method name, a Bound or None, got {type(bound).__name__}"
        )
    _load_kernels()
    steps = 1 + (bound_steps(instance, bound) if isinstance(bound, str) else 0)
    with progress_for(progress, "solve") as bar:
        bar.add(steps)  # the solver and each bound method, counted from the start
        bar.doing(solver)
        own = _verified_run(instance, info, Budget(time_limit, max_memory), seed, options)
        bar.step()
        if isinstance(bound, str):
            bound = bound_within(
                instance, bound, Budget(time_limit, max_memory), progress=bar, counted=True
            )
    return with_bound(own, bound)


def _verified_run(
    instance: Instance, info: SolverInfo, budget: Budget, seed: int, options: dict[str, Any]
) -> Result:
    """Run the solver ``info`` on ``instance`` and verify its schedule: its own result,
    with its own bound if it gives one, and, when its work budget stopped it, the budget
    in ``stats["work_budget"]`` (``{"work": N}``) if the solver did not say it.

    Raises
    ------
    SolverError
        If the schedule fails verification.
    MemoryBudgetError
        If the solver would pass the budget's memory.
    """
    began = time.perf_counter()
    with memory_guard(info.name):
        output = info.fn(instance, budget=budget, seed=seed, **options)
    runtime = time.perf_counter() - began
    schedule = Schedule(instance, output.starts)
    problems = verify(instance, schedule.starts)
    if problems:
        raise SolverError(
            f"{info.name} returned an infeasible schedule: {'; '.join(problems[:5])}"
        )
    stats = {**output.stats, "stopped_by": output.stats.get("stopped_by")}
    if stats["stopped_by"] == "work" and "work_budget" not in stats:
        given = {spec.name: spec.default for spec in info.option_specs} | options
        if isinstance(given.get("work"), int | float):  # its value, not "auto"
            stats["work_budget"] = {"work": given["work"]}
    return Result(
        solver=info.name,
        objective=schedule.objective,
        lower_bound=output.lower_bound,
        gap=relative_gap(schedule.objective, output.lower_bound),
        status=output.status,
        runtime=runtime,
        schedule=schedule,
        stats=stats,
    )


def with_bound(result: Result, bound: Bound | None) -> Result:
    """``result`` certified against ``bound`` as well as its own.

    Each bound is first checked against the objective of the verified schedule: a lower
    bound above it (beyond :data:`BOUND_TOLERANCE`, relative) is wrong, and is refused
    rather than made a certificate. Its lower bound then becomes the largest one known:
    its own, ``bound``'s value, and its objective if the solver proved it optimal. An
    objective that meets that bound (``objective <= ceil(bound)``: objectives are
    integers) is optimal, and its bound is then the objective. Certifying twice, or
    against ``None`` first, gives the same result, so a bound computed apart from the
    solver (by another job: :mod:`schedlab.offline.compare`) certifies it exactly as
    :func:`solve` does (``tests/offline/test_solve.py``).

    Raises
    ------
    BoundError
        If ``bound``'s value, or the result's own lower bound, is above its objective (or
        not a number), naming the bound method or the solver.
    """
    objective = result.objective
    _check_below(result.lower_bound, objective, f"{result.solver}'s own lower bound")
    if bound is not None:
        _check_below(bound.value, objective, f"lower bound {bound.method!r}")
    stats = dict(result.stats)
    best = result.lower_bound
    if bound is not None:
        stats["bound"] = {"method": bound.method, "value": bound.value, "runtime_s": bound.runtime}
        best = bound.value if best is None else max(best, bound.value)
    status = result.status
    if status is Status.OPTIMAL:  # a proven optimum is also the best possible bound
        best = objective if best is None else max(best, objective)
    if best is not None and objective <= math.ceil(best - 1e-6):
        status = Status.OPTIMAL  # an integral objective meeting a valid bound is optimal,
        best = max(best, objective)  # and then the optimum itself is the best bound
    return dataclasses.replace(
        result, lower_bound=best, gap=relative_gap(objective, best), status=status, stats=stats
    )


def _check_below(value: float | None, objective: int, what: str) -> None:
    """Refuse a lower bound above a verified ``objective``: it can only be wrong."""
    if value is None:
        return
    if not value <= objective + BOUND_TOLERANCE * max(1.0, abs(objective)):  # NaN too
        raise BoundError(
            f"{what} is {value:,.6g}, above the objective {objective:,} of a schedule the "
            "verifier accepts: the bound is wrong, and certifies nothing"
        )
