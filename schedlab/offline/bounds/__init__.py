"""Lower bounds on the optimal total latency, behind one :func:`lower_bound`.

Each bound is a function ``fn(instance, *, time_limit) -> Bound`` in the plain dict
:data:`BOUNDS`; ``method="best"`` takes the largest valid value among those registered
with ``in_best=True``. Every bound's validity is proven in ``proofs/``.

``trivial``
    ``sum_i o_i``: request ``i`` is active for ``o_i`` rounds, so ``C_i - a_i >= o_i``.
``volume`` (:mod:`schedlab.offline.bounds.volume`)
    Memory-time area and output lengths of the k first completions, ``O(n log n)``.
``mean-busy-time`` (:mod:`schedlab.offline.bounds.mean_busy_time`)
    The volume bound with each request's memory profile (mean busy times and parallel
    inequalities), ``O(n log n)``: the fluid relaxation's value, as tight as the LP on
    large backlogs.
``lp`` (:mod:`schedlab.offline.bounds.time_indexed`)
    Time-indexed LP relaxation (rows aggregated into at most a few hundred blocks) by
    column generation, certified by the Lagrangian value of its duals for any horizon;
    in ``best`` for ``SPACING_MAX_N < n < LARGE_N``.
``completion-spacing`` (:mod:`schedlab.offline.bounds.completion_spacing`)
    The LP's Lagrangian with the memory that integer schedules must leave free between
    completions (every running request grows one token per round until the next
    completion): strictly above the LP on mixed backlogs. Dense in the start times, so
    ``best`` uses it for ``n <= SPACING_MAX_N`` (in place of ``lp`` and ``lagrangian``).
``lagrangian`` (:mod:`schedlab.offline.bounds.lagrangian`)
    The same Lagrangian bound with prices from the volume bound's fluid schedule and
    subgradient steps, no LP: cheap per step; ``best`` runs it from
    ``n > SPACING_MAX_N`` on, and from ``n >= LARGE_N`` on it replaces ``lp``.

``best`` runs the methods chosen for the instance in that order, each given half of what
is left of ``time_limit`` (the last one all of it); with ``time_limit=None`` it gives them
:data:`BEST_DEFAULT_TIME_LIMIT` seconds. Figures: ``benchmarks/bounds_scaling.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from schedlab.errors import UnknownNameError
from schedlab.offline.instance import Instance

__all__ = [
    "BEST_DEFAULT_TIME_LIMIT",
    "BOUNDS",
    "LARGE_N",
    "SPACING_MAX_N",
    "Bound",
    "BoundFn",
    "lower_bound",
    "register_bound",
]

#: Wall seconds ``lower_bound(..., "best", time_limit=None)`` spends at most.
BEST_DEFAULT_TIME_LIMIT = 60.0

#: From this many requests on, ``best`` skips ``lp`` (its master LP grows too large).
LARGE_N = 1500

#: Up to this many requests ``best`` runs ``completion-spacing`` (which solves the LP
#: itself) instead of ``lp`` and ``lagrangian``.
SPACING_MAX_N = 300


@dataclass(frozen=True)
class Bound:
    """A lower bound on the optimum of an instance.

    Attributes
    ----------
    value
        The bound (total latency, in rounds).
    method
        Registry name of the method that produced it.
    status
        ``"proven"`` when the method ran to completion, ``"time_limit"`` when it was
        stopped early (the value is still valid, only weaker).
    runtime
        Wall seconds.
    stats
        Method details (iterations, LP size, per-method values for ``best``).
    """

    value: float
    method: str
    status: str = "proven"
    runtime: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)


class BoundFn(Protocol):
    def __call__(self, instance: Instance, *, time_limit: float | None) -> Bound: ...


#: Whether ``best`` uses a bound: always/never, or decided per instance.
InBest = bool | Callable[[Instance], bool]

#: name -> (bound function, whether ``best`` uses it)
BOUNDS: dict[str, tuple[BoundFn, InBest]] = {}


def register_bound(name: str, *, in_best: InBest = True) -> Callable[[BoundFn], BoundFn]:
    """Decorator that registers a bound function under ``name``.

    ``in_best`` may be a predicate of the instance (e.g. to pick methods by size).
    """

    def decorate(fn: BoundFn) -> BoundFn:
        if name in BOUNDS:
            raise ValueError(f"bound {name!r} is registered twice")
        BOUNDS[name] = (fn, in_best)
        return fn

    return decorate


@register_bound("trivial")
def trivial_bound(instance: Instance, *, time_limit: float | None = None) -> Bound:
    """``sum_i o_i``: no request completes sooner than ``o_i`` rounds after release."""
    return Bound(float(instance.output.sum()), "trivial")


def lower_bound(
    instance: Instance, method: str = "best", time_limit: float | None = None
) -> Bound:
    """A valid lower bound on the optimal total latency of ``instance``.

    Parameters
    ----------
    method
        A name in :data:`BOUNDS`, or ``"best"``: the largest of the bounds registered
        for it, run one after another within ``time_limit`` overall.
    time_limit
        Wall seconds for the whole call (``None``: no limit for a single method,
        :data:`BEST_DEFAULT_TIME_LIMIT` for ``"best"``).
    """
    _load_builtin()
    if method != "best":
        if method not in BOUNDS:
            raise UnknownNameError("bound", method, [*BOUNDS, "best"])
        return BOUNDS[method][0](instance, time_limit=time_limit)
    if time_limit is None:
        time_limit = BEST_DEFAULT_TIME_LIMIT
    start = time.perf_counter()
    values: dict[str, float] = {}
    best: Bound | None = None
    chosen = [
        (name, fn)
        for name, (fn, in_best) in BOUNDS.items()
        if (in_best(instance) if callable(in_best) else in_best)
    ]
    for k, (name, fn) in enumerate(chosen):
        left = time_limit - (time.perf_counter() - start)
        if left <= 0 and best is not None:
            break
        # every method but the last may use half of what is left
        bound = fn(instance, time_limit=left if k == len(chosen) - 1 else left / 2)
        values[name] = bound.value
        if best is None or bound.value > best.value:
            best = bound
    assert best is not None  # "trivial" is always registered
    return Bound(
        best.value,
        best.method,
        best.status,
        time.perf_counter() - start,
        {**best.stats, "values": values},
    )


def _load_builtin() -> None:
    """Import the modules that register the built-in bounds (idempotent)."""
    # registration order is the order "best" runs them in: cheap bounds first
    import schedlab.offline.bounds.volume  # noqa: I001
    import schedlab.offline.bounds.mean_busy_time
    import schedlab.offline.bounds.time_indexed
    import schedlab.offline.bounds.completion_spacing
    import schedlab.offline.bounds.lagrangian  # noqa: F401
