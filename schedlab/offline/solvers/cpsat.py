"""Exact solver on OR-Tools CP-SAT: one start variable per request, a cumulative of rounds.

Model
-----
Integer start ``p_i in [a_i, U_i]``; request ``i`` contributes to a cumulative resource of
capacity ``M`` one unit-length interval per active round, the ``k``-th starting at
``p_i + k - 1`` with demand ``s_i + k`` (``k = 1..o_i``); objective
``sum_i (p_i + o_i - a_i)``. The start window is closed by

.. math:: U_i = a_i + \\mathrm{UB} - \\mathrm{LB}(N \\setminus \\{i\\}) - o_i ,

where ``UB`` is the objective of the warm start and ``LB(N \\ {i})`` the larger of the
volume bound and the completion-chain bound (:mod:`schedlab.offline.bounds.tall_chain`)
of the instance without request ``i``: in any schedule at least as good, the other
requests form a feasible schedule of their own instance, so
``C_i - a_i <= UB - LB(N \\ {i})``, and no schedule as good as the warm start is cut off
(``proofs/cpsat_horizon.md``). On Jaillet-parameter backlogs of 15 requests the chain
bound made the windows 2.4 times narrower than the volume bound alone on seed 0
(``proofs/tall_chain.md``).
Requests with equal ``(s, o, a)`` are interchangeable, so their starts are ordered by
index.

Pair cuts: two requests ``i``, ``j`` with offset ``δ = p_j - p_i`` overlap in the rounds
``r = max(0, δ) .. min(o_i, δ + o_j) - 1`` after ``p_i``, where together they hold
``s_i + s_j + 2r - δ + 2`` tokens, largest at the last shared round. So alone they fit
iff ``δ <= -o_j`` or ``δ >= o_i`` or ``δ >= s_i + s_j + 2 o_i - M`` (when
``δ >= o_i - o_j``) or ``δ <= M - s_i - s_j - 2 o_j`` (when ``δ < o_i - o_j``).
Every pair's offset is restricted to that union of intervals: implied by the
cumulative, but propagated far more strongly (``proofs/cpsat_pair_cuts.md``).

Solving
-------
The warm start is the best schedule of the list-scheduling rules (added as a hint and
as the fallback answer). A valid lower bound, the larger of
:func:`schedlab.offline.bounds.lower_bound`'s (within a tenth of the time limit) and the
completion-chain bound, is posted as ``objective >= ceil(LB)``: it is implied by every
feasible schedule and lets the search stop as soon as it meets the bound. The status is
``OPTIMAL`` only when CP-SAT proves it (or the schedule meets the bound); otherwise
``TIME_LIMIT`` with the larger of CP-SAT's proven bound and ours.
"""

from __future__ import annotations

import itertools
import math
import threading
from typing import Any

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.errors import SchedlabError, SolverError
from schedlab.interrupts import held_interrupts
from schedlab.offline.bounds import bound_within
from schedlab.offline.bounds.tall_chain import tall_chain_bound, tall_chain_without
from schedlab.offline.bounds.volume import start_slack
from schedlab.offline.instance import Instance
from schedlab.offline.priority import best_rule_schedule
from schedlab.offline.result import SolverOutput, Status

__all__ = [
    "DEFAULT_DETERMINISTIC_TIME",
    "DEFAULT_WORKERS",
    "pair_offsets",
    "solve_cpsat",
    "start_windows",
]

#: CP-SAT search workers by default (the development machine has 2 cores).
DEFAULT_WORKERS = 2

#: Share of the wall-clock cap spent on the lower bound posted to the model.
_BOUND_SHARE = 0.1

#: CP-SAT's work budget by default, in its deterministic time: about ten minutes of one
#: core, far beyond any proof of the sizes it proves (n = 12 takes about 11 s), so that a
#: call without a wall-clock cap still ends, the same way on every machine.
DEFAULT_DETERMINISTIC_TIME = 600.0


#: Largest model accepted by default: one interval per active round, ``sum_i o_i`` in all.
#: In 30 s (2026-12-01, 2 shared cores) CP-SAT improved the best rule's schedule by 0.6 %
#: on ``mixed_backlog(12, memory=4000)`` (``sum o`` = 4,983), not at all on
#: ``mixed_backlog(20, memory=6000)`` (6,665), by 0.2 % on the shipped mixed n = 50
#: (18,143), and not at all on the shipped n = 200 (85,351; ``benchmarks/offline_targets.py``,
#: row ``cpsat``). Larger models are refused, in favour of ``alns`` and ``lp-search``,
#: unless ``max_intervals`` is raised.
MAX_INTERVALS = 20_000


