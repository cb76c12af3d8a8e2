r"""Adaptive large-neighbourhood search over priority orders (``alns``).

A solution is a priority order, valued, as in :mod:`~schedlab.offline.solvers.local_search`,
by the total latency of its strict list schedule. Each iteration *destroys* part of the
current order and *repairs* it, by one of :data:`OPERATORS`, chosen by roulette wheel
over adaptive weights:

``move``
    One swap or insertion of two positions at most ``width`` apart (local search's move).
``block``
    A block of 2 to ``block`` consecutive requests moved, in its order, at most
    ``width`` positions away.
``permute``
    The ``permute`` consecutive requests from a random position are re-sequenced
    *exactly*: all :math:`k! - 1` other orders of the window are evaluated, the best kept
    (the rest of the order fixed, the window's optimum for the strict decode).
``reinsert``
    ``remove`` requests drawn from ``width`` consecutive positions are taken out and
    put back one at a time, each at its best position among them (greedy repair,
    every position evaluated).

An operator returns its best candidate. The candidate of value :math:`v` replaces the
current order, of value :math:`c`, by the simulated-annealing criterion of Ropke and
Pisinger ("An adaptive large neighborhood search heuristic for the pickup and delivery
problem with time windows", Transportation Science 40(4), 2006): always when
:math:`v \le c`, else with probability :math:`e^{-(v - c)/T}`, where the temperature
falls geometrically with the fraction :math:`f` of the work budget spent,

.. math:: T = c_0 \, \tau_0 \left(\tau_1 / \tau_0\right)^{f},

:math:`c_0` the start objective, :math:`\tau_0` = ``start_temperature`` and
:math:`\tau_1` = ``end_temperature`` (relative). With no work budget (``work=None``)
:math:`f` is the fraction of the wall-clock cap spent instead, so that a longer cap
anneals more slowly; the run then depends on the machine (``stats["stopped_by"]``).
By default :math:`\tau_0 = 0.1 / n` and :math:`\tau_1 = \tau_0 / 100`
(:data:`START_TEMPERATURE`): the start temperature is a tenth of the start's mean
latency :math:`c_0 / n`. A move shifts the starts of the requests after it by a few
rounds, so its change of the total grows like the mean latency, not like the total; at
the fixed ``1e-3`` of before the search ended higher on n = 1,000 (``docs/design.md``,
"Decision record", gives the trials). An end by ``idle`` comes before the annealing is
done: the temperature has fallen only by the share of ``work`` spent, so ``work`` sets
the cooling rate, and a smaller ``work`` cools fully in about the same time; the idle end
trades that for one setting that serves every size.

Weights follow the same paper: an operator scores :math:`\sigma_1 = 33` for a new best
order, :math:`\sigma_2 = 9` for an improvement of the current one, :math:`\sigma_3 = 13`
for an accepted worse one; every ``segment`` iterations its weight becomes
:math:`(1 - r) w + r \cdot \text{score}/\text{uses}` (reaction ``r``), never below 1.

Work (:mod:`schedlab.budget`): the unit is one evaluated order (a strict decode, done
incrementally on backlogs by :class:`~schedlab.offline.solvers.order_evaluator.OrderEvaluator`),
at most :data:`DEFAULT_EVALUATIONS` by default on a backlog and
:data:`RELEASE_EVALUATIONS` with release times, where every evaluation is a full decode in
Python; an operator that would overrun the budget is not run. The search also ends by
itself once ``idle`` evaluations (:data:`DEFAULT_IDLE`) have passed since the best
objective last fell. All randomness
comes from one ``numpy.random.Generator`` seeded by ``seed``, so the same instance,
settings and seed give the same order. The best order ever seen is
returned: never worse than the start.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import permutations
from typing import Any

import numpy as np

from schedlab.budget import UNLIMITED, Budget, stopped_by
from schedlab.errors import InputError
from schedlab.offline.decoder import check_order, decode_best, list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.priority import rule_schedule
from schedlab.offline.result import SolverOutput
from schedlab.offline.schedule import total_latency
from schedlab.offline.solvers.contract import integer_option
from schedlab.offline.solvers.left_shift import left_shift
from schedlab.offline.solvers.local_search import (
    best_start_order,
    random_move,
    require_search_memory,
)
from schedlab.offline.solvers.order_evaluator import Move, OrderEvaluator, checkpoint_spacing

__all__ = [
    "DEFAULT_EVALUATIONS",
    "DEFAULT_IDLE",
    "OPERATORS",
    "RELEASE_EVALUATIONS",
    "START_TEMPERATURE",
    "ALNSSettings",
    "alns",
    "improve_alns",
]

#: The destroy-and-repair operators (module docs).
OPERATORS: tuple[str, ...] = ("move", "block", "permute", "reinsert")

#: Orders ``alns`` evaluates at most by default (``work="auto"``): on a backlog, and
#: with release times, where every evaluation is a full decode in Python (the budget
#: before the idle end; a read-only review measured 228,768 evaluations, 43 s, before
#: the idle end on ``mixed_backlog(1000)`` with releases ``3 i``).
DEFAULT_EVALUATIONS, RELEASE_EVALUATIONS = 400_000, 40_000

#: Evaluations since the best objective last fell at which ``alns`` ends by default.
DEFAULT_IDLE = 20_000

#: The default start temperature times ``n`` (module docs): a tenth of the mean latency.
START_TEMPERATURE = 0.1

#: Scores of an operator's outcome (Ropke and Pisinger 2006): new best, better, accepted.
_SCORES = (33.0, 9.0, 13.0)

#: The largest ``permute`` window (``k!`` orders per iteration).
MAX_PERMUTE = 7


@dataclass(frozen=True)
class ALNSSettings:
    """How :func:`improve_alns` searches (module docs).

    Attributes
    ----------
    work
        The work budget: orders evaluated, at most (``"auto"``: :data:`DEFAULT_EVALUATIONS`
        on a backlog, :data:`RELEASE_EVALUATIONS` with release times; ``None``: only the
        wall-clock cap or ``idle`` ends it, and the annealing runs over the cap).
    idle
        The search's own end: evaluations since the best objective last fell (``None``:
        never).
    width
        Positions within which ``move``, ``block`` and ``reinsert`` act.
    block
        Longest block ``block`` moves.
    permute
        Requests ``permute`` re-sequences exactly (``k!`` orders), 2 to :data:`MAX_PERMUTE`.
    remove
        Requests ``reinsert`` takes out, at most ``width``.
    start_temperature, end_temperature
        Annealing temperatures relative to the start objective, ``start >= end > 0``
        (``None``: :data:`START_TEMPERATURE` ``/ n``, raised to ``end_temperature`` when
        that is higher, and a hundredth of the start temperature; :meth:`temperatures`).
    segment
        Iterations between weight updates.
    reaction
        Weight reaction factor in ``[0, 1]``.
    operators
        The operators drawn from, a non-empty subset of :data:`OPERATORS`.

    Raises
    ------
    InputError, InputTypeError
        On a value out of range.
    """

    work: int | str | None = "auto"
    idle: int | None = DEFAULT_IDLE
    width: int = 16
    block: int = 6
    permute: int = 4
    remove: int = 3
    start_temperature: float | None = None
    end_temperature: float | None = None
    segment: int = 100
    reaction: float = 0.2
    operators: tuple[str, ...] = OPERATORS

    def __post_init__(self) -> None:
        unknown = sorted(set(self.operators) - set(OPERATORS))
        if unknown or not self.operators or len(set(self.operators)) < len(self.operators):
            raise InputError(
                f"alns: operators must be distinct names among {', '.join(OPERATORS)}, "
                f"got {self.operators!r}"
            )
        if self.work != "auto" and self.work is not None:
            also = ", 'auto' or None"
            work = integer_option("alns", "work", self.work, also)
            if work < 0:
                raise InputError(f"alns: work must be >= 0, got {work}")
            object.__setattr__(self, "work", work)
        if self.idle is not None:
            idle = integer_option("alns", "idle", self.idle, ", or None")
            if idle < 1:
                raise InputError(f"alns: idle must be >= 1 or None, got {idle}")
            object.__setattr__(self, "idle", idle)
        for name in ("width", "segment"):
            if getattr(self, name) < 1:
                raise InputError(f"alns: {name} must be >= 1, got {getattr(self, name)}")
        if self.block < 2:
            raise InputError(f"alns: block must be >= 2, got {self.block}")
        if not 2 <= self.permute <= MAX_PERMUTE:
            raise InputError(
                f"alns: permute must be in 2..{MAX_PERMUTE} ({MAX_PERMUTE}! orders per "
                f"iteration at most), got {self.permute}"
            )
        if not 1 <= self.remove <= self.width:
            raise InputError(f"alns: remove must be in 1..width ({self.width}), got {self.remove}")
        for name in ("start_temperature", "end_temperature"):
            value = getattr(self, name)
            real = isinstance(value, numbers.Real) and not isinstance(value, bool)
            if value is not None and not (real and 0 < value < math.inf):
                raise InputError(f"alns: {name} must be a finite number > 0, got {value!r}")
        start, end = self.start_temperature, self.end_temperature
        if start is not None and end is not None and end > start:
            raise InputError(
                "alns: temperatures must satisfy 0 < end_temperature <= start_temperature, "
                f"got {start:g} and {end:g}"
            )
        if not 0 <= self.reaction <= 1:
            raise InputError(f"alns: reaction must be in [0, 1], got {self.reaction}")

    def work_budget(self, instance: Instance) -> int | None:
        """The most orders to evaluate on ``instance`` (``"auto"`` resolved)."""
        if self.work != "auto":
            return self.work  # type: ignore[return-value]  # an int or None here
        backlog = int(instance.arrival.max()) == 0
        return DEFAULT_EVALUATIONS if backlog else RELEASE_EVALUATIONS

    def temperatures(self, n: int) -> tuple[float, float]:
        """The start and end temperatures for ``n`` requests, relative to the start
        objective, defaults filled in: the start :data:`START_TEMPERATURE` ``/ n``, or the
        end temperature if that is higher (a constant temperature); the end a hundredth of
        the start."""
        end = self.end_temperature
        start = self.start_temperature
        if start is None:
            start = max(START_TEMPERATURE / max(n, 1), end or 0.0)
        return start, start / 100 if end is None else end


#: An operator: the current order, a generator and the settings in; candidate orders
#: with the first and last positions they change out, lazily.
Operator = Callable[
    [list[int], np.random.Generator, "ALNSSettings"], Iterator[tuple[list[int], int, int]]
]


def _move(
    order: list[int], rng: np.random.Generator, s: ALNSSettings
) -> Iterator[tuple[list[int], int, int]]:
    new, lo, hi = random_move(np.asarray(order, dtype=np.int64), rng, s.width)
    yield new.tolist(), lo, hi


def _block(
    order: list[int], rng: np.random.Generator, s: ALNSSettings
) -> Iterator[tuple[list[int], int, int]]:
    n = len(order)
    length = int(rng.integers(2, min(s.block, n - 1) + 1))
    i = int(rng.integers(n - length + 1))
    rest = order[:i] + order[i + length :]
    j = int(np.clip(i + rng.integers(-s.width, s.width + 1), 0, len(rest)))
    if j == i:
        j = i + 1 if i < len(rest) else i - 1
    new = rest[:j] + order[i : i + length] + rest[j:]
    yield new, min(i, j), max(i, j) + length - 1


def _permute(
    order: list[int], rng: np.random.Generator, s: ALNSSettings
) -> Iterator[tuple[list[int], int, int]]:
    k = min(s.permute, len(order))
    lo = int(rng.integers(len(order) - k + 1))
    window = order[lo : lo + k]
    for perm in permutations(window):
        if list(perm) != window:
            yield order[:lo] + list(perm) + order[lo + k :], lo, lo + k - 1


def _permute_cost(s: ALNSSettings, n: int) -> int:
    return math.factorial(min(s.permute, n)) - 1


#: Operators by name, and the most evaluations one iteration of each costs.
_OPERATORS: dict[str, Operator] = {"move": _move, "block": _block, "permute": _permute}


@dataclass
class _Search:
    """The current order, its evaluator (backlogs) and the count of evaluations."""

    instance: Instance
    order: list[int]
    evaluator: OrderEvaluator | None
    value: int
    evaluations: int = 0

    @classmethod
    def start(cls, instance: Instance, order: list[int]) -> _Search:
        if int(instance.arrival.max()) == 0:
            spacing = checkpoint_spacing(instance.n, exact=True)  # every evaluation is exact
            evaluator = OrderEvaluator(instance, np.array(order), spacing)
            return cls(instance, order, evaluator, evaluator.objective())
        value = total_latency(instance, list_schedule(instance, order))
        return cls(instance, order, None, value)

    def evaluate(self, order: list[int], lo: int, hi: int) -> tuple[int, Move | None]:
        """Exact objective of ``order`` (equal to the current one outside ``lo..hi``)."""
        self.evaluations += 1
        if self.evaluator is None:
            return total_latency(self.instance, list_schedule(self.instance, order)), None
        move = self.evaluator.evaluate(order, lo, hi)
        assert move is not None  # no screen: every evaluation is exact
        return move.total + self.evaluator.output_total, move

    def accept(self, order: list[int], value: int, move: Move | None) -> None:
        if self.evaluator is not None and move is not None:
            self.evaluator.accept(order, move)
        self.order, self.value = order, value

    def reinsert(
        self, rng: np.random.Generator, s: ALNSSettings
    ) -> tuple[list[int], int, Move | None]:
        """``reinsert``'s candidate (module docs), each put-back evaluated exactly."""
        n = len(self.order)
        width = min(s.width, n)
        lo = int(rng.integers(n - width + 1))
        taken = sorted(rng.choice(width, size=min(s.remove, width), replace=False).tolist())
        removed = [self.order[lo + k] for k in taken]
        partial = [x for k, x in enumerate(self.order[lo : lo + width]) if k not in taken]
        best: tuple[int, list[int], Move | None] = (self.value, self.order, None)
        for r, request in enumerate(removed):
            candidates = []
            for at in range(len(partial) + 1):
                trial = [*partial[:at], request, *partial[at:]]
                # the window holds the requests still out at its end while others go back
                candidates.append(trial + removed[r + 1 :])
            scored = []
            for window_order in candidates:
                order = self.order[:lo] + window_order + self.order[lo + width :]
                value, move = self.evaluate(order, lo, lo + width - 1)
                scored.append((value, window_order, order, move))
            value, window_order, order, move = min(scored, key=lambda x: x[0])
            partial = window_order[: len(partial) + 1]
            best = (value, order, move)
        return best[1], best[0], best[2]


