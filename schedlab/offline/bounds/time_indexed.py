"""Time-indexed LP relaxation by column generation, certified by a Lagrangian bound.

Model
-----
``x_{i,τ} >= 0`` is the weight of "request ``i`` starts in round ``τ``" (``τ >= a_i``):

.. math::

    \\min \\sum_{i,τ} (τ + o_i - a_i) x_{i,τ}
    \\quad\\text{s.t.}\\quad \\sum_τ x_{i,τ} = 1 \\;(\\forall i), \\qquad
    \\sum_i \\sum_{τ=t-o_i+1}^{t} (s_i + t - τ + 1) x_{i,τ} \\le M \\;(\\forall t).

Rows are *aggregated* into blocks ``[b_k, b_{k+1})`` of the horizon ``[0, T)``: the row of
block ``k`` is the sum of the round rows it contains (right-hand side ``M (b_{k+1} - b_k)``).
With one round per block this is the plain time-indexed LP; coarser blocks give a smaller
relaxation that scales to ``n = 10^4``. Rounds ``t >= T`` get no row.

Certificate
-----------
For any prices ``μ_k >= 0`` (``λ_t = μ_k`` on block ``k``, ``λ_t = 0`` for ``t >= T``),
Lagrangian relaxation of the memory rows of *every* round gives

.. math::

    L(μ) = -M \\sum_k μ_k (b_{k+1} - b_k) + \\sum_i \\min_{τ \\ge a_i} f_i(τ), \\qquad
    f_i(τ) = τ + o_i - a_i + \\sum_{u=τ}^{τ+o_i-1} λ_u (s_i + u - τ + 1),

a lower bound on the optimum of the *integer* problem for any horizon: ``T`` only decides
which prices may be non-zero (proof: ``proofs/time_indexed_lagrangian.md``). The minimum
over the unbounded range ``τ >= a_i`` is exact: ``f_i`` is increasing for ``τ >= T`` and,
between the breakpoints where ``τ`` or ``τ + o_i`` crosses a block boundary, a quadratic in
``τ``, minimised at its ends or next to its vertex. Column generation (Dantzig–Wolfe over
start-time columns, the master solved by HiGHS's primal simplex,
:mod:`schedlab.offline.bounds.master`) supplies the prices: every iteration the
memory-row duals of the restricted master are priced over all starts, the most negative
reduced-cost column of each request is added, and ``L`` of those duals is recorded; the
best ``L`` seen is the certified value. At convergence it equals the LP optimum.
Identical requests (same prompt, output and release) are one class in the master and the
pricing, with their multiplicity (:mod:`schedlab.offline.bounds.request_classes`): the
same LP optimum and the same ``L``, for fewer rows and columns.

The pricing runs compiled (:mod:`schedlab.offline.bounds.compiled_pricing`, numba) or as
the NumPy reference here (``engine="python"``); both evaluate the same candidates in the
same order with the same floating-point expressions, so they give the same minima and
starts bit for bit, and the column generation the same columns and value
(``benchmarks/offline_targets.py --rows pricing`` times them).

Sources: Sousa & Wolsey (1992) and van den Akker, Hurkens & Savelsbergh (2000) for
time-indexed formulations and their column generation; Lasdon (1970) for the Lagrangian
bound of a restricted master.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from schedlab.budget import UNLIMITED, Budget, Expired, Stop
from schedlab.errors import HorizonError, InputError
from schedlab.offline.bounds.bound import Bound
from schedlab.offline.bounds.master import (
    RestrictedMaster,
    column_rows,
    master_allowance,
    pricing_width,
)
from schedlab.offline.bounds.request_classes import RequestClasses, request_classes
from schedlab.offline.instance import Instance
from schedlab.offline.priority import rule_schedule

__all__ = [
    "DEFAULT_MAX_BLOCKS",
    "ENGINES",
    "LP_ROUNDS",
    "MAX_HORIZON",
    "ROUND_BYTES",
    "LPRelaxation",
    "RoundPrices",
    "block_loads",
    "check_horizon",
    "column_rows",
    "lagrangian_bound",
    "lp_horizon",
    "lp_relaxation",
    "price_starts",
    "start_costs",
    "uniform_blocks",
]

#: Work budget of the ``lp`` bound: column-generation rounds (master solves).
LP_ROUNDS = 400

#: Most aggregated memory rows used when the caller does not choose (see :func:`uniform_blocks`).
#: Finer rows gain little for much more time (``docs/design.md``, "Decision record").
DEFAULT_MAX_BLOCKS = 300

#: Longest horizon ``T`` (rounds) a time-indexed method accepts: its arrays over the rounds
#: take about :data:`ROUND_BYTES` a round in all (so 0.35 GB here). Past it
#: :func:`check_horizon` refuses, and ``best`` skips the method.
MAX_HORIZON = 5_000_000

#: Bytes a round of the horizon takes in a time-indexed method's arrays, in all.
ROUND_BYTES = 70

#: Relative safety margin taken off every certified value against floating-point error.
_SAFETY = 1e-9

#: Entries of the candidate matrix priced at once (bounds working memory).
_CHUNK_ENTRIES = 4_000_000

#: How :func:`price_starts` runs: the compiled kernel or the NumPy reference.
ENGINES: tuple[str, ...] = ("compiled", "python")


@dataclass(frozen=True)
class LPRelaxation:
    """Outcome of :func:`lp_relaxation`.

    Attributes
    ----------
    value
        Certified lower bound on the optimal total latency: the best Lagrangian value
        ``L(μ)`` seen, valid for every horizon.
    mean_start
        ``sum_τ τ x_{i,τ}`` of the last restricted master solved to optimality (the
        ``mc-sf-backfill`` schedule's starts if none was solved within the time limit).
    status
        ``"optimal"`` when column generation converged (no column of negative reduced
        cost, so ``value`` is the LP optimum up to tolerance), ``"stopped"`` when the work
        budget or the wall-clock cap ended it first (``stats["stopped_by"]``).
    runtime
        Wall seconds.
    lp_value
        Objective of the final restricted master (an upper bound on the LP optimum of
        the aggregated model; not a valid lower bound on its own).
    horizon
        ``T``: rounds ``>= T`` carry no memory row.
    block
        Rounds per aggregated memory row (the last block may be shorter).
    stats
        Iterations, columns, and the bound after each iteration.
    bounds, prices
        The block boundaries and the block prices ``μ`` of the best ``L(μ)`` (zero
        prices when no iteration improved on the trivial bound).
    """

    value: float
    mean_start: np.ndarray
    status: str
    runtime: float
    lp_value: float = math.nan
    horizon: int = 0
    block: int = 1
    stats: dict[str, Any] = field(default_factory=dict)
    bounds: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    prices: np.ndarray = field(default_factory=lambda: np.zeros(0))


def check_horizon(
    horizon: int, where: str, budget: Budget | None = None, extra: float = 0
) -> None:
    """Refuse a horizon longer than :data:`MAX_HORIZON` rounds, or whose arrays
    (:data:`ROUND_BYTES` a round, and ``extra`` bytes besides) would pass the memory
    budget of ``budget``.

    Raises
    ------
    HorizonError
        Naming ``where`` and the horizon.
    MemoryBudgetError
        Naming ``where``, the bytes and the budget.
    """
    if horizon > MAX_HORIZON:
        raise HorizonError(
            f"{where}: the horizon is {horizon:,} rounds, above {MAX_HORIZON:,} (its arrays "
            "over the rounds would not fit); use mean-busy-time or a list-scheduling solver"
        )
    if budget is not None:
        size = ROUND_BYTES * horizon + extra
        budget.require(where, size, f"arrays over a horizon of {horizon:,} rounds")


def uniform_blocks(horizon: int, max_blocks: int = DEFAULT_MAX_BLOCKS) -> np.ndarray:
    """Boundaries ``0 = b_0 < ... < b_K = horizon``, equal width ``ceil(T / max_blocks)``."""
    width = max(1, math.ceil(horizon / max_blocks))
    return np.unique(np.append(np.arange(0, horizon, width), horizon)).astype(np.int64)


def _prefix_shape(length: int) -> tuple[int, int]:
    """``(K, m)``: the columns and rows :func:`_prefix_sums` lays ``length`` terms out in,
    ``K = floor(sqrt(length - 1)) + 1`` and ``m = ceil(length / K)``."""
    columns = max(1, math.isqrt(max(length - 1, 0)) + 1)
    return columns, -(-length // columns)


def _prefix_factor(length: int) -> float:
    """``β = 2K + m + 2``: :func:`_prefix_sums` of ``length`` non-negative terms is within
    ``β ε`` times their total of the exact prefix sums (``K`` columns, ``m`` rows)."""
    columns, rows = _prefix_shape(length)
    return 2.0 * columns + rows + 2.0


def _running_sums(values: np.ndarray) -> np.ndarray:
    """``[0, x_0, x_0 + x_1, ...]`` as one running sum."""
    return np.concatenate(([0.0], np.cumsum(values)))


def _prefix_sums(values: np.ndarray) -> np.ndarray:
    """``[0, x_0, x_0 + x_1, ...]`` summed in two levels: within rows of ``K ≈ sqrt(len)``
    terms, then the row totals. For non-negative terms every prefix is then within
    ``β ε sum(x)`` of the exact one, ``β = 2K + m + 2`` (:func:`_prefix_factor`), where a
    running sum can be off by ``len · ε sum(x)``."""
    length = len(values)
    columns, rows = _prefix_shape(length)
    grid = np.zeros(rows * columns)
    grid[:length] = values
    within = np.cumsum(grid.reshape(rows, columns), axis=1)
    before = np.concatenate(([0.0], np.cumsum(within[:, -1])[:-1]))
    return np.concatenate(([0.0], (within + before[:, None]).ravel()[:length]))


class RoundPrices:
    """Round prices ``λ_t`` (constant on blocks, ``0`` from ``T`` on) and window sums.

    ``P0(x) = sum_{u<x} λ_u`` and ``P1(x) = sum_{u<x} u λ_u`` are tabulated for
    ``x = 0..T``; for ``x > T`` they equal their value at ``T``. Build it once to price many
    starts against the same prices.

    Parameters
    ----------
    bounds
        Block boundaries ``b_0 = 0 < ... < b_K = T``.
    mu
        Block prices ``μ_k`` (length ``K``).
    split_sums
        Form ``P0`` and ``P1`` in two levels (:func:`_prefix_sums`), whose rounding error
        :meth:`rounding` bounds about ``sqrt(T)`` times more tightly than that of running
        sums. The default, running sums, keeps the values that the LP-based bounds and
        solvers have always computed (the LP's column generation follows its prices, so a
        change in the last bits can change which columns it adds).
    """

    def __init__(self, bounds: np.ndarray, mu: np.ndarray, *, split_sums: bool = False) -> None:
        self.horizon = int(bounds[-1])
        check_horizon(self.horizon, "round prices")
        lam = np.append(np.repeat(np.asarray(mu, dtype=float), np.diff(bounds)), 0.0)
        self.lam = lam  # λ_0 .. λ_T (λ_T = 0)
        self.split_sums = split_sums
        prefix = _prefix_sums if split_sums else _running_sums
        self.p0 = prefix(lam[:-1])
        self.p1 = prefix(lam[:-1] * np.arange(self.horizon))

    def sums(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``P0(x)``, ``P1(x)`` and ``λ_x`` (the price of the block holding round ``x``)."""
        xc = np.minimum(x, self.horizon)
        return self.p0[xc], self.p1[xc], self.lam[xc]

    def start_costs(
        self, instance: Instance, tau: np.ndarray, requests: np.ndarray | None = None
    ) -> np.ndarray:
        """``f_i(τ)`` at the given starts ``τ >= a_i``: of request ``i`` at ``tau[i]``, or of
        request ``requests[j]`` at ``tau[j]`` when ``requests`` is given."""
        tau = np.asarray(tau, dtype=np.int64)
        req = np.arange(instance.n) if requests is None else np.asarray(requests)
        value, _, _ = _cost(
            self,
            tau,
            instance.prompt[req].astype(float),
            instance.output[req],
            instance.arrival[req],
        )
        return value

    def cost_steps(self, instance: Instance, tau: np.ndarray, requests: np.ndarray) -> np.ndarray:
        """``f_i(τ + 1) - f_i(τ)`` of requests ``requests`` at starts ``tau``, summed by parts:

        .. math:: 1 + (s_i + o_i) λ_{τ+o_i} - (s_i + 1) λ_τ - \\sum_{u=τ+1}^{τ+o_i-1} λ_u,

        which needs only ``P0``: its rounding error is about ``ε P0(T)``, where the
        difference of two :meth:`start_costs` carries that of ``P1(T)``, about ``T`` times
        larger.
        """
        tau = np.asarray(tau, dtype=np.int64)
        o = instance.output[requests]
        s = instance.prompt[requests].astype(float)
        _, _, first = self.sums(tau)
        inner, _, _ = self.sums(tau + 1)
        end, _, last = self.sums(tau + o)
        return 1.0 + (s + o) * last - (s + 1) * first - (end - inner)

    def rounding(
        self, prompt_max: float, start_max: float, output_max: float
    ) -> tuple[float, float]:
        """Bounds ``(E, E')`` on the rounding error of :meth:`start_costs` and of
        :meth:`cost_steps`, for prices ``>= 0``, prompts up to ``prompt_max``, starts up to
        ``start_max`` and outputs up to ``output_max`` (``proofs/fluid_spacing.md``,
        Floating point): with ``β`` the error factor of the prefix sums (``T + 2`` for
        running sums, :func:`_prefix_factor` for split ones) and ``ε`` the unit round-off,

        .. math:: E = 4 (β + 4) ε \\bigl((s_{\\max} + 1 + τ_{\\max}) P0(T) + P1(T)
                  + τ_{\\max} + o_{\\max}\\bigr), \\quad
                  E' = 4 (β + 4) ε \\bigl(P0(T) + (s_{\\max} + o_{\\max} + 1) λ_{\\max} + 1\\bigr).
        """
        beta = _prefix_factor(self.horizon) if self.split_sums else self.horizon + 2.0
        unit = 4.0 * (beta + 4.0) * np.finfo(float).eps * (1.0 + 1e-6)
        p0, p1 = float(self.p0[-1]), float(self.p1[-1])
        top = float(self.lam.max()) if len(self.lam) else 0.0
        # from T on both window sums are exactly 0, so only starts below T weigh on P0
        weight = prompt_max + 1 + min(start_max, self.horizon)
        cost = unit * (weight * p0 + p1 + start_max + output_max)
        step = unit * (p0 + (prompt_max + output_max + 1) * top + 1)
        return cost, step


def _cost(
    prices: RoundPrices,
    tau: np.ndarray,
    prompt: np.ndarray,
    output: np.ndarray,
    arrival: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``f_i(τ)``, its derivative on the quadratic piece right of ``τ``, and that piece's
    curvature ``A = (μ_{k1} - μ_{k2}) / 2``."""
    start0, start1, mu1 = prices.sums(tau)
    end0, end1, mu2 = prices.sums(tau + output)
    window = end0 - start0
    tf = tau.astype(float)
    value = tf + output - arrival + (prompt + 1 - tf) * window + end1 - start1
    slope = (1.0 - window + (prompt + 1 - tf) * (mu2 - mu1) + mu2 * (tf + output - 0.5)) - mu1 * (
        tf - 0.5
    )
    return value, slope, (mu1 - mu2) / 2


def price_starts(
    instance: Instance,
    bounds: np.ndarray,
    mu: np.ndarray,
    budget: Budget = UNLIMITED,
    engine: str = "compiled",
) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``min_{τ >= a_i} f_i(τ)`` and a minimising ``τ`` for every request.

    Parameters
    ----------
    bounds
        Block boundaries ``b_0 = 0 < ... < b_K = T``.
    mu
        Non-negative block prices ``μ_k`` (length ``K``).
    engine
        One of :data:`ENGINES`: ``"compiled"``, the numba kernel of
        :mod:`schedlab.offline.bounds.compiled_pricing`, or ``"python"``, the NumPy code
        here (the reference). Both give the same minima and starts, bit for bit.
    budget
        Checked before each chunk of requests (:meth:`~schedlab.budget.Budget.check`),
        so a cap is overrun by at most one chunk (``benchmarks/time_caps.py``).

    Raises
    ------
    schedlab.budget.Expired
        When ``budget``'s cap passes before the last chunk: no partial minimum is a bound.
    InputError
        On an unknown engine.

    Notes
    -----
    ``f_i`` is increasing for ``τ >= T``, so a minimiser lies in ``[a_i, max(a_i, T)]``.
    When that range is short every round in it is evaluated. Otherwise the candidates
    are the breakpoints ``b_k``, ``b_k - o_i`` and ``a_i`` (clipped to the range), the
    last round of each piece between two breakpoints, and, on each convex piece, the
    four integers around its vertex ``τ* = l - f'(l) / (2A)``, ``A = (μ_{k1} - μ_{k2})/2``
    (``k1``, ``k2`` the blocks of ``τ`` and ``τ + o_i``): ``f_i`` is exactly quadratic on a
    piece, so the least candidate is the minimum. Work ``O(n min(T, K))``, vectorised.
    """
    if engine not in ENGINES:
        known = ", ".join(ENGINES)
        raise InputError(f"price_starts: engine must be one of {known}, got {engine!r}")
    prices = RoundPrices(bounds, mu)
    horizon = prices.horizon
    dense = horizon + 1 <= 12 * len(bounds)
    s_all = instance.prompt.astype(float)
    n = instance.n
    best = np.empty(n)
    arg = np.empty(n, dtype=np.int64)
    width = horizon + 1 if dense else 15 * len(bounds)
    step = max(1, _CHUNK_ENTRIES // width)
    if engine == "compiled":
        _compiled_prices(prices, bounds, instance, s_all, dense, step, budget, best, arg)
        return best, arg
    for lo in range(0, n, step):
        budget.check()
        sl = slice(lo, min(n, lo + step))
        o = instance.output[sl][:, None]
        a = instance.arrival[sl][:, None]
        s = s_all[sl][:, None]
        top = np.maximum(a, horizon)
        if dense:
            cand = np.clip(np.arange(horizon + 1), a, top)
        else:
            points = np.concatenate(
                [np.broadcast_to(bounds, (o.shape[0], len(bounds))), bounds - o, a], axis=1
            )
            points = np.sort(np.clip(points, a, top), axis=1)
            left = points[:, :-1]
            right = np.maximum(points[:, 1:] - 1, left)  # last round of the piece
            _, slope, curve = _cost(prices, left, s, o, a)
            convex = curve > 0
            vertex = np.where(convex, left - slope / np.where(convex, 2 * curve, 1.0), left)
            base = np.floor(np.clip(vertex, left, right)).astype(np.int64)
            near = [np.clip(base + d, left, right) for d in (-1, 0, 1, 2)]
            cand = np.concatenate([left, right, points[:, -1:], *near], axis=1)
        cost, _, _ = _cost(prices, cand, s, o, a)
        pick = np.argmin(cost, axis=1)
        rows = np.arange(cand.shape[0])
        best[sl] = cost[rows, pick]
        arg[sl] = cand[rows, pick]
    return best, arg


def _compiled_prices(
    prices: RoundPrices,
    bounds: np.ndarray,
    instance: Instance,
    prompt: np.ndarray,
    dense: bool,
    step: int,
    budget: Budget,
    best: np.ndarray,
    arg: np.ndarray,
) -> None:
    """:func:`price_starts`'s minima into ``best`` and ``arg`` by the compiled kernel, in
    chunks of ``step`` requests with ``budget`` checked before each (as the reference)."""
    from schedlab.offline.bounds.compiled_pricing import price_kernel  # loads numba

    edges = np.ascontiguousarray(bounds, dtype=np.int64)
    points = np.empty(2 * len(edges) + 1, dtype=np.int64)
    base = np.empty(2 * len(edges), dtype=np.int64)
    for lo in range(0, instance.n, step):
        budget.check()
        price_kernel(
            prices.p0,
            prices.p1,
            prices.lam,
            prices.horizon,
            edges,
            prompt,
            instance.output,
            instance.arrival,
            int(dense),
            lo,
            min(instance.n, lo + step),
            points,
            base,
            best,
            arg,
        )


def start_costs(
    instance: Instance,
    bounds: np.ndarray,
    mu: np.ndarray,
    tau: np.ndarray,
    requests: np.ndarray | None = None,
) -> np.ndarray:
    """``f_i(τ)`` at the given starts ``τ >= a_i``: of request ``i`` at ``tau[i]``, or of
    request ``requests[j]`` at ``tau[j]`` when ``requests`` is given
    (:meth:`RoundPrices.start_costs` of prices built for this call)."""
    return RoundPrices(bounds, mu).start_costs(instance, tau, requests)


def lagrangian_bound(
    instance: Instance,
    bounds: np.ndarray,
    mu: np.ndarray,
    budget: Budget = UNLIMITED,
    engine: str = "compiled",
    count: np.ndarray | None = None,
) -> tuple[float, np.ndarray, np.ndarray]:
    """``L(μ)`` (see module docs), the per-request minima and their minimising starts
    (:func:`price_starts` with ``engine``; it raises :class:`~schedlab.budget.Expired` if
    ``budget`` cuts it). With ``count``, request ``i`` stands for ``count[i]`` identical
    requests and its minimum counts that often
    (:mod:`~schedlab.offline.bounds.request_classes`)."""
    mu = np.maximum(np.asarray(mu, dtype=float), 0.0)
    best, arg = price_starts(instance, bounds, mu, budget, engine)
    total = best.sum() if count is None else (best * count).sum()
    value = float(total - instance.kv_tokens * float(mu @ np.diff(bounds)))
    return value, best, arg


def block_loads(instance: Instance, bounds: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Block row totals ``sum_i a_k(i, τ_i)`` of the schedule-like choice ``τ_i = starts[i]``."""
    _, rows, values = column_rows(instance, bounds, np.arange(instance.n), np.asarray(starts))
    return np.bincount(rows, values, minlength=len(bounds) - 1)


def _default_horizon(instance: Instance) -> tuple[int, np.ndarray]:
    # one schedule: the reference decoder, the same starts without loading the compiled
    # one (docs/design.md, "Decision record")
    starts = rule_schedule(instance, "mc-sf-backfill", engine="python")
    return int((starts + instance.output).max()), starts


def lp_horizon(instance: Instance) -> int:
    """The horizon ``T`` :func:`lp_relaxation` takes by default: the makespan of the
    ``mc-sf-backfill`` schedule."""
    return _default_horizon(instance)[0]


def lp_relaxation(
    instance: Instance,
    *,
    budget: Budget | None = None,
    max_rounds: int | None = None,
    horizon: int | None = None,
    max_blocks: int = DEFAULT_MAX_BLOCKS,
    tolerance: float = 1e-6,
    engine: str = "compiled",
) -> LPRelaxation:
    """Solve the (block-aggregated) time-indexed LP relaxation by column generation.

    Parameters
    ----------
    instance
        The instance.
    budget
        Wall-clock cap (default none).
    max_rounds
        Work budget: column-generation rounds (master solves), and the master's simplex
        work at most :func:`~schedlab.offline.bounds.master.master_allowance` of them;
        ``None``: until convergence. HiGHS's simplex is deterministic, so without a
        binding cap the result depends only on the instance and these arguments.
    horizon
        ``T``; default the makespan of the ``mc-sf-backfill`` schedule. Any ``T >= 1``
        gives a valid bound; a larger one only adds rows.
    max_blocks
        At most this many aggregated memory rows (``1`` round per row when ``T`` is at
        most this).
    tolerance
        Stop when ``(master - bound) <= tolerance * bound``. (``1e-6``: the primal
        simplex's rounds are cheap, and its degenerate duals end further below the LP
        optimum at ``1e-5`` than the dual simplex's did.)
    engine
        How the columns are priced (:func:`price_starts`): both engines add the same
        columns and give the same value.

    Returns
    -------
    LPRelaxation
        ``value`` is certified for the integer problem whatever ``T`` (see module docs).
        ``stats["work"]``: the work done, in start costs: ``C w`` a pricing of the ``C``
        classes of identical requests
        (:func:`~schedlab.offline.bounds.master.pricing_width`), ``C`` a round for the
        smoothed columns' costs, and the master's (:class:`RestrictedMaster`).
    """
    began = time.perf_counter()
    budget = budget or Budget()
    stop = budget.stop(max_rounds)
    default_horizon, seed_starts = _default_horizon(instance)
    horizon = default_horizon if horizon is None else int(horizon)
    if horizon < 1:
        raise ValueError(f"horizon: must be >= 1, got {horizon}")
    bounds = uniform_blocks(horizon, max_blocks)
    nblocks = len(bounds) - 1
    classes = request_classes(instance)
    n = classes.n
    # the pricing's tables by class and block, and the candidates priced at once
    check_horizon(horizon, "time-indexed LP", budget, 4 * 8 * (n * nblocks + _CHUNK_ENTRIES))
    master = RestrictedMaster(classes.instance, bounds, classes.count)
    every = np.arange(n)
    # start-at-T columns carry no memory row: the master is feasible for any horizon
    master.add(every, np.maximum(np.full(n, horizon), classes.instance.arrival))
    master.add(classes.of, seed_starts.astype(np.int64))
    allowance = math.inf  # else as much as the pricings of every request would take
    if max_rounds is not None:
        allowance = master_allowance(instance.n, horizon, nblocks, max_rounds)
    run = _ColumnGeneration(classes, bounds, master, budget, engine)
    status = run.iterate(stop, allowance, tolerance)
    req_all = np.concatenate(master.req)
    tau_all = np.concatenate(master.tau).astype(float)
    mean_start = seed_starts.astype(float)
    if run.primal is not None:
        total = np.zeros(n)
        used = len(run.primal)  # columns added after the last solve have weight 0
        np.add.at(total, req_all[:used], run.primal * tau_all[:used])
        mean_start = classes.per_request(total)
    pricing = run.pricings * n * pricing_width(horizon, nblocks) + run.iterations * n
    return LPRelaxation(
        value=max(run.best - _SAFETY * abs(run.best), float(instance.output.sum())),
        mean_start=mean_start,
        status=status,
        runtime=time.perf_counter() - began,
        lp_value=run.master_value,
        horizon=horizon,
        block=int(bounds[1] - bounds[0]),
        stats={
            "iterations": run.iterations,
            "columns": len(req_all),
            "rows": nblocks,
            "history": run.history,
            "work": pricing + master.work,
            "pricing_work": pricing,
            "master_work": master.work,
            "stopped_by": None if status == "optimal" else stop.reason,
        },
        bounds=bounds,
        prices=run.center,
    )


class _ColumnGeneration:
    """The rounds of :func:`lp_relaxation` on a :class:`RestrictedMaster`: solve the
    master, price its duals (the certified ``L(μ)``), add the columns of negative reduced
    cost; the best ``L`` and its prices, the last primal solution and the counts."""

    def __init__(
        self,
        classes: RequestClasses,
        bounds: np.ndarray,
        master: RestrictedMaster,
        budget: Budget,
        engine: str,
    ) -> None:
        self.instance, self.count = classes.instance, classes.count
        self.bounds, self.master, self.budget, self.engine = bounds, master, budget, engine
        self.best = float((self.instance.output * self.count).sum())
        self.center = np.zeros(len(bounds) - 1)
        self.history: list[float] = []
        self.iterations = 0
        self.pricings = 0
        self.master_value = math.nan
        self.primal: np.ndarray | None = None  # the last optimal master's x

    def iterate(self, stop: Stop, allowance: float, tolerance: float) -> str:
        """Run rounds until convergence (``"optimal"``) or ``stop``, the master's work
        ``allowance`` or the cap ends them (``"stopped"``, ``stop.reason`` set)."""
        instance, bounds, master, budget = self.instance, self.bounds, self.master, self.budget
        nblocks = len(bounds) - 1
        every = np.arange(instance.n)
        try:  # a pricing cut by the cap is dropped (one takes seconds at n = 10^5)
            while not stop():
                reason = master.solve(budget, allowance - master.work)
                if reason is not None:
                    stop.reason = reason
                    return "stopped"
                self.iterations += 1
                solution = master.highs.getSolution()
                self.primal = np.asarray(solution.col_value)
                duals = np.asarray(solution.row_dual)
                self.master_value = master.highs.getInfo().objective_function_value
                mu = np.maximum(-duals[:nblocks], 0.0)
                value, minima, argmin = lagrangian_bound(
                    instance, bounds, mu, budget, self.engine, self.count
                )
                self.pricings += 1
                if value > self.best:
                    self.best, self.center = value, mu
                self.history.append(value)
                reduced = self.count * minima - duals[nblocks:]
                scale = max(1.0, abs(self.master_value))
                if self.master_value - self.best <= tolerance * scale:
                    return "optimal"
                negative = reduced < -1e-9 * scale
                # also price halfway between the best prices and the master's (Wentges
                # smoothing), keeping columns that price out at the master's duals too
                _, smooth = price_starts(
                    instance, bounds, 0.5 * (self.center + mu), budget, self.engine
                )
                self.pricings += 1
                costs = self.count * start_costs(instance, bounds, mu, smooth)
                useful = costs - duals[nblocks:] < -1e-9 * scale
                added = master.add(every[negative], argmin[negative])
                if added + master.add(every[useful], smooth[useful]) == 0:
                    return "optimal"
        except Expired:
            stop.reason = "time_limit"
        return "stopped"


def lp_bound(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
    """The certified Lagrangian value of :func:`lp_relaxation` after at most
    :data:`LP_ROUNDS` rounds, rounded up (see module docs)."""
    relax = lp_relaxation(instance, budget=budget, max_rounds=LP_ROUNDS)
    return Bound(
        float(math.ceil(relax.value - 1e-6)),  # the optimum is an integer
        "lp",
        "proven" if relax.status == "optimal" else "stopped",
        relax.runtime,
        {
            "lp_value": relax.lp_value,
            "horizon": relax.horizon,
            "block": relax.block,
            **{k: v for k, v in relax.stats.items() if k != "history"},
        },
    )