def _interruptible_solve(solver: Any, model: Any) -> Any:
    """``solver.solve(model)`` in a thread of its own, while this thread waits in Python.

    In the calling thread, CP-SAT's C++ solve would hold a signal back until it ended.
    Here Ctrl-C and SIGTERM are noted by a handler of this call's own (an exception
    raised inside the wait would leave the solving thread for the interpreter to kill at
    exit, which aborts the process); then CP-SAT's search is stopped, the thread joined,
    and ``KeyboardInterrupt`` raised. Signals left at their default (a pool worker's
    SIGTERM) or ignored are left alone, and off the main thread no handler can be set: the
    solve then runs to its end or the signal ends the process.
    """
    solver.parameters.catch_sigint_signal = False
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(solver.solve(model)), daemon=True)
    with held_interrupts() as caught:
        worker.start()
        while worker.is_alive() and not caught:
            worker.join(0.1)
        if caught:
            solver.stop_search()
            worker.join()
    if caught:
        raise KeyboardInterrupt
    return done[0]


def pair_offsets(instance: Instance) -> list[tuple[int, int, int, int]]:
    """Forbidden offsets of every pair: ``(i, j, lo, hi)`` means ``p_j - p_i ∉ [lo, hi]``.

    With ``c = o_i - o_j``, an overlapping offset ``δ >= c`` fits iff
    ``δ >= s_i + s_j + 2 o_i - M`` and one ``δ < c`` fits iff ``δ <= M - s_i - s_j - 2 o_j``
    (see module docs), so the forbidden offsets form the single range
    ``max(-o_j, min(c - 1, M - s_i - s_j - 2 o_j)) < δ < min(o_i, max(c, s_i + s_j + 2 o_i - M))``.
    Pairs with an empty range are left out.
    """
    s, o, memory = instance.prompt.tolist(), instance.output.tolist(), instance.memory
    pairs = []
    for i, j in itertools.combinations(range(instance.n), 2):
        base, cut = s[i] + s[j], o[i] - o[j]
        below = max(-o[j], min(cut - 1, memory - base - 2 * o[j]))
        after = min(o[i], max(cut, base + 2 * o[i] - memory))
        if below + 1 <= after - 1:
            pairs.append((i, j, below + 1, after - 1))
    return pairs


def start_windows(instance: Instance, upper: int) -> list[int]:
    """``U_i - a_i = UB - LB(N \\ {i}) - o_i`` with ``LB`` the larger of the volume and the
    completion-chain bounds: no schedule of objective ``<= upper`` starts a request later
    (``proofs/cpsat_horizon.md``)."""
    return [
        min(volume, upper - rest - int(length))
        for volume, rest, length in zip(
            start_slack(instance, upper),
            tall_chain_without(instance),
            instance.output.tolist(),
            strict=True,
        )
    ]


