"""Exact solver on OR-Tools CP-SAT: one start variable per request, a cumulative of rounds.

Model
-----
Integer start ``p_i in [a_i, U_i]``; request ``i`` contributes to a cumulative resource of
capacity ``M`` one unit-length interval per active round, the ``k``-th starting at
``p_i + k - 1`` with demand ``s_i + k`` (``k = 1..o_i``); objective
``sum_i (p_i + o_i - a_i)``. The start window is closed by

.. math:: U_i = a_i + \\mathrm{UB} - \\mathrm{LB}(N \\setminus \\{i\\}) - o_i ,

where ``UB`` is the objective of the warm start and ``LB(N \\ {i})`` the volume bound of
the instance without request ``i``: in any schedule at least as good, the other requests
form a feasible schedule of their own instance, so ``C_i - a_i <= UB - LB(N \\ {i})``,
and no schedule as good as the warm start is cut off (``proofs/cpsat_horizon.md``).
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
as the fallback answer). A valid lower bound from :func:`schedlab.offline.bounds.lower_bound`
(within a tenth of the time limit, 30 s without one) is posted as
``objective >= ceil(LB)``: it is implied by every feasible schedule and lets the search
stop as soon as it meets the bound. The
status is ``OPTIMAL`` only when CP-SAT proves it (or the schedule meets the bound);
otherwise ``TIME_LIMIT`` with the larger of CP-SAT's proven bound and ours.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from schedlab.offline.bounds import lower_bound
from schedlab.offline.bounds.volume import volume_completions
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.result import SolverOutput, Status
from schedlab.offline.solve import SolverError
from schedlab.offline.solvers import register_solver
from schedlab.offline.solvers.rules import RULES, priority_order

__all__ = ["DEFAULT_WORKERS", "best_rule_schedule", "pair_offsets", "solve_cpsat", "start_slack"]

#: CP-SAT search workers by default (the development machine has 2 cores).
DEFAULT_WORKERS = 2

#: Seconds treated as the time limit when sharing out bound time without one.
_UNLIMITED_BOUND_TIME = 300.0

#: Share of the time limit spent on the lower bound posted to the model.
_BOUND_SHARE = 0.1


def best_rule_schedule(instance: Instance) -> tuple[np.ndarray, str]:
    """The least-objective schedule over every list-scheduling rule, strict and backfill.

    The decoder is deterministic, so a ``(priority order, backfill)`` pair already decoded
    (``sof``, ``mc-sf`` and ``mc-sf-backfill`` share one order; other rules may coincide
    on a given instance) is skipped; ties keep the first rule, as without the skip.
    """
    best: tuple[int, np.ndarray, str] | None = None
    decoded: set[tuple[bytes, bool]] = set()
    for rule in RULES:
        order = priority_order(instance, rule)
        for backfill in (False, True):
            if (order.tobytes(), backfill) in decoded:
                continue
            decoded.add((order.tobytes(), backfill))
            starts = list_schedule(instance, order, backfill=backfill)
            objective = int((starts + instance.output).sum())
            if best is None or objective < best[0]:
                best = (objective, starts, f"{rule}{'+backfill' if backfill else ''}")
    assert best is not None
    return best[1], best[2]


def start_slack(instance: Instance, upper: int) -> list[int]:
    """``U_i - a_i = UB - LB(N \\ {i}) - o_i`` for every request (see module docs).

    ``LB`` is the volume bound for ``n <= 200`` and ``sum_j o_j`` beyond (``O(n^2 log n)``
    otherwise).
    """
    output = instance.output
    if instance.n == 1:
        return [upper - int(output[0])]
    if instance.n > 200:
        others_min = int(output.sum()) - output
        return [int(x) for x in upper - others_min - output]
    slack: list[int] = []
    for i in range(instance.n):
        keep = np.arange(instance.n) != i
        others = Instance.from_arrays(
            instance.memory, instance.prompt[keep], output[keep], instance.arrival[keep]
        )
        rest = int(volume_completions(others).sum() - others.arrival.sum())
        slack.append(upper - rest - int(output[i]))
    return slack


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


@register_solver("cpsat")
def solve_cpsat(
    instance: Instance,
    *,
    time_limit: float | None = None,
    seed: int = 0,
    num_workers: int = DEFAULT_WORKERS,
    bound: str | None = "best",
    **options: Any,
) -> SolverOutput:
    """Minimise total latency exactly with CP-SAT (see module docs).

    Parameters
    ----------
    time_limit
        Wall seconds for the whole call (``None``: until proven optimal).
    seed
        CP-SAT's ``random_seed``.
    num_workers
        CP-SAT search workers (``num_workers`` parameter).
    bound
        Lower-bound method posted as a constraint (``None``: none).
    """
    if options:
        raise TypeError(f"cpsat: unknown option(s) {', '.join(sorted(options))}")
    began = time.perf_counter()
    prompt = instance.prompt.tolist()
    output = instance.output.tolist()
    arrival = instance.arrival.tolist()
    warm, rule = best_rule_schedule(instance)
    upper = int((warm + instance.output - instance.arrival).sum())
    slack = start_slack(instance, upper)
    proven_lb: float | None = None
    if bound is not None:
        share = _BOUND_SHARE * (_UNLIMITED_BOUND_TIME if time_limit is None else time_limit)
        proven_lb = lower_bound(instance, bound, time_limit=share).value

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
    solver.parameters.random_seed = seed
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = max(
            0.01, time_limit - (time.perf_counter() - began)
        )
    code = solver.solve(model)
    stats: dict[str, Any] = {
        "warm_start": rule,
        "warm_objective": upper,
        "posted_bound": proven_lb,
        "cpsat_status": solver.status_name(code),
        "wall_s": solver.wall_time,
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
    return SolverOutput(found, Status.TIME_LIMIT, lb, stats)
