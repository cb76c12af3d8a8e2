"""The restricted master LP of the time-indexed column generation, solved by HiGHS.

:func:`~schedlab.offline.bounds.time_indexed.lp_relaxation` keeps here the columns
``(i, τ)`` it has generated: one block row per aggregated memory row (at most
``M (b_{k+1} - b_k)``) and one convexity row per class of identical requests
(``sum_τ x_{c,τ} = 1``, :mod:`~schedlab.offline.bounds.request_classes`).

Simplex
-------
Column generation only ever *adds* columns, so the last optimal basis stays primal
feasible and the primal simplex goes on from it; the dual simplex would first have to
restore dual feasibility, which the new columns (priced because their reduced costs are
negative) break. On symmetric instances, whose master LPs are highly degenerate, that
restart is costly, so the master is solved by the primal simplex
(``benchmarks/bound_budget.py`` compares the two: solves, iterations and value, on the
results page ``docs/bound-budget.md``).

Work
----
A simplex iteration prices every column and runs the ratio test over every row, so a
solve's work is counted as its simplex iterations times ``columns + rows``
(:attr:`RestrictedMaster.work`, in the start costs of :mod:`~schedlab.offline.bounds.cost`).
HiGHS's iteration counts are deterministic, so the count depends only on the instance.
A solve given a work limit stops within it (HiGHS's ``simplex_iteration_limit``);
:func:`master_allowance` is the limit the LP bounds give it. A unit of it takes longer
than a start cost of the pricing (nanoseconds per unit on the same page), so the LP's
work budget is a count, not a clock.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from schedlab.budget import Budget
from schedlab.offline.instance import Instance

__all__ = [
    "RestrictedMaster",
    "column_rows",
    "master_allowance",
    "pricing_width",
    "silent_highs",
]


def pricing_width(horizon: int, blocks: int) -> int:
    """Candidates a request of :func:`~schedlab.offline.bounds.time_indexed.price_starts`
    prices over ``blocks`` blocks of a horizon ``T``: every start (``T + 1``) while that
    is at most 12 a block boundary, else 15 a boundary."""
    boundaries = min(horizon, blocks) + 1
    return horizon + 1 if horizon + 1 <= 12 * boundaries else 15 * boundaries


def master_allowance(n: int, horizon: int, blocks: int, rounds: int) -> float:
    """The master work an LP of ``rounds`` column-generation rounds may take: as many
    column or row visits as the start costs of its ``2 rounds`` pricings,
    ``2 rounds n w`` (``w`` = :func:`pricing_width`)."""
    return 2.0 * rounds * n * pricing_width(horizon, blocks)


def column_rows(
    instance: Instance, bounds: np.ndarray, req: np.ndarray, tau: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSC arrays (starts, row indices, values) of the block rows of columns ``(i, τ)``.

    The coefficient of block ``k`` is ``sum_{t in [b_k, b_{k+1}) ∩ [τ, τ+o_i)} (s_i+t-τ+1)``.
    """
    horizon = int(bounds[-1])
    width = int(bounds[1] - bounds[0])
    nblocks = len(bounds) - 1
    s = instance.prompt[req]
    end = np.minimum(tau + instance.output[req], horizon)  # exclusive, clipped at T
    first = np.minimum(tau // width, nblocks - 1)
    last = np.minimum((end - 1) // width, nblocks - 1)
    counts = np.where(tau < horizon, last - first + 1, 0)
    starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    col = np.repeat(np.arange(len(req)), counts)
    rows = first[col] + np.arange(starts[-1]) - starts[:-1][col]
    lo = np.maximum(bounds[rows], tau[col])
    hi = np.minimum(bounds[rows + 1], end[col]) - 1
    cnt = hi - lo + 1
    values = cnt * (s[col] + 1 - tau[col]) + (lo + hi) * cnt / 2
    return starts, rows.astype(np.int32), values.astype(float)


def silent_highs() -> Any:
    """A HiGHS instance that prints nothing.

    highspy writes its banner to the process's standard output (file descriptor 1) as
    the object is created, before ``output_flag`` can be turned off (ERGO-Code/HiGHS
    issue 1702); that would corrupt ``--json`` output. So descriptor 1 points at the
    null device while the object is made.
    """
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        highs = highspy.Highs()
        highs.setOptionValue("output_flag", False)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
    return highs


#: HiGHS's largest iteration limit (its default: none).
_MOST_ITERATIONS = 2**31 - 1


class RestrictedMaster:
    """The master LP over the columns added so far, one thread, primal simplex.

    Parameters
    ----------
    instance
        The instance (of request classes: see ``count``).
    bounds
        Block boundaries ``b_0 = 0 < ... < b_K = T``: one memory row a block.
    count
        How many identical requests each request of ``instance`` stands for
        (:mod:`~schedlab.offline.bounds.request_classes`): a column of request ``c``
        is the share of its class that starts at ``τ``, so its cost and memory
        coefficients are ``count[c]`` times a request's; default one each.
    """

    def __init__(
        self, instance: Instance, bounds: np.ndarray, count: np.ndarray | None = None
    ) -> None:
        import highspy

        self.instance = instance
        self.count = np.ones(instance.n) if count is None else np.asarray(count, dtype=float)
        self.blocks = len(bounds) - 1
        self._bounds = bounds
        self.highs = silent_highs()
        self.highs.setOptionValue("threads", 1)
        self.highs.setOptionValue("simplex_strategy", 4)  # primal (module docs)
        self._inf = highspy.kHighsInf
        n, k = instance.n, self.blocks
        empty: tuple[Any, ...] = (0, np.zeros(1, np.int32), np.zeros(0, np.int32), [])
        rhs = instance.kv_tokens * np.diff(bounds).astype(float)
        self.highs.addRows(k, np.full(k, -self._inf), rhs, *empty)
        self.highs.addRows(n, np.ones(n), np.ones(n), *empty)
        self.req: list[np.ndarray] = []
        self.tau: list[np.ndarray] = []
        self._known: set[tuple[int, int]] = set()
        #: Simplex work so far: iterations times ``columns + rows``, summed over solves.
        self.work = 0.0

    def add(self, req: np.ndarray, tau: np.ndarray) -> int:
        """Add the columns ``(req[j], tau[j])`` not in the master yet; how many were new."""
        keep = [(int(i), int(t)) not in self._known for i, t in zip(req, tau, strict=True)]
        req, tau = req[keep], tau[keep]
        if not len(req):
            return 0
        self._known.update(zip(req.tolist(), tau.tolist(), strict=True))
        starts, rows, values = column_rows(self.instance, self._bounds, req, tau)
        values *= np.repeat(self.count[req], np.diff(starts))
        # convexity row of request i is row blocks + i; append it to every column
        count = np.diff(starts)
        all_starts = (starts[:-1] + np.arange(len(req))).astype(np.int32)
        total = len(rows) + len(req)
        all_rows = np.empty(total, np.int32)
        all_vals = np.empty(total)
        mask = np.ones(total, bool)
        mask[all_starts + count] = False
        all_rows[mask], all_vals[mask] = rows, values
        all_rows[~mask], all_vals[~mask] = self.blocks + req, 1.0
        inst = self.instance
        cost = (tau + inst.output[req] - inst.arrival[req]) * self.count[req]
        lower, upper = np.zeros(len(req)), np.full(len(req), self._inf)
        self.highs.addCols(len(req), cost, lower, upper, total, all_starts, all_rows, all_vals)
        self.req.append(req)
        self.tau.append(tau)
        return len(req)

    def solve(self, budget: Budget, work_left: float) -> str | None:
        """Solve the master from the last basis, within ``budget``'s cap and ``work_left``
        work; ``None`` when solved to optimality, else why not: ``"work"`` (the work
        limit), ``"time_limit"`` (the cap) or ``"solver_error"``."""
        import highspy

        highs = self.highs
        size = highs.getNumCol() + highs.getNumRow()
        limit = min(max(work_left, 0.0) / size, _MOST_ITERATIONS)  # inf: no work limit
        highs.setOptionValue("simplex_iteration_limit", int(limit))
        if budget.limited:  # HiGHS's clock runs on across calls of run()
            highs.setOptionValue("time_limit", highs.getRunTime() + budget.remaining())
        highs.run()
        self.work += max(highs.getInfo().simplex_iteration_count, 0) * size
        status = highs.getModelStatus()
        if status == highspy.HighsModelStatus.kOptimal:
            return None
        if status == highspy.HighsModelStatus.kIterationLimit:
            return "work"
        if status == highspy.HighsModelStatus.kTimeLimit:
            return "time_limit"
        return "solver_error"