def solve_cpsat(
    instance: Instance,
    *,
    budget: Budget = UNLIMITED,
    seed: int = 0,
    num_workers: int = DEFAULT_WORKERS,
    posted_bound: str | None = "best",
    max_deterministic_time: float = DEFAULT_DETERMINISTIC_TIME,
    max_intervals: int = MAX_INTERVALS,
) -> SolverOutput:
    """Minimise total latency exactly with CP-SAT (see module docs).

    Parameters
    ----------
    budget
        Wall-clock cap for the whole call (none: until proven optimal).
    seed
        CP-SAT's ``random_seed``.
    num_workers
        CP-SAT search workers (``num_workers``). With more than one, the workers' search
        is interleaved (``interleave_search``), which makes CP-SAT deterministic: the
        same seed gives the same schedule whatever the load.
    posted_bound
        Lower-bound method posted as a constraint, with the completion-chain bound
        (``None``: none), given a tenth of the
        wall-clock cap (named apart from :func:`schedlab.solve`'s ``bound``, the bound a
        result is certified against).
    max_deterministic_time
        The work budget: CP-SAT's deterministic time (its own reproducible measure of
        work, about a second each on a typical core), :data:`DEFAULT_DETERMINISTIC_TIME`
        by default.
    max_intervals
        Refuse an instance whose model would have more round intervals (``sum_i o_i``)
        than this (:data:`MAX_INTERVALS`: beyond it CP-SAT was not seen to improve its
        warm start).

    Raises
    ------
    SchedlabError
        For fewer than one worker, a work budget that is not a positive number, or an
        instance above ``max_intervals``.
    """
    from ortools.sat.python import cp_model

    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise SchedlabError(f"cpsat: num_workers must be an integer >= 1, got {num_workers!r}")
    work = max_deterministic_time
    if not (math.isfinite(work) and work > 0):
        raise SchedlabError(f"cpsat: max_deterministic_time must be a positive number, got {work}")

    if isinstance(max_intervals, bool) or not isinstance(max_intervals, int) or max_intervals < 1:
        raise SchedlabError(f"cpsat: max_intervals must be an integer >= 1, got {max_intervals!r}")
    intervals_needed = int(instance.output.sum())
    if intervals_needed > max_intervals:
        raise SchedlabError(
            f"cpsat: instance {instance.name or '(unnamed)'} needs {intervals_needed:,} round "
            f"intervals (sum of outputs), above max_intervals = {max_intervals:,} (by default "
            "the size beyond which CP-SAT was not seen to improve its warm start); use alns "
            "or lp-search, or raise max_intervals"
        )
    prompt = instance.prompt.tolist()
    output = instance.output.tolist()
    arrival = instance.arrival.tolist()
    warm, rule = best_rule_schedule(instance)
    upper = int((warm + instance.output - instance.arrival).sum())
    slack = start_windows(instance, upper)
    proven_lb: float | None = None
    if posted_bound is not None:
        posted = bound_within(instance, posted_bound, budget.share(_BOUND_SHARE)).value
        proven_lb = max(posted, tall_chain_bound(instance).value)

    model = cp_model.CpModel()
    starts = [
        model.new_int_var(arrival[i], arrival[i] + slack[i], f"p{i}") for i in range(instance.n)
    ]
    intervals, demands = [], []
    for i, p in enumerate(starts):
        for k in range(1, output[i] + 1):
            intervals.append(model.new_fixed_size_interval_var(p + (k - 1), 1, f"r{i}_{k}"))
            demands.append(prompt[i] + k)
    model.add_cumulative(intervals, demands, instance.memory)
    span = max(slack) + max(arrival) + 1
    for i, j, lo, hi in pair_offsets(instance):
        allowed = cp_model.Domain.from_intervals([[-span, lo - 1], [hi + 1, span]])
        model.add_linear_expression_in_domain(starts[j] - starts[i], allowed)
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i in range(instance.n):
        groups.setdefault((prompt[i], output[i], arrival[i]), []).append(i)
    for members in groups.values():
        for i, j in itertools.pairwise(members):
            model.add(starts[i] <= starts[j])
    constant = sum(output) - sum(arrival)
    objective = sum(starts) + constant
    if proven_lb is not None:
        model.add(objective >= math.ceil(proven_lb - 1e-6))
    model.minimize(objective)
    for p, value in zip(starts, warm.tolist(), strict=True):
        model.add_hint(p, value)

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = num_workers
    solver.parameters.interleave_search = num_workers > 1
    solver.parameters.random_seed = seed
    seconds = budget.seconds(floor=0.01)
    if seconds is not None:
        solver.parameters.max_time_in_seconds = seconds
    solver.parameters.max_deterministic_time = max_deterministic_time
    code = _interruptible_solve(solver, model)
    stats: dict[str, Any] = {
        "warm_start": rule,
        "warm_objective": upper,
        "posted_bound": proven_lb,
        "cpsat_status": solver.status_name(code),
        "wall_s": solver.wall_time,
        "deterministic_time": solver.deterministic_time,
        "stopped_by": None,
    }
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        found = np.array([solver.value(p) for p in starts], dtype=np.int64)
        cp_bound = solver.best_objective_bound
    else:  # nothing better than the warm start was found in time
        found, cp_bound = warm, -math.inf
    if code == cp_model.OPTIMAL:
        return SolverOutput(found, Status.OPTIMAL, float(solver.objective_value), stats)
    candidates = [b for b in (cp_bound, proven_lb) if b is not None and math.isfinite(b)]
    lb = max(candidates) if candidates else None
    if code == cp_model.INFEASIBLE:  # only possible if the posted bound were wrong
        raise SolverError("cpsat: model infeasible although the warm start satisfies it")
    out_of_work = solver.deterministic_time >= max_deterministic_time
    stats["stopped_by"] = "work" if out_of_work else "time_limit"
    return SolverOutput(found, Status.TIME_LIMIT, lb, stats)
