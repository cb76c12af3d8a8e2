r"""Exact solver on OR-Tools CP-SAT: start variables, memory checked in last rounds.

Model
-----
Integer start ``p_i in [a_i, U_i]``, completion ``C_i = p_i + o_i``, objective
``sum_i (C_i - a_i)``. Memory only needs checking in each request's last round
``C_e - 1``: the load can fall only after some request's last round, so every round's
load is at most the load of the next last round (``proofs/cpsat_last_rounds.md``,
Claim 1). Request ``j`` runs in that round iff ``0 <= C_j - C_e <= o_j - 1`` and then
holds ``P_j - (C_j - C_e)`` tokens (``P = s + o``), so with a literal per ordered pair
for that case (and two for ``C_j - C_e <= -1``, ``>= o_j``)

.. math:: L_e = P_e + \sum_{j \ne e} [0 \le C_j - C_e \le o_j - 1]\,(P_j - (C_j - C_e))
          \le M .

Pairs whose windows keep ``j`` out of ``e``'s last round are left out. This replaced a
cumulative of one unit interval per active round (``sum_i o_i`` of them), which CP-SAT
spent most of its time presolving (``docs/design.md``, "Decision record", gives the
comparison).

*Left-shift rule* (Claim 3 there): in an optimal schedule no request can start one round
earlier with the others fixed. For ``p_j > a_j`` that holds iff some ``f`` ends in round
``p_j - 1`` with ``L_f >= M - s_j``, or some ``e`` with ``1 <= C_j - C_e <= o_j - 1`` has
a full last round (``L_e = M``); the model requires one of them (or ``p_j = a_j``).

The start window is closed by

.. math:: U_i = a_i + \mathrm{UB} - \mathrm{LB}(N \setminus \{i\}) - o_i ,

where ``UB`` is the objective of the warm start and ``LB(N \ {i})`` the larger of the
volume bound and the completion-chain bound (:mod:`schedlab.offline.bounds.tall_chain`)
of the instance without request ``i``: in any schedule at least as good, the other
requests form a feasible schedule of their own instance, so
``C_i - a_i <= UB - LB(N \ {i})``, and no schedule as good as the warm start is cut off
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
memory checks, but propagated more strongly (``proofs/cpsat_pair_cuts.md``).
A redundant cumulative of each request's age segments (3 or 4 fixed-size intervals at
``p_i + age``, each demanding the ``s_i + age + 1`` tokens it holds at least) was tried and
left out: it proved nothing more (``docs/design.md``, "Decision record").

Solving
-------
The warm start is the better of the best list-scheduling rule's schedule and
:func:`~schedlab.offline.solvers.local_search.local_search`'s (its default work budget,
at most a tenth of the time limit), left-shifted so that it obeys the rule above; it is
the hint and the fallback answer. A valid lower bound, the larger of
:func:`schedlab.offline.bounds.lower_bound`'s (within a tenth of the time limit) and the
completion-chain bound, is posted as ``objective >= ceil(LB)``: it is implied by every
feasible schedule and lets the search stop as soon as it meets the bound. The status is
``OPTIMAL`` only when CP-SAT proves it (or the schedule meets the bound); otherwise
``WORK_LIMIT`` (``work`` spent) or ``TIME_LIMIT`` with the larger of
CP-SAT's proven bound and ours.

Window repair
-------------
:func:`repair_window` re-places a few requests of a feasible schedule optimally, each
within a reach of its start, with the others fixed: the same last-round terms, the fixed
requests' load as constants (``proofs/cpsat_last_rounds.md``, "Window repair").
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.errors import InputError, InputTypeError, SolverError
from schedlab.interrupts import held_interrupts
from schedlab.offline.bounds import bound_within
from schedlab.offline.bounds.tall_chain import tall_chain_bound, tall_chain_without
from schedlab.offline.bounds.volume import start_slack
from schedlab.offline.instance import MAX_VALUE, Instance, check_int
from schedlab.offline.priority import best_rule_schedule
from schedlab.offline.result import SolverOutput, Status
from schedlab.offline.schedule import load_profile, total_latency
from schedlab.offline.solvers.left_shift import left_shift
from schedlab.offline.solvers.local_search import local_search
from schedlab.offline.verify import assert_feasible

__all__ = [
    "DEFAULT_DETERMINISTIC_TIME",
    "DEFAULT_WORKERS",
    "MAX_REACH",
    "WindowRepair",
    "pair_offsets",
    "repair_window",
    "solve_cpsat",
    "start_windows",
]

#: CP-SAT search workers by default. One worker is deterministic by itself; more than
#: one are deterministic only interleaved, which runs the full search in slices between
#: neighbourhood searches, and proved less fast (``docs/design.md``, "Decision record").
DEFAULT_WORKERS = 1

#: Share of the wall-clock cap spent on the lower bound posted to the model.
_BOUND_SHARE = 0.1

#: Share of the wall-clock cap that the warm start's local search may take at most.
_SEARCH_SHARE = 0.1

#: CP-SAT's work budget by default, in its deterministic time: about ten minutes of one
#: core, far beyond any proof of the sizes it proves, so a call without a wall-clock cap
#: still ends, the same way on every machine.
DEFAULT_DETERMINISTIC_TIME = 600.0


#: Largest instance accepted by default, by ``sum_i o_i`` (the rounds its requests run,
#: which set the width of the start windows): past it CP-SAT was not seen to improve its
#: warm start (``docs/design.md``, "Decision record"), so larger instances are refused,
#: in favour of ``alns`` and ``lp-search``, unless ``max_intervals`` is raised.
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


def pair_offsets(
    instance: Instance, budget: Budget = UNLIMITED
) -> list[tuple[int, int, int, int]]:
    """Forbidden offsets of every pair: ``(i, j, lo, hi)`` means ``p_j - p_i ∉ [lo, hi]``.

    With ``c = o_i - o_j``, an overlapping offset ``δ >= c`` fits iff
    ``δ >= s_i + s_j + 2 o_i - M`` and one ``δ < c`` fits iff ``δ <= M - s_i - s_j - 2 o_j``
    (see module docs), so the forbidden offsets form the single range
    ``max(-o_j, min(c - 1, M - s_i - s_j - 2 o_j)) < δ < min(o_i, max(c, s_i + s_j + 2 o_i - M))``.
    Pairs with an empty range are left out. If ``budget`` runs out (checked once per ``i``),
    the cuts of the pairs examined so far are returned: each is implied by feasibility, so
    any subset is valid.
    """
    s, o, memory = instance.prompt.tolist(), instance.output.tolist(), instance.kv_tokens
    pairs = []
    for i in range(instance.n):
        if budget.expired():
            break
        for j in range(i + 1, instance.n):
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


def _check_work(work: Any, where: str) -> None:
    """Refuse a CP-SAT work budget (deterministic time) that is not a positive number."""
    if (
        isinstance(work, bool)
        or not isinstance(work, int | float)
        or not (math.isfinite(work) and work > 0)
    ):
        raise InputError(f"{where}: work must be a positive number, got {work!r}")


def _held_tokens(model: Any, d: Any, output: int, peak: int, name: str) -> tuple[Any, Any]:
    """The tokens request ``j`` holds in ``e``'s last round, given ``d = C_j - C_e``.

    Three exclusive literals split ``d`` into ``<= -1`` (``j`` ended before),
    ``0 .. o_j - 1`` (``over``: ``j`` runs in that round) and ``>= o_j`` (``j`` starts
    after it); the tokens are ``P_j - d`` under ``over`` and ``0`` otherwise
    (``proofs/cpsat_last_rounds.md``, Claim 2). Returns ``(over, tokens)``.
    """
    before, over, after = (model.new_bool_var(f"{tag}{name}") for tag in "bva")
    model.add_exactly_one(before, over, after)
    model.add(d <= -1).only_enforce_if(before)
    model.add(d >= 0).only_enforce_if(over)
    model.add(d <= output - 1).only_enforce_if(over)
    model.add(d >= output).only_enforce_if(after)
    tokens = model.new_int_var(0, peak, f"h{name}")
    model.add(tokens == peak - d).only_enforce_if(over)
    model.add(tokens == 0).only_enforce_if(over.Not())
    return over, tokens


def _add_last_round_checks(
    model: Any, instance: Instance, starts: list[Any], slack: list[int], budget: Budget
) -> bool:
    """Memory checked in each request's last round only, and the left-shift rule.

    For every ordered pair ``(e, j)`` whose windows let ``j`` be active in ``e``'s last
    round, a literal ``over`` holds iff ``0 <= C_j - C_e <= o_j - 1``, and then ``j`` holds
    exactly ``P_j - (C_j - C_e)`` tokens there (else none); ``L_e``, the load of ``e``'s
    last round, is ``P_e`` plus these, at most ``M``. A request started after its release
    is blocked (module docs): some ``f`` ends at ``p_j`` with ``L_f >= M - s_j``, or some
    ``e`` with ``1 <= C_j - C_e <= o_j - 1`` has ``L_e = M``. Returns ``False``, the model
    unfinished, if ``budget`` runs out first (checked once per request ``e``: the pairs
    take ``O(n^2)`` time).
    """
    n, memory = instance.n, instance.kv_tokens
    s, o, a = instance.prompt.tolist(), instance.output.tolist(), instance.arrival.tolist()
    peak = [x + y for x, y in zip(s, o, strict=True)]
    ends = [p + o[i] for i, p in enumerate(starts)]
    # completion windows [a_i + o_i, a_i + o_i + slack_i]
    first = [a[i] + o[i] for i in range(n)]
    last = [first[i] + slack[i] for i in range(n)]
    held: list[list[Any]] = [[] for _ in range(n)]
    full = [model.new_bool_var(f"full{e}") for e in range(n)]
    loads = [model.new_int_var(peak[e], memory, f"L{e}") for e in range(n)]
    blockers: list[list[Any]] = [[] for _ in range(n)]
    for e in range(n):
        if budget.expired():
            return False
        for j in range(n):
            if j == e:
                continue
            low, high = first[j] - last[e], last[j] - first[e]  # the range of C_j - C_e
            d = ends[j] - ends[e]
            if low <= o[j] - 1 and high >= 0:  # j may be active in e's last round
                over, tokens = _held_tokens(model, d, o[j], peak[j], f"{e}_{j}")
                held[e].append(tokens)
                if high >= 1:  # j's later rounds include e's full last round
                    blocked = model.new_bool_var(f"B{e}_{j}")
                    model.add_implication(blocked, over)
                    model.add_implication(blocked, full[e])
                    model.add(d >= 1).only_enforce_if(blocked)
                    blockers[j].append(blocked)
            if low <= o[j] <= high:  # e may end in the round before j starts
                blocked = model.new_bool_var(f"A{e}_{j}")
                model.add(d == o[j]).only_enforce_if(blocked)
                model.add(loads[e] >= memory - s[j]).only_enforce_if(blocked)
                blockers[j].append(blocked)
    for e in range(n):
        model.add(loads[e] == peak[e] + sum(held[e]))
        model.add(loads[e] == memory).only_enforce_if(full[e])
    for j in range(n):
        released = model.new_bool_var(f"r{j}")
        model.add(starts[j] == a[j]).only_enforce_if(released)
        model.add_bool_or([released, *blockers[j]])
    return True


def solve_cpsat(
    instance: Instance,
    *,
    budget: Budget = UNLIMITED,
    seed: int = 0,
    num_workers: int = DEFAULT_WORKERS,
    posted_bound: str | None = "best",
    work: float = DEFAULT_DETERMINISTIC_TIME,
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
        CP-SAT search workers (``num_workers``; :data:`DEFAULT_WORKERS` = 1). With more
        than one, the workers' search is interleaved (``interleave_search``), which keeps
        CP-SAT deterministic: the same seed gives the same schedule whatever the load.
    posted_bound
        Lower-bound method posted as a constraint, with the completion-chain bound
        (``None``: none), given a tenth of the
        wall-clock cap (named apart from :func:`schedlab.solve`'s ``bound``, the bound a
        result is certified against).
    work
        The work budget: CP-SAT's deterministic time (its own reproducible measure of
        work, about a second each on a typical core), :data:`DEFAULT_DETERMINISTIC_TIME`
        by default.
    max_intervals
        Refuse an instance whose requests run for more rounds in all (``sum_i o_i``)
        than this (:data:`MAX_INTERVALS`: beyond it CP-SAT was not seen to improve its
        warm start).

    Raises
    ------
    InputError, InputTypeError
        For fewer than one worker, a work budget that is not a positive number, or an
        instance above ``max_intervals``.
    """
    # Over 100 lines by design: one CP-SAT model built in one place (variables, each round's
    # memory, the symmetry and pair cuts, the warm start, the solve), so that it reads as the
    # module docstring states it.
    from ortools.sat.python import cp_model

    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise InputError(f"cpsat: num_workers must be an integer >= 1, got {num_workers!r}")
    _check_work(work, "cpsat")

    if isinstance(max_intervals, bool) or not isinstance(max_intervals, int) or max_intervals < 1:
        raise InputError(f"cpsat: max_intervals must be an integer >= 1, got {max_intervals!r}")
    intervals_needed = int(instance.output.sum())
    if intervals_needed > max_intervals:
        raise InputError(
            f"cpsat: instance {instance.name or '(unnamed)'} runs {intervals_needed:,} rounds "
            f"in all (sum of outputs), above max_intervals = {max_intervals:,} (by default "
            "the size beyond which CP-SAT was not seen to improve its warm start); use alns "
            "or lp-search, or raise max_intervals"
        )
    prompt = instance.prompt.tolist()
    output = instance.output.tolist()
    arrival = instance.arrival.tolist()
    warm, rule = best_rule_schedule(instance)
    upper = total_latency(instance, warm)
    searched = local_search(instance, budget=budget.share(_SEARCH_SHARE), seed=seed).starts
    if total_latency(instance, searched) < upper:
        warm, rule = searched, "local-search"
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i in range(instance.n):
        groups.setdefault((prompt[i], output[i], arrival[i]), []).append(i)
    # the model keeps left-shifted schedules whose identical requests start in index order
    warm, _ = left_shift(instance, warm)
    for members in groups.values():
        warm[members] = np.sort(warm[members])
    upper = total_latency(instance, warm)
    slack = start_windows(instance, upper)
    proven_lb: float | None = None
    if posted_bound is not None:
        posted = bound_within(instance, posted_bound, budget.share(_BOUND_SHARE)).value
        proven_lb = max(posted, tall_chain_bound(instance).value)

    model = cp_model.CpModel()
    starts = [
        model.new_int_var(arrival[i], arrival[i] + slack[i], f"p{i}") for i in range(instance.n)
    ]
    span = max(slack) + max(arrival) + 1
    start: dict[str, Any] = {
        "warm_start": rule,
        "warm_objective": upper,
        "posted_bound": proven_lb,
    }
    unrun = {**start, "cpsat_status": "NOT_RUN", "stopped_by": "time_limit"}
    if not _add_last_round_checks(model, instance, starts, slack, budget):
        return SolverOutput(warm, Status.TIME_LIMIT, proven_lb, unrun)
    for i, j, lo, hi in pair_offsets(instance, budget):
        allowed = cp_model.Domain.from_intervals([[-span, lo - 1], [hi + 1, span]])
        model.add_linear_expression_in_domain(starts[j] - starts[i], allowed)
    for members in groups.values():
        for i, j in itertools.pairwise(members):
            model.add(starts[i] <= starts[j])
    constant = sum(output) - sum(arrival)
    objective = sum(starts) + constant
    if proven_lb is not None:
        model.add(objective >= math.ceil(proven_lb - 1e-6))
    model.add(objective <= upper)  # never worse than the warm start, which satisfies it
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
    solver.parameters.max_deterministic_time = work
    if budget.expired():  # the cap passed while the model was built
        return SolverOutput(warm, Status.TIME_LIMIT, proven_lb, unrun)
    code = _interruptible_solve(solver, model)
    stats: dict[str, Any] = {
        **start,
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
    out_of_work = solver.deterministic_time >= work
    stats["stopped_by"] = "work" if out_of_work else "time_limit"
    if out_of_work:
        stats["work_budget"] = {"work": work}
    return SolverOutput(found, Status.stopped(stats["stopped_by"]), lb, stats)


#: Most rounds :func:`repair_window` lets a request move: each freed request's element
#: constraint lists the fixed load of every round its last round can fall in
#: (``2 reach + 1`` values, some 100 bytes each while the model is built).
MAX_REACH = 100_000


class WindowRepair(NamedTuple):
    """What :func:`repair_window` found."""

    #: Every request's start: the freed ones' best found, the others' unchanged.
    starts: np.ndarray
    #: ``OPTIMAL`` if proven best within the window, else ``TIME_LIMIT``.
    status: Status
    #: Rounds gained: the objective of the given starts minus that of these.
    gain: int


def repair_window(
    instance: Instance,
    starts: np.ndarray,
    free: Sequence[int],
    reach: int,
    *,
    budget: Budget = UNLIMITED,
    work: float = DEFAULT_DETERMINISTIC_TIME,
) -> WindowRepair:
    """Re-place the requests ``free`` optimally, every other request where ``starts`` has it.

    Each freed request ``i`` may start in ``[max(a_i, p_i - reach), p_i + reach]`` (``p``
    the given starts); CP-SAT minimises the sum of their starts. Memory is checked only in
    last rounds, as in :func:`solve_cpsat` (``proofs/cpsat_last_rounds.md``, Claim 1 holds
    for any schedule): in the last round ``e`` of every fixed request that a freed one can
    reach, the fixed requests' load there (a constant) plus the freed requests' tokens
    (Claim 2) is at most ``M``; in a freed request's own last round, the fixed load is read
    from the profile by an element constraint. A window ``OPTIMAL`` with no gain proves
    that no re-placement of those requests within ``reach`` improves ``starts``
    (``benchmarks/gap_split.py`` measures this on whole schedules). The model requires a
    sum no larger than the given starts', which are a solution: so the result is never
    worse, and it is ``OPTIMAL`` too when CP-SAT stops without a better solution but with a
    bound that reaches their sum.

    Parameters
    ----------
    starts
        A feasible schedule of ``instance``.
    free
        Distinct request indices to re-place.
    reach
        Rounds each may move either way, ``0 .. MAX_REACH``.
    budget
        Wall-clock cap for the whole call: the model is built under it too, and if it
        passes first the given starts come back with ``TIME_LIMIT``. CP-SAT's own
        presolve can overrun its share on large windows.
    work
        The work budget, in CP-SAT's deterministic time (one worker, so deterministic).

    Raises
    ------
    ScheduleError
        If ``starts`` is not a feasible schedule of ``instance``.
    InputError, InputTypeError
        If ``starts`` is not one start a request, ``free`` or ``reach`` not integers in
        range (:class:`~schedlab.errors.InstanceError` for a bad value), or
        ``work`` not a positive number.
    SolverError
        If CP-SAT finds the model invalid or infeasible (the given starts are a solution).
    """
    # Over 100 lines by design: one CP-SAT model of a window built in one place, so that it reads
    # as the docstring states it.
    from ortools.sat.python import cp_model

    if np.shape(starts) != (instance.n,) or isinstance(starts, Mapping):
        raise InputError(
            f"repair_window: starts must be a sequence of {instance.n} starts, one a request"
        )
    assert_feasible(instance, starts)
    given = [int(x) for x in starts]  # integers: the verifier has checked them
    if given and max(given) > MAX_VALUE:
        raise InputError(f"repair_window: starts must be at most {MAX_VALUE}, got {max(given)}")
    starts = np.array(given, dtype=np.int64)
    if (
        isinstance(free, str | bytes | Mapping)
        or not isinstance(free, Iterable)
        or np.ndim(free) != 1
    ):
        raise InputTypeError(
            f"repair_window: free must be a sequence of request indices, got {free!r}"
        )
    free = [
        check_int(i, f"repair_window: free[{k}]", 0, instance.n - 1) for k, i in enumerate(free)
    ]
    if len(set(free)) != len(free):
        raise InputError(f"repair_window: free must be distinct request indices, got {free}")
    reach = check_int(reach, "repair_window: reach", 0, MAX_REACH)
    _check_work(work, "repair_window")
    unchanged = WindowRepair(starts.copy(), Status.TIME_LIMIT, 0)
    if not free:
        return unchanged._replace(status=Status.OPTIMAL)
    s, o, memory = instance.prompt.tolist(), instance.output.tolist(), instance.kv_tokens
    peak = [x + y for x, y in zip(s, o, strict=True)]
    low = {i: max(int(instance.arrival[i]), int(starts[i]) - reach) for i in free}
    high = {i: int(starts[i]) + reach for i in free}
    # rounds origin .. span - 1 hold every last round a freed request can run in
    origin, span = min(low.values()), max(high[i] + o[i] for i in free)
    others = np.ones(instance.n, dtype=bool)
    others[free] = False
    fixed = load_profile(instance, starts, origin, span, others)  # what the others hold

    model = cp_model.CpModel()
    place = {i: model.new_int_var(low[i], high[i], f"q{i}") for i in free}

    def tokens_at(j: int, first: int, last: int, end: Any, name: str) -> list[Any]:
        """``j``'s tokens in a last round ending at ``end`` (``C_e``, in ``[first, last]``),
        or nothing if ``j`` cannot run in it."""
        if high[j] + o[j] - first < 0 or low[j] + o[j] - last > o[j] - 1:
            return []  # C_j - C_e is then < 0, or >= o_j, for every choice
        return [_held_tokens(model, place[j] + o[j] - end, o[j], peak[j], name)[1]]

    ends = (starts + instance.output)[others]
    for end in np.unique(ends[(ends > origin) & (ends <= span)]).tolist():
        if budget.expired():  # the model is built under the cap too
            return unchanged
        terms = [h for j in free for h in tokens_at(j, end, end, end, f"r{end}_{j}")]
        if terms:
            model.add(int(fixed[end - 1 - origin]) + sum(terms) <= memory)
    for e in free:
        if budget.expired():
            return unchanged
        first, last = low[e] + o[e], high[e] + o[e]
        base = model.new_int_var(0, memory, f"F{e}")
        values = fixed[first - 1 - origin : last - origin].tolist()
        model.add_element(place[e] - low[e], values, base)
        end = place[e] + o[e]
        terms = [h for j in free if j != e for h in tokens_at(j, first, last, end, f"e{e}_{j}")]
        model.add(base + peak[e] + sum(terms) <= memory)
    total = sum(place.values())
    model.add(total <= int(starts[free].sum()))  # the given starts are a solution
    model.minimize(total)
    for i in free:
        model.add_hint(place[i], int(starts[i]))

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    seconds = budget.seconds(floor=0.01)
    if seconds is not None:
        solver.parameters.max_time_in_seconds = seconds
    solver.parameters.max_deterministic_time = work
    if budget.expired():
        return unchanged
    code = _interruptible_solve(solver, model)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
        # INFEASIBLE although the given starts are a solution, or MODEL_INVALID
        raise SolverError(f"repair_window: CP-SAT answered {solver.status_name(code)}")
    found = starts.copy()
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        for i in free:
            found[i] = solver.value(place[i])
    # CP-SAT may stop without a solution although the given starts are one: its bound then
    # still proves them optimal if it reaches their sum
    proven = code == cp_model.OPTIMAL or solver.best_objective_bound >= found[free].sum()
    gain = int(starts[free].sum() - found[free].sum())  # only the freed requests moved
    return WindowRepair(found, Status.OPTIMAL if proven else Status.TIME_LIMIT, gain)
