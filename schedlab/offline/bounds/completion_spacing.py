"""Completion-spacing bound: the LP's Lagrangian plus memory that integer schedules must waste.

Integer schedules cannot keep memory full between completions: from a round ``t`` to the
next round ``e(t) >= t`` in which some request completes, every request active in ``t``
stays active and grows by one token per round, so

.. math:: M - \\mathrm{load}(t) \\ge |A(t)| \\, (e(t) - t)
   \\qquad\\text{(the completion-spacing lemma)}.

The time-indexed LP (and every fluid relaxation) misses this: its fractional completions
happen in every round. For prices ``λ_t >= 0`` (zero from ``T`` on) the Lagrangian
identity ``objective = sum_i f_i(p_i) - M sum_t λ_t + sum_t λ_t (M - load(t))`` (module
:mod:`schedlab.offline.bounds.time_indexed`) keeps the last, slack, term instead of dropping it.
Split request ``i``'s active rounds into *pieces* (its intersections with the fixed
time grid ``[qP, (q+1)P)``); a piece of ``ℓ`` rounds, at age ``α`` at its first round,
containing ``m`` completion rounds, carries slack weight at least
``λ_min (ℓ - m)(ℓ + 1) / (2(m + 1))`` (the rounds without a completion form at most ``m+1``
runs, each a triangle ``1 + 2 + ... + g``), with ``λ_min`` the least price on the piece.
Every completion round ``e`` holds at most ``M`` tokens, of which request ``i`` holds at
least ``s_i + α + 1``, and there are at most ``n`` completion rounds, so
``sum_{i, pieces} (s_i + α + 1) m <= M n``. Relaxing this with a multiplier ``ν >= 0``
makes the bound separable again:

.. math::

    L^+(μ, ν) = \\sum_i \\min_{τ \\ge a_i} \\Bigl[f_i(τ) + \\sum_{\\text{pieces}}
    \\min_{0 \\le m \\le ℓ} \\Bigl(λ_{\\min} \\frac{(ℓ - m)(ℓ+1)}{2(m+1)}
    + ν (s_i + α + 1) m\\Bigr)\\Bigr] - M \\sum_t λ_t - ν M n \\;\\le\\; \\mathrm{OPT}.

With ``ν = 0`` the inner minimum is ``0`` (``m = ℓ``) and ``L^+ = L(μ)``; so with the LP's
prices and the best ``ν`` (``L^+`` is concave in ``ν``; golden-section search) the bound is
never below the LP's certificate. The minimum over ``τ`` is taken over every start in
``[a_i, max(a_i, T)]`` (later starts only cost more), so this bound is meant for up to
about a thousand requests (``n (T + 1)`` start costs per evaluation). An evaluation runs
compiled (:mod:`schedlab.offline.bounds.compiled_spacing`) or as the NumPy reference here
(``engine="python"``), with the same value bit for bit
(``benchmarks/offline_targets.py --rows best`` times ``best`` and its methods).

Proof and tests: ``proofs/completion_spacing.md``. The Lagrangian is that of the
time-indexed relaxation (Sousa & Wolsey 1992; van den Akker, Hurkens & Savelsbergh 2000);
the spacing lemma and the waste term are ours.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.errors import InputError
from schedlab.offline.bounds.bound import Bound, integer_bound
from schedlab.offline.bounds.time_indexed import (
    ENGINES,
    LP_ROUNDS,
    RoundPrices,
    lp_relaxation,
    start_costs,
)
from schedlab.offline.instance import Instance

__all__ = [
    "NU_STEPS",
    "MultiplierSearch",
    "grid_minima",
    "piece_slack",
    "piece_waste",
    "search_multiplier",
    "spacing_bound_search",
    "spacing_value",
    "start_brackets",
]

#: Pieces per horizon: the grid step is ``ceil(T / _PIECES)`` rounds.
_PIECES = 32

#: Relative safety margin taken off every value against floating-point error.
_SAFETY = 1e-9

#: Start costs evaluated at once (bounds working memory).
_CHUNK_ENTRIES = 1_000_000

#: Golden-section steps over ``log ν``.
NU_STEPS = 14

#: An evaluation runs in at least this many chunks of requests; after each chunk its time
#: so far is extrapolated to the rest, so a deadline is overrun by at most about one chunk.
_MIN_CHUNKS = 16


def piece_slack(length: np.ndarray, completions: np.ndarray) -> np.ndarray:
    """``(ℓ - m)(ℓ + 1) / (2(m + 1))``: the least ``sum_t (e(t) - t)`` over a piece of ``ℓ``
    rounds of one request's active rounds that contains ``m`` completion rounds."""
    ell = np.asarray(length, dtype=float)
    m = np.asarray(completions, dtype=float)
    return (ell - m) * (ell + 1) / (2 * (m + 1))


