"""Fluid-spacing bound: completion spacing on the mean-busy-time bound's own prices.

The completion-spacing bound (:mod:`schedlab.offline.bounds.completion_spacing`) adds to
a Lagrangian value ``L(λ)`` the memory that integer schedules must leave free between
completions. There the prices come from the time-indexed LP, and the minimum over starts
is taken start by start, ``n T`` start costs an evaluation: up to about a thousand
requests. This module takes the prices of the mean-busy-time bound instead. With
``v_(1) <= ... <= v_(n)`` the sorted volumes, ``V_k`` their prefix sums and
``c_k = 1/v_(k) - 1/v_(k+1)`` (``1/v_(n+1) = 0``), the *busy-time prices* are

.. math:: λ_t = \\sum_k c_k \\Bigl(\\frac{V_k}{M} - t - \\tfrac12\\Bigr)^+ ,

the weight that summing the parallel inequalities by parts
(:mod:`schedlab.offline.bounds.mean_busy_time`) puts on a unit of memory in round ``t``:
``λ_0 ≈ n / M``, falling by ``1 / v_(k)`` a round while the fluid schedule serves its
``k``-th smallest request, ``0`` once all volume is served. Being a positive sum of hinges,
``λ`` is non-negative, non-increasing and convex, which makes the bound cheap:

* the start cost ``f_i(τ) = τ + o_i - a_i + sum_{u=τ}^{τ+o_i-1} λ_u (s_i + u - τ + 1)`` is
  convex in ``τ`` (a positive combination of shifted copies of ``λ`` plus ``τ``), so its
  minimum over every start ``τ >= a_i`` is found by bisection on ``f_i(τ+1) - f_i(τ)``
  (summed by parts, which keeps its sign where ``f_i`` is nearly flat);
* the waste term of a start only falls as the start moves later (prices fall), so for
  the starts of a block ``[β, β')`` it is at least its value at the block's last start.

Request ``i``'s active rounds are cut by age into :data:`PIECES` pieces
``[⌊o_i q / P⌋, ⌊o_i (q+1) / P⌋)``; a piece of ``ℓ`` rounds at age ``α`` carries
``min_m λ_min (ℓ - m)(ℓ + 1) / (2(m + 1)) + ν (s_i + α + 1) m`` (``piece_waste``), with
``λ_min`` the price of its last round. The starts ``[a_i, max(a_i, T)]`` are cut into
blocks of :data:`BLOCKS`-th of the horizon ``T`` and the bound is

.. math::

    L^F(ν) = \\sum_i \\min_{\\text{blocks } B} \\Bigl[\\min_{τ \\in B} f_i(τ)
    + \\sum_{\\text{pieces}} \\text{piece\\_waste}\\bigl(λ_{\\max B + α + ℓ - 1}, ℓ,
    s_i + α + 1, ν\\bigr)\\Bigr] - M \\sum_t λ_t - ν M n \\;\\le\\; \\mathrm{OPT}.

The blocks before the best start's cannot hold the minimum, and after it only a run of
blocks whose least start cost lies below the bracket at the best start can (one more
bisection, ``f_i`` being convex). ``ν`` is chosen by the same golden-section search as
for the completion-spacing bound. The value is reduced by a bound on its rounding error
(``FluidSpacing.rounding``; prefix sums in two levels keep it small). Cost: the prices'
prefix sums once (``O(T)``), ``O(n log T)`` start costs, then per evaluation (16 of
them) ``O(n log T)`` more and the pruned blocks, about 20 a request on mixed backlogs
(``benchmarks/bounds_scaling.py`` times it).

Release dates do not enter the prices (the bound stays valid for every instance, but it
is meant for backlogs released together, where the mean-busy-time bound is the fluid
optimum). Proof and tests: ``proofs/fluid_spacing.md``. Sources: the prices are the dual
weights of the parallel inequalities (Queyranne 1993; Goemans 1997); the Lagrangian is
that of the time-indexed relaxation (Sousa & Wolsey 1992); the spacing lemma and the
waste term are ours (``proofs/completion_spacing.md``).
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.errors import InputError
from schedlab.offline.bounds.bound import Bound, integer_bound
from schedlab.offline.bounds.completion_spacing import piece_waste, search_multiplier
from schedlab.offline.bounds.time_indexed import MAX_HORIZON, RoundPrices, check_horizon
from schedlab.offline.instance import Instance

__all__ = [
    "BLOCKS",
    "MAX_HORIZON",
    "PIECES",
    "FluidSpacing",
    "busy_time_prices",
    "fluid_spacing",
    "fluid_spacing_search",
    "price_horizon",
]

#: Age pieces per request (2 and 4 were best on the shipped mixed n = 1,000, 8 and 16 lower).
PIECES = 2

#: Start blocks per horizon: the block width is ``ceil(T / BLOCKS)`` rounds.
BLOCKS = 1024

#: Relative safety margin against floating-point error, of the magnitudes the value sums.
_SAFETY = 1e-9

#: (request, block) pairs priced at once (bounds working memory).
_CHUNK_PAIRS = 1_000_000


def price_horizon(instance: Instance) -> int:
    """``T``, the number of rounds with a positive price: the first ``t`` with
    ``t + 1/2 >= V_n / M`` (at least 1)."""
    return max(1, math.ceil(float(instance.volume.sum()) / instance.kv_tokens - 0.5))


def busy_time_prices(instance: Instance) -> np.ndarray:
    """``λ_t`` for ``t = 0 .. T-1`` (see module docs); ``λ_T = 0`` and every later price.

    ``T`` is the first round with ``t + 1/2 >= V_n / M``. Computed in ``O(n log n + T)``
    as ``a_k - (t + 1/2) b_k`` with suffix sums ``a_k = sum_{j >= k} c_j V_j / M`` and
    ``b_k = sum_{j >= k} c_j`` over the ``k`` whose ``V_k / M`` exceeds ``t + 1/2``.
    """
    v = np.sort(instance.volume).astype(float)
    due = np.cumsum(v) / instance.kv_tokens  # V_k / M, non-decreasing
    c = 1.0 / v - np.append(1.0 / v[1:], 0.0)
    middle = np.arange(price_horizon(instance)) + 0.5
    first = np.searchsorted(due, middle, side="right")  # the first k with V_k / M > t + 1/2
    a = np.append(np.cumsum((c * due)[::-1])[::-1], 0.0)
    b = np.append(np.cumsum(c[::-1])[::-1], 0.0)
    # exactly non-increasing and >= 0 in floating point too (a running minimum only picks)
    return np.minimum.accumulate(np.maximum(a[first] - middle * b[first], 0.0))


def _count(value: object, name: str) -> int:
    """``value`` as an integer ``>= 1``, or a one-line error naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InputError(f"fluid_spacing: {name} must be an integer >= 1, got {value!r}")
    return int(value)


