"""What each bound method costs at an instance's size: the work ``best`` charges it.

``best`` (:func:`schedlab.offline.bounds.lower_bound`) runs the methods in the order of
these estimates and charges each its estimate against one overall work budget
(:data:`BEST_WORK`): a method whose estimate does not fit what is left is out of reach.
The estimates are functions of the instance alone (its size, memory and lengths), never
of the clock, so which methods run, and so ``best``'s value, depends only on the
instance and the budget.

Unit: a *start cost*, one evaluation of a request's cost at one start (``f_i(τ)`` of
:mod:`schedlab.offline.bounds.time_indexed`, or a bracket of the spacing bounds), the
unit the priced methods count in; an ``O(n log n)`` method is charged ``n log2(n + 1)``.
Each estimate is the work of the method's own fixed work budget, so it bounds that work
from above where the method can stop early (the LP at convergence, ``lagrangian`` when
its steps shrink):

``trivial``, ``volume``, ``mean-busy-time``
    ``n`` and ``n log2(n + 1)``.
``tall-chain``
    ``n`` and the Held–Karp table, ``2^k k^2`` for ``k`` chain members.
``fluid-spacing``
    ``T`` for the prices, ``n log2 T`` for the bisection of each request's best start,
    and per evaluation (16) ``n (log2 T + 60)``: one more bisection and about 20
    start blocks of three start costs (``T`` the price horizon).
``lp``
    :data:`~schedlab.offline.bounds.time_indexed.LP_ROUNDS` rounds of two pricings of
    each of the ``C`` classes of identical requests
    (:mod:`~schedlab.offline.bounds.request_classes`) over :func:`pricing_width`
    candidates, ``K`` = 300 blocks, and ``C`` start costs each for its smoothed columns;
    and the master LP's simplex work, which the LP stops at as much as the pricings of
    all ``n`` requests would take (:func:`~schedlab.offline.bounds.master.master_allowance`:
    ``2 LP_ROUNDS n w`` visits of a column or row by a simplex iteration).
``completion-spacing``
    The LP's work and 16 evaluations of ``n (T + 1)`` start costs.
``lagrangian``
    ``5 + 200`` pricings over ``K`` = 1,000 blocks.

The horizon ``T`` of ``lp`` and ``completion-spacing`` is the makespan of the
``mc-sf-backfill`` schedule, which their estimates compute as the methods do; so each
estimate bounds the work the method counts (``stats["work"]``) from above: its rounds,
pricings and evaluations are capped, and so is its master's simplex work
(``tests/offline/bounds/test_bound_budget.py`` checks it on random and degenerate
instances, ``benchmarks/bound_budget.py`` measures work and seconds against the
estimates). ``lagrangian``'s horizon is not known before it runs; its estimate takes the
largest volume-bound completion (:func:`~schedlab.offline.bounds.volume.volume_completions`),
which no schedule beats. An LP that converges early (before its last round) costs less
than its estimate (``benchmarks/offline_targets.py --rows best`` times each method).
"""

from __future__ import annotations

import math

from schedlab.offline.bounds import completion_spacing, fluid_spacing, lagrangian, tall_chain
from schedlab.offline.bounds.master import master_allowance, pricing_width
from schedlab.offline.bounds.request_classes import request_classes
from schedlab.offline.bounds.time_indexed import (
    DEFAULT_MAX_BLOCKS,
    LP_ROUNDS,
    lp_horizon,
    uniform_blocks,
)
from schedlab.offline.bounds.volume import volume_completions
from schedlab.offline.instance import Instance

__all__ = [
    "BEST_WORK",
    "fluid_spacing_work",
    "lagrangian_work",
    "linear_work",
    "lp_work",
    "pricing_width",
    "sorting_work",
    "spacing_work",
    "tall_chain_work",
]

#: ``best``'s overall work budget, in start costs. It fits ``completion-spacing`` up to
#: about 270 requests of the mixed backlogs (1.5e9 on the shipped n = 200), not at
#: n = 1,000 (7.6e9), nor ``lagrangian`` on ``mixed_backlog(10_000)`` (3.1e10): the
#: methods that took most of ``best``'s time there before it was planned by cost.
BEST_WORK = 2e9

#: Subgradient steps and starting scales of ``lagrangian``: pricings at most.
_LAGRANGIAN_PRICINGS = lagrangian.MAX_STEPS + len(lagrangian.SCALES)

#: Evaluations of the spacing bounds: ``L(0)``, the golden section's two first points and
#: its steps.
_SPACING_EVALUATIONS = 2 + completion_spacing.NU_STEPS


def _horizon(instance: Instance) -> int:
    """The least horizon of any schedule: the largest volume-bound completion."""
    return int(volume_completions(instance).max())


def linear_work(instance: Instance) -> float:
    """``n``: one pass over the requests (``trivial``)."""
    return float(instance.n)


def sorting_work(instance: Instance) -> float:
    """``n log2(n + 1)``: a sort (``volume``, ``mean-busy-time``)."""
    return instance.n * math.log2(instance.n + 1)


def tall_chain_work(instance: Instance) -> float:
    """``n + 2^k k^2`` for the ``k`` chain members (``tall-chain``)."""
    k = len(tall_chain.chain_members(instance))
    return instance.n + float(2**k * k * k)


def fluid_spacing_work(instance: Instance) -> float:
    """``T + n log2 T + 16 n (log2 T + 60)`` (``fluid-spacing``, module docs)."""
    horizon = fluid_spacing.price_horizon(instance)
    depth = math.log2(horizon + 1)
    return horizon + instance.n * (depth + _SPACING_EVALUATIONS * (depth + 60))


def lp_work(instance: Instance) -> float:
    """``LP_ROUNDS C (2 w + 1)`` for the pricings of the ``C`` classes and as much as
    :func:`~schedlab.offline.bounds.master.master_allowance` for the master (``lp``)."""
    horizon = lp_horizon(instance)
    blocks = len(uniform_blocks(horizon, DEFAULT_MAX_BLOCKS)) - 1
    width = pricing_width(horizon, blocks)
    pricing = LP_ROUNDS * request_classes(instance).n * (2.0 * width + 1.0)
    return pricing + master_allowance(instance.n, horizon, blocks, LP_ROUNDS)


def spacing_work(instance: Instance) -> float:
    """The LP's work and 16 evaluations of ``n (T + 1)`` (``completion-spacing``)."""
    dense = _SPACING_EVALUATIONS * instance.n * (lp_horizon(instance) + 1.0)
    return lp_work(instance) + dense


def lagrangian_work(instance: Instance) -> float:
    """205 pricings over 1,000 blocks (``lagrangian``)."""
    width = pricing_width(_horizon(instance), lagrangian.DEFAULT_BLOCKS)
    return float(_LAGRANGIAN_PRICINGS) * instance.n * width
