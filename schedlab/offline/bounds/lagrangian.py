"""Lagrangian bound for large backlogs: fluid prices improved by subgradient steps.

Every non-negative price vector gives a valid bound ``L(μ)`` (module
:mod:`schedlab.offline.bounds.time_indexed`, ``proofs/time_indexed_lagrangian.md``); this module
only chooses prices, without an LP master, so it scales to ``n = 10^4`` and beyond.

Start: the *fluid* prices of the volume bound. With ``C_(k)`` the volume-bound completions
(:func:`schedlab.offline.bounds.volume.volume_completions`) and ``N(t)`` the number of them
after ``t``, ``λ_t = α N(t) / M``: a unit of memory in round ``t`` is worth the requests
still waiting, as in the dual of Smith's rule for one machine. The scale ``α`` is chosen
among a few values by ``L`` itself.

Steps: projected subgradient ascent ``μ ← max(0, μ + θ g)`` with
``g_k = sum_i a_{k}(i, τ_i) - M |block k|`` (the block loads of the minimising starts
minus capacity) and Polyak's step ``θ = β (UB - L(μ)) / ||g||²``, ``UB`` the best rule's
objective, ``β`` halved after five steps without progress and the search stopped when
``β < 10^-3`` (Held, Wolfe & Crowder 1974; Polyak 1969). The best ``L`` seen is returned.
"""

from __future__ import annotations

import time

import numpy as np

from schedlab.budget import UNLIMITED, Budget, Expired
from schedlab.offline.bounds.bound import Bound, integer_bound
from schedlab.offline.bounds.time_indexed import (
    block_loads,
    check_horizon,
    lagrangian_bound,
    uniform_blocks,
)
from schedlab.offline.bounds.volume import volume_completions
from schedlab.offline.instance import Instance
from schedlab.offline.priority import best_rule_schedule

__all__ = ["DEFAULT_BLOCKS", "MAX_STEPS", "SCALES", "fluid_prices", "lagrangian_bound_search"]

#: Price blocks over the horizon (pricing costs ``O(n · DEFAULT_BLOCKS)`` per step).
DEFAULT_BLOCKS = 1000

#: Scales of the fluid prices priced first (the largest ``L`` starts the steps).
SCALES = (0.8, 0.9, 1.0, 1.1, 1.25)

#: Work budget: subgradient steps after the starting scales.
MAX_STEPS = 200

#: Stop once the Polyak factor has been halved below this.
_MIN_STEP = 1e-3


def fluid_prices(instance: Instance, bounds: np.ndarray) -> np.ndarray:
    """``N(t) / M`` at the middle of each block (see module docs)."""
    completions = np.sort(volume_completions(instance))
    middle = (bounds[:-1] + bounds[1:]) / 2
    waiting = instance.n - np.searchsorted(completions, middle, side="right")
    return waiting / instance.kv_tokens


def lagrangian_bound_search(
    instance: Instance,
    *,
    budget: Budget | None = None,
    blocks: int = DEFAULT_BLOCKS,
    max_steps: int = MAX_STEPS,
) -> tuple[float, dict[str, float | int | str | None]]:
    """Best ``L(μ)`` found from the fluid prices by subgradient steps (see module docs).

    Work: the :data:`SCALES` starting prices and at most ``max_steps`` steps, each
    pricing ``O(n · blocks)``. The wall-clock cap of ``budget`` (default none) is checked
    between the best rule's decodes and between chunks of each pricing; a pricing it cuts
    is dropped. The value is never below ``L(0) = sum_i o_i`` (zero prices: each request
    starts at its release), which it is when no pricing finished. So the cap is overrun
    by at most one rule's decode and a chunk of pricing (``benchmarks/time_caps.py``
    measures the overshoot). Returns the (safety-reduced) value and statistics:
    ``"priced"`` the pricings finished, ``"steps"`` the subgradient steps begun.
    """
    budget = budget or Budget()
    warm, _ = best_rule_schedule(instance, budget)
    upper = float((warm + instance.output - instance.arrival).sum())
    horizon = int(max(volume_completions(instance).max(), (warm + instance.output).max()))
    # each pricing tabulates the prices of every round (RoundPrices): refused in one
    # line before it starts if those arrays would pass the memory budget
    check_horizon(horizon, "lagrangian", budget)
    bounds = uniform_blocks(horizon, blocks)
    capacity = instance.kv_tokens * np.diff(bounds).astype(float)
    fluid = fluid_prices(instance, bounds)
    best, mu, starts = -np.inf, fluid, np.zeros(instance.n, np.int64)
    priced = 0
    stop = budget.stop(max_steps)
    try:
        for scale in SCALES:
            value, _, arg = lagrangian_bound(instance, bounds, scale * fluid, budget)
            priced += 1
            if value > best:
                best, mu, starts = value, scale * fluid, arg
        current, step, stale = best, 0.5, 0
        while best < upper and not stop():
            gradient = block_loads(instance, bounds, starts) - capacity
            norm = float(gradient @ gradient)
            if norm == 0:
                break
            mu = np.maximum(0.0, mu + step * (upper - current) / norm * gradient)
            current, _, starts = lagrangian_bound(instance, bounds, mu, budget)
            priced += 1
            if current > best + 1e-9 * abs(best):
                best, stale = current, 0
            else:
                stale += 1
                if stale >= 5:
                    step, stale = step / 2, 0
                    if step < _MIN_STEP:
                        break
    except Expired:
        stop.reason = "time_limit"
    value = max(best - 1e-9 * abs(best), float(instance.output.sum()))  # L(0) is valid
    return value, {
        "steps": stop.work,
        "priced": priced,
        "blocks": len(bounds) - 1,
        "horizon": horizon,
        "stopped_by": stop.reason,
    }


def lagrangian(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
    """Fluid prices improved by subgradient steps; valid at any size (see module docs)."""
    began = time.perf_counter()
    value, stats = lagrangian_bound_search(instance, budget=budget)
    return integer_bound("lagrangian", value, stats, began)