def _first(
    test: Callable[[np.ndarray, np.ndarray], np.ndarray],
    req: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    deadline: float,
) -> np.ndarray:
    """Least ``τ`` in ``[lo, hi)`` with ``test(req, τ)``, or ``hi`` if there is none, for a
    test monotone in ``τ`` (false, then true); by bisection, all requests at once.

    Raises :class:`TimeoutError` between steps once ``deadline`` (a ``time.perf_counter``
    instant) has passed.
    """
    lo, hi = lo.copy(), hi.copy()
    while (open_ := hi > lo).any():
        if time.perf_counter() > deadline:
            raise TimeoutError
        mid = (lo + hi) // 2
        ok = test(req, mid)
        hi = np.where(open_ & ok, mid, hi)
        lo = np.where(open_ & ~ok, mid + 1, lo)
    return lo


class FluidSpacing:
    """``L^F(ν)`` of an instance for any ``ν`` (see module docs), with its fixed parts.

    Builds the prices, each request's best start ``argmin_τ f_i(τ)`` and the block width
    once; :meth:`value` then evaluates ``L^F`` at a multiplier.

    Parameters
    ----------
    instance
        The instance.
    pieces
        Age pieces per request (default :data:`PIECES`).
    blocks
        Start blocks per horizon (default :data:`BLOCKS`; ``T`` blocks of one start each
        take the minimum over every start exactly).
    deadline
        A ``time.perf_counter`` instant: :class:`TimeoutError` if the set-up passes it
        (default: none).

    Raises
    ------
    InputError
        If ``pieces`` or ``blocks`` is not an integer ``>= 1``.
    HorizonError
        If the horizon exceeds :data:`MAX_HORIZON`.
    """

    def __init__(
        self,
        instance: Instance,
        *,
        pieces: int = PIECES,
        blocks: int = BLOCKS,
        deadline: float = math.inf,
    ) -> None:
        self.pieces = _count(pieces, "pieces")
        blocks = _count(blocks, "blocks")
        horizon = price_horizon(instance)
        check_horizon(horizon, "fluid_spacing")
        self.instance = instance
        self.prices = busy_time_prices(instance)
        self.horizon = len(self.prices)
        self.width = math.ceil(self.horizon / blocks)
        self.priced = instance.kv_tokens * float(self.prices.sum())
        self._table = RoundPrices(np.arange(self.horizon + 1), self.prices, split_sums=True)
        self._top = np.maximum(instance.arrival, self.horizon).astype(np.int64)
        req = np.arange(instance.n)
        # f_i is convex: its minimiser is the first start whose forward difference is >= 0
        self.best_start = _first(
            lambda r, tau: self._table.cost_steps(instance, tau, r) >= 0,
            req,
            instance.arrival.astype(np.int64),
            self._top,
            deadline,
        )
        self.best_cost = self.costs(req, self.best_start)
        s_max, o_max = float(instance.prompt.max()), float(instance.output.max())
        cost_error, step_error = self._table.rounding(s_max, float(self._top.max() + 1), o_max)
        # the stored prices' first differences may fall by a few units in the last place
        # (rounding): the largest fall, plus the error of computing it, weighted as in f_i
        steps = np.diff(np.append(self.prices, [0.0, 0.0]))
        fall = float((np.maximum.accumulate(steps) - steps).max())
        fall += 4 * np.finfo(float).eps * float(self.prices[0])
        step_error += o_max * (s_max + o_max) * fall
        #: Rounding error :meth:`value` may carry beyond its relative ``1e-9``: per request,
        #: three start costs and a minimiser off by ``step_error`` a round over its starts
        #: (``proofs/fluid_spacing.md``, Floating point).
        spans = (self._top - instance.arrival + 2).astype(float)
        self.rounding = 3 * instance.n * cost_error + step_error * float(spans.sum())

    def costs(self, req: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """``f_i(τ)`` for requests ``req`` at starts ``tau`` (arrays of one shape)."""
        return self._table.start_costs(self.instance, tau, req)

    def waste(self, req: np.ndarray, last: np.ndarray, nu: float) -> np.ndarray:
        """The pieces' waste of requests ``req`` started at ``last`` or earlier (prices are
        taken at the rounds a start at ``last`` gives, the least of any earlier start)."""
        o = self.instance.output[req]
        s = self.instance.prompt[req].astype(float)
        total = np.zeros(len(req))
        for q in range(self.pieces):
            age, end = (o * q) // self.pieces, (o * (q + 1)) // self.pieces
            price = self._table.lam[np.clip(last + end - 1, 0, self.horizon)]
            total += piece_waste(price, end - age, s + age + 1, nu)
        return total

    def value(self, nu: float, deadline: float = math.inf) -> float:
        """``L^F(ν)`` before the safety margin; valid for every ``ν >= 0`` (a negative or
        NaN ``ν`` is taken as ``0``). Raises :class:`TimeoutError` between steps once
        ``deadline`` (a ``time.perf_counter`` instant) has passed.

        The blocks before the best start's cannot hold the minimum (their least start
        cost is at least the best, their waste at least that of the best start's block);
        after it, only the run of blocks whose least start cost lies below the bracket at
        the best start can (``proofs/fluid_spacing.md``, Claim 3).
        """
        nu = float(nu) if nu > 0 else 0.0  # NaN too
        n = self.instance.n
        req = np.arange(n)
        start = self.best_start
        ceiling = self.best_cost + self.waste(req, start, nu)
        # from T on no price is left: f_i grows, and the start max(a_i, T) is the last to try
        right = _first(
            lambda r, t: self.costs(r, t) >= ceiling[r], req, start, self._top + 1, deadline
        )
        first = start // self.width
        count = np.clip(right - 1, start, self._top) // self.width - first + 1
        ends = np.cumsum(count)
        total, lo = 0.0, 0
        while lo < n:
            if time.perf_counter() > deadline:
                raise TimeoutError
            hi = max(lo + 1, int(np.searchsorted(ends, ends[lo] - count[lo] + _CHUNK_PAIRS)))
            total += self._least_brackets(req[lo:hi], first[lo:hi], count[lo:hi], nu)
            lo = hi
        return total - self.priced - nu * self.instance.kv_tokens * n

    def _least_brackets(
        self, req: np.ndarray, first: np.ndarray, count: np.ndarray, nu: float
    ) -> float:
        """Sum over ``req`` of the least block bracket over ``count`` blocks from ``first``."""
        offset = np.cumsum(count) - count
        owner = np.repeat(req, count)
        block = np.repeat(first - offset, count) + np.arange(count.sum())
        lo = np.maximum(block * self.width, self.instance.arrival[owner])
        hi = np.minimum((block + 1) * self.width - 1, self._top[owner])
        nearest = np.clip(self.best_start[owner], lo, hi)
        bracket = self.costs(owner, nearest) + self.waste(owner, hi, nu)
        return float(np.minimum.reduceat(bracket, offset).sum())


def fluid_spacing_search(
    instance: Instance, *, budget: Budget | None = None
) -> tuple[float, dict[str, float | int | str | None]]:
    """``L^F`` at the best ``ν`` of a golden-section search (see module docs).

    Work: the set-up, ``L^F(0)`` and the steps of
    :func:`~schedlab.offline.bounds.completion_spacing.search_multiplier`, so the value
    depends only on the instance. Under the wall-clock cap of ``budget`` every step
    checks the time; an evaluation starts only when the last one's time fits, one cut
    short is discarded, and if the cap passes before ``L^F(0)`` is known the trivial bound
    ``sum_i o_i`` is returned. Returns the value (the larger of ``L^F(0) = L(λ)`` and the
    best ``L^F(ν)``, reduced by ``1e-9`` times the magnitudes it sums and by the bound on
    its rounding error, ``FluidSpacing.rounding``) and statistics.
    """
    budget = budget or Budget()
    deadline = budget.deadline
    check_horizon(price_horizon(instance), "fluid-spacing", budget)
    try:
        bound = FluidSpacing(instance, deadline=deadline)
        began = time.perf_counter()
        plain = bound.value(0.0, deadline)
    except TimeoutError:
        return float(instance.output.sum()), {
            "lagrangian": None,
            "rounding": None,
            "nu": 0.0,
            "horizon": price_horizon(instance),
            "evaluations": 0,
            "stopped_by": "time_limit",
        }
    search = search_multiplier(
        bound.value, float(bound.prices[0]), deadline, seconds=time.perf_counter() - began
    )
    best, nu = (search.value, search.nu) if search.value > plain else (plain, 0.0)
    # the relative margin is taken of the magnitudes summed (brackets, M sum λ, ν M n),
    # not of their difference, the value
    charged = bound.priced + nu * instance.kv_tokens * instance.n
    magnitude = abs(best) + 2 * charged
    return best - _SAFETY * magnitude - bound.rounding, {
        "lagrangian": plain,
        "rounding": float(bound.rounding),
        "nu": nu,
        "horizon": bound.horizon,
        "block_width": bound.width,
        "evaluations": search.evaluations + 1,
        "seconds_per_evaluation": search.seconds_per_evaluation,
        "stopped_by": "time_limit" if search.cut else None,
    }


def fluid_spacing(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
    """Busy-time prices plus the completion-spacing waste term (see module docs), rounded up."""
    began = time.perf_counter()
    value, stats = fluid_spacing_search(instance, budget=budget)
    return integer_bound("fluid-spacing", value, stats, began)