def _reinsert_cost(s: ALNSSettings, n: int) -> int:
    width = min(s.width, n)
    r = min(s.remove, width)
    return sum(width - r + k + 1 for k in range(r))


def improve_alns(
    instance: Instance,
    order: np.ndarray,
    settings: ALNSSettings,
    *,
    budget: Budget = UNLIMITED,
    seed: int = 0,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Improve ``order`` by adaptive large-neighbourhood search (module docs).

    Stops when ``settings.work_budget(instance)`` orders were evaluated (its
    ``work``, ``"auto"`` resolved), when ``settings.idle``
    evaluations have passed since the best objective last fell, or when ``budget``'s cap
    passes, whichever comes first; the work budget or the cap must be set (the
    annealing runs over one of them). Returns the best order seen and statistics:
    iterations, evaluations, the evaluations made when the best last fell (``best_at``),
    accepted and improving iterations, per-operator uses and final weights, the
    objective at the start and the best, and ``stopped_by`` (``None`` when the search
    ended by itself).
    """
    # Over 100 lines by design: one search loop: the choice of operator, the acceptance and the
    # weights' update read together, as Ropke and Pisinger state the algorithm.
    if not budget.limited and settings.work is None:
        raise InputError("alns: set time_limit or work (the annealing runs over one of them)")
    n = instance.n
    start_temperature, end_temperature = settings.temperatures(n)
    current = check_order(order, n)
    began = time.perf_counter()
    search = _Search.start(instance, current)
    start_value = best_value = search.value
    best_order = current
    # a block of two or more moved elsewhere needs three requests
    names = tuple(name for name in settings.operators if name != "block" or n >= 3)
    uses = dict.fromkeys(names, 0)
    stats: dict[str, Any] = {"start_objective": start_value}
    if n < 2 or not names:
        return np.array(best_order), {
            **stats,
            "iterations": 0,
            "evaluations": 0,
            "best_at": 0,
            "objective_strict": best_value,
            "stopped_by": None,
        }
    rng = np.random.default_rng(seed)
    weights: np.ndarray = np.ones(len(names))
    scores = np.zeros(len(names))
    counts = np.zeros(len(names))
    costs = {
        "move": 1,
        "block": 1,
        "permute": _permute_cost(settings, n),
        "reinsert": _reinsert_cost(settings, n),
    }
    ratio = end_temperature / start_temperature
    limit, idle = settings.work_budget(instance), settings.idle
    iterations = accepted = improved = best_at = 0
    stopped: str | None = None
    while True:
        if idle is not None and search.evaluations - best_at >= idle:
            break
        if budget.expired():
            stopped = "time_limit"
            break
        if limit is not None and search.evaluations >= limit:
            stopped = "work"
            break
        affordable = [
            k
            for k, name in enumerate(names)
            if limit is None or search.evaluations + costs[name] <= limit
        ]
        if not affordable:
            stopped = "work"
            break
        w = weights[affordable]
        k = affordable[int(rng.choice(len(affordable), p=w / w.sum()))]
        name = names[k]
        if limit is not None:
            spent = search.evaluations / limit
        else:
            spent = min(1.0, (time.perf_counter() - began) / max(budget.time_limit or 1.0, 1e-9))
        temperature = start_value * start_temperature * ratio**spent
        threshold = -temperature * math.log(1.0 - rng.random())  # accept v <= c + threshold
        if name == "reinsert":
            candidate, value, move = search.reinsert(rng, settings)
        else:
            value, candidate, move = search.value + 1, search.order, None
            found = False
            for trial, lo, hi in _OPERATORS[name](search.order, rng, settings):
                v, m = search.evaluate(trial, lo, hi)
                if not found or v < value:
                    value, candidate, move, found = v, trial, m, True
        uses[name] += 1
        counts[k] += 1
        iterations += 1
        if value <= search.value + threshold and candidate != search.order:
            score = _SCORES[2]
            if value < search.value:
                improved += 1
                score = _SCORES[1]
            search.accept(candidate, value, move)
            accepted += 1
            if value < best_value:
                best_value, best_order, best_at = value, candidate, search.evaluations
                score = _SCORES[0]
            scores[k] += score
        if iterations % settings.segment == 0:
            used = counts > 0
            weights[used] = (1 - settings.reaction) * weights[used] + settings.reaction * (
                scores[used] / counts[used]
            )
            weights = np.maximum(weights, 1.0)
            scores[:] = 0
            counts[:] = 0
    elapsed = time.perf_counter() - began
    return np.array(best_order, dtype=np.int64), {
        **stats,
        "iterations": iterations,
        "evaluations": search.evaluations,
        "best_at": best_at,
        "evaluations_per_s": search.evaluations / elapsed if elapsed > 0 else 0.0,
        "accepted": accepted,
        "improved": improved,
        "uses": uses,
        "weights": dict(zip(names, (round(float(x), 3) for x in weights), strict=True)),
        "objective_strict": best_value,
        "stopped_by": stopped,
    }


def alns(
    instance: Instance,
    *,
    budget: Budget = UNLIMITED,
    seed: int = 0,
    work: int | str | None = "auto",
    idle: int | None = DEFAULT_IDLE,
    width: int = 16,
    block: int = 6,
    permute: int = 4,
    remove: int = 3,
    start_temperature: float | None = None,
    end_temperature: float | None = None,
) -> SolverOutput:
    """Adaptive large-neighbourhood search from the best rule's order (module docs).

    The start is the order, among the rules' and Sorted-F's, with the best strict
    schedule. Returned is the best of: the search's best order decoded strict, strict then
    compacted by :func:`~schedlab.offline.solvers.left_shift.left_shift`, and
    backfilling; the same three decodes of the start order; and the ``mc-sf-backfill``
    schedule. So the search never returns worse than its own start's schedules, nor than
    the best rule; once the wall-clock cap has passed, the two backfilling decodes of the
    orders are left out (each takes about 5 s at ``n = 10^6``). Options are the fields of
    :class:`ALNSSettings`.
    """
    settings = ALNSSettings(
        work, idle, width, block, permute, remove, start_temperature, end_temperature
    )
    # decoded first, so that a wall-clock cap counts it (5 s at n = 10^6)
    mc_sf = rule_schedule(instance, "mc-sf-backfill")
    require_search_memory("alns", instance, budget)
    first, start = best_start_order(instance, budget=budget.share(0.25))
    order, stats = improve_alns(instance, first, settings, budget=budget.share(0.95), seed=seed)
    first_strict = list_schedule(instance, first)
    # the search's own order first: under a short cap the start's shift gets what is left
    strict = list_schedule(instance, order)
    shifted, shift = left_shift(instance, strict, budget=budget)
    shifted_start, shift_start = left_shift(instance, first_strict, budget=budget)
    others = {
        "strict+left-shift": shifted,
        "start-strict": first_strict,
        "start-strict+left-shift": shifted_start,
    }
    if not budget.expired():
        others["start-backfill"] = list_schedule(instance, first, backfill=True)
    others["mc-sf-backfill"] = mc_sf  # last, as before: ties keep the earlier name
    starts, chosen = decode_best(instance, order, others, budget=budget, strict=strict)
    chosen = {**chosen, "left_shift": shift, "start_left_shift": shift_start}
    stats["stopped_by"] = stopped_by(
        stats["stopped_by"], shift["stopped_by"], shift_start["stopped_by"]
    )
    return SolverOutput(starts, stats={**stats, "start": start, **chosen})