def piece_waste(price: np.ndarray, length: np.ndarray, cost: np.ndarray, nu: float) -> np.ndarray:
    """``min_{0 <= m <= ℓ} price · piece_slack(ℓ, m) + ν cost m`` over real ``m``.

    With ``u = m + 1 in [1, ℓ + 1]`` the function is ``price (ℓ+1)^2/(2u) - price (ℓ+1)/2
    + ν cost (u - 1)``, convex in ``u``, least at ``u* = (ℓ+1) sqrt(price / (2 ν cost))``
    clipped to the range. ``0`` for empty pieces (``ℓ = 0``). Arguments broadcast.
    """
    ell = np.asarray(length, dtype=float) + 1.0
    price = np.asarray(price, dtype=float)
    rate = nu * np.asarray(cost, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        u = np.where(rate > 0, ell * np.sqrt(price / (2.0 * rate)), ell)
    u = np.clip(u, 1.0, ell)  # an overflow (tiny ν c) gives +inf, clipped to ℓ + 1
    value = price * ell * ell / (2.0 * u) - price * ell / 2.0 + rate * (u - 1.0)
    return np.where(ell > 1.0, value, 0.0)


def grid_minima(bounds: np.ndarray, mu: np.ndarray, step: int, reach: int) -> np.ndarray:
    """``λ_min`` of each grid cell ``[q step, (q+1) step)``: the least round price in it.

    ``mu`` holds the prices of the blocks ``bounds[k] .. bounds[k+1] - 1``; rounds from the
    horizon ``bounds[-1]`` on are priced ``0``. The cells cover at least the rounds up to
    ``reach``.
    """
    horizon = int(bounds[-1])
    cells = max(reach, horizon) // step + 3
    lam = np.zeros(cells * step)
    lam[:horizon] = np.repeat(np.asarray(mu, dtype=float), np.diff(bounds))
    return lam.reshape(cells, step).min(axis=1)


def _brackets(
    instance: Instance,
    bounds: np.ndarray,
    mu: np.ndarray,
    nu: float,
    step: int,
    req: np.ndarray,
    tau: np.ndarray,
) -> np.ndarray:
    """``f_i(τ) + sum_pieces min_m (...)`` for requests ``req`` (k,) at starts ``tau`` (k, w)."""
    horizon = int(bounds[-1])
    o = instance.output[req][:, None]
    s = instance.prompt[req][:, None]
    reach = int(tau.max() + o.max()) + 2 * step
    cell_min = grid_minima(bounds, mu, step, max(reach, horizon))
    flat = np.repeat(req, tau.shape[1])
    cost = start_costs(instance, bounds, mu, tau.ravel(), requests=flat).reshape(tau.shape)
    end = tau + o
    first = tau // step
    for j in range(int(o.max()) // step + 2):
        cell = first + j
        left = np.maximum(tau, cell * step)
        length = np.maximum(np.minimum(end, (cell + 1) * step) - left, 0)
        cost += piece_waste(cell_min[cell], length, s + (left - tau) + 1, nu)
    return cost


def start_brackets(
    instance: Instance,
    bounds: np.ndarray,
    mu: np.ndarray,
    nu: float,
    step: int,
    starts: np.ndarray,
) -> np.ndarray:
    """Each request's bracketed term of ``L^+`` at the given starts instead of its minimum.

    For a feasible schedule ``p``, ``sum(start_brackets(..., p)) - M sum_t λ_t - ν M n``
    is at most its objective (the chain of inequalities in the proof, before the
    minimum over starts); the tests check this on real schedules.
    """
    mu = np.maximum(np.asarray(mu, dtype=float), 0.0)
    starts = np.asarray(starts, dtype=np.int64)[:, None]
    return _brackets(
        instance, bounds, mu, max(float(nu), 0.0), step, np.arange(instance.n), starts
    )[:, 0]


def spacing_value(
    instance: Instance,
    bounds: np.ndarray,
    mu: np.ndarray,
    nu: float,
    step: int,
    *,
    engine: str = "compiled",
) -> float:
    """``L^+(μ, ν)`` with grid step ``step`` (see module docs), before any safety margin.

    Valid for every ``μ >= 0``, ``ν >= 0`` and ``step >= 1`` (negative prices and
    multipliers are raised to ``0``). ``engine``: ``"compiled"``, the kernel of
    :mod:`schedlab.offline.bounds.compiled_spacing`, or ``"python"``, the NumPy reference
    here; both give the same value bit for bit.

    Raises
    ------
    InputError
        If ``step < 1``, or on an unknown engine.
    """
    if step < 1:
        raise InputError(f"spacing_value: step must be >= 1, got {step}")
    if engine not in ENGINES:
        raise InputError(f"engine: must be one of {', '.join(ENGINES)}, got {engine!r}")
    return _spacing_value(instance, bounds, mu, nu, step, math.inf, engine)


def _spacing_value(
    instance: Instance,
    bounds: np.ndarray,
    mu: np.ndarray,
    nu: float,
    step: int,
    deadline: float,
    engine: str = "compiled",
) -> float:
    """:func:`spacing_value`, in chunks of at most ``n / _MIN_CHUNKS`` requests.

    Raises :class:`TimeoutError` after a chunk when the time taken so far, extrapolated
    linearly to the requests left, would end past ``deadline`` (a ``time.perf_counter``
    instant).
    """
    began = time.perf_counter()
    mu = np.maximum(np.asarray(mu, dtype=float), 0.0)
    nu = max(float(nu), 0.0)
    horizon = int(bounds[-1])
    n = instance.n
    width = horizon + 1
    rows = max(1, min(_CHUNK_ENTRIES // width, -(-n // _MIN_CHUNKS)))
    minima = _CompiledMinima(instance, bounds, mu, nu, step) if engine == "compiled" else None
    total = 0.0
    for lo in range(0, n, rows):
        hi = min(n, lo + rows)
        if minima is None:
            total += float(_chunk_minima(instance, bounds, mu, nu, step, lo, hi).sum())
        else:
            total += float(minima(lo, hi).sum())
        now = time.perf_counter()
        if hi < n and now + (now - began) * (n - hi) / hi > deadline:
            raise TimeoutError
    return total - instance.kv_tokens * float(mu @ np.diff(bounds)) - nu * instance.kv_tokens * n


def _chunk_minima(
    instance: Instance, bounds: np.ndarray, mu: np.ndarray, nu: float, step: int, lo: int, hi: int
) -> np.ndarray:
    """The least bracket of each request ``lo <= i < hi`` over every start (reference)."""
    horizon = int(bounds[-1])
    req = np.arange(lo, hi)
    top = np.maximum(instance.arrival[req], horizon)
    tau = np.clip(np.arange(horizon + 1)[None, :], instance.arrival[req][:, None], top[:, None])
    return _brackets(instance, bounds, mu, nu, step, req, tau).min(axis=1)


class _CompiledMinima:
    """:func:`_chunk_minima` by :func:`~schedlab.offline.bounds.compiled_spacing.
    spacing_kernel`, its tables built once for an evaluation."""

    def __init__(
        self, instance: Instance, bounds: np.ndarray, mu: np.ndarray, nu: float, step: int
    ) -> None:
        from schedlab.offline.bounds.compiled_spacing import spacing_kernel  # loads numba

        horizon = int(bounds[-1])
        prices = RoundPrices(bounds, mu)
        reach = int((np.maximum(instance.arrival, horizon) + instance.output).max()) + 2 * step
        self._kernel = spacing_kernel
        self._tables = np.stack([prices.p0, prices.p1, prices.lam])
        self._cells = grid_minima(bounds, mu, step, max(reach, horizon))
        self._step, self._nu, self._horizon = step, nu, horizon
        self._requests = np.stack([instance.prompt, instance.output, instance.arrival], axis=1)
        self._minima = np.empty(instance.n, dtype=float)

    def __call__(self, lo: int, hi: int) -> np.ndarray:
        minima = self._minima[lo:hi]
        self._kernel(
            self._tables,
            self._horizon,
            self._cells,
            self._step,
            self._nu,
            self._requests[lo:hi],
            minima,
        )
        return minima


class MultiplierSearch(NamedTuple):
    """What :func:`search_multiplier` found."""

    #: The largest value evaluated (``-inf``: none was).
    value: float
    #: The multiplier ``ν`` that gave it (``0.0``: none).
    nu: float
    #: Values evaluated.
    evaluations: int
    #: Seconds taken by the last complete evaluation (the estimate given, if none was).
    seconds_per_evaluation: float
    #: Whether the deadline ended the search before its :data:`NU_STEPS` steps.
    cut: bool


def search_multiplier(
    evaluate: Callable[[float, float], float], scale: float, deadline: float, seconds: float = 0.0
) -> MultiplierSearch:
    """The largest ``evaluate(ν, deadline)`` found by golden-section search over ``log ν``.

    For a bound concave in ``ν`` (a minimum of functions affine in ``ν``), hence unimodal
    in ``log ν``: :data:`NU_STEPS` steps on ``[scale · 1e-6, scale]``, nothing when
    ``scale <= 0``. An evaluation starts only when the previous one's time (``seconds``
    for the first: an estimate) fits before ``deadline`` (a ``time.perf_counter``
    instant); ``evaluate`` may itself raise
    :class:`TimeoutError`, and the search then ends with the values it has. Every ``ν``
    evaluated gives a valid bound, so the largest is returned whether or not it is the
    optimum.
    """
    memo: dict[float, float] = {}
    last = seconds  # seconds taken by the last complete evaluation (at first: the estimate)
    cut = False

    def at(x: float) -> float:
        nonlocal last
        if x not in memo:
            if time.perf_counter() + last > deadline:
                raise TimeoutError
            tick = time.perf_counter()
            memo[x] = evaluate(math.exp(x), deadline)
            last = time.perf_counter() - tick
        return memo[x]

    if scale > 0:
        lo, hi = math.log(scale * 1e-6), math.log(scale)
        ratio = (math.sqrt(5) - 1) / 2
        x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        try:
            for _ in range(NU_STEPS):
                if at(x1) >= at(x2):  # the maximum lies in [lo, x2]
                    hi, x2 = x2, x1
                    x1 = hi - ratio * (hi - lo)
                else:  # in [x1, hi]
                    lo, x1 = x1, x2
                    x2 = lo + ratio * (hi - lo)
        except TimeoutError:
            cut = True
    best, best_x = -math.inf, None
    for x, value in memo.items():
        if value > best:
            best, best_x = value, x
    return MultiplierSearch(
        best, 0.0 if best_x is None else math.exp(best_x), len(memo), last, cut
    )


def spacing_bound_search(
    instance: Instance, *, budget: Budget | None = None
) -> tuple[float, dict[str, float | int | str | None]]:
    """The LP's prices, then the best ``ν`` by golden-section search.

    Work: at most :data:`~schedlab.offline.bounds.time_indexed.LP_ROUNDS` rounds of the LP
    and :data:`NU_STEPS` golden-section steps, so the value depends only on the instance.
    Under a wall-clock cap the LP gets half of it; an evaluation starts only when the
    previous one's measured time fits in what is left, and is abandoned as soon as its
    finished chunks, extrapolated to the remaining requests, would end past the cap. So
    the cap is overrun by at most about one chunk (``1/16`` of an evaluation) besides the
    LP's own overrun.

    Returns the value (the larger of the LP's certificate and ``L^+``, reduced by a
    relative ``1e-9``) and statistics; ``"work"``: the LP's work and ``n (T + 1)`` start
    costs an evaluation (:mod:`~schedlab.offline.bounds.cost`).
    """
    budget = budget or Budget()
    deadline = budget.deadline
    relax = lp_relaxation(instance, budget=budget.share(0.5), max_rounds=LP_ROUNDS)
    bounds, mu = relax.bounds, relax.prices
    step = max(1, math.ceil(int(bounds[-1]) / _PIECES))
    scale = float(mu.max()) if len(mu) else 0.0
    search = search_multiplier(
        lambda nu, until: _spacing_value(instance, bounds, mu, nu, step, until), scale, deadline
    )
    best, best_nu = search.value, search.nu
    value = max(relax.value, best - _SAFETY * abs(best))
    dense = search.evaluations * instance.n * (int(bounds[-1]) + 1.0)
    return value, {
        "lp": relax.value,
        "lp_status": relax.status,
        "nu": best_nu,
        "step": step,
        "evaluations": search.evaluations,
        "seconds_per_evaluation": search.seconds_per_evaluation,
        "horizon": relax.horizon,
        "work": relax.stats["work"] + dense,
        "stopped_by": "time_limit" if search.cut else relax.stats["stopped_by"],
    }


def completion_spacing(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
    """LP prices plus the completion-spacing waste term (see module docs), rounded up."""
    began = time.perf_counter()
    value, stats = spacing_bound_search(instance, budget=budget)
    return integer_bound("completion-spacing", value, stats, began)
