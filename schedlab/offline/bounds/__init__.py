"""Lower bounds on the optimal total latency, behind one :func:`lower_bound`.

Every method is a function ``fn(instance, *, budget) -> Bound`` listed in
:data:`BUILTIN_BOUNDS` with its estimated work (:mod:`~schedlab.offline.bounds.cost`, in
start costs); a user adds one with :func:`register_bound`, an installed package with a
:class:`BoundMethod` in the entry-point group :data:`ENTRY_POINTS`. ``method="best"``
takes the largest value among the methods chosen for the instance, run cheapest first
(:func:`plan`): each is charged its estimate against one work budget (:data:`BEST_WORK`,
``work=``), and one whose estimate does not fit what is left is out of reach; one whose
proven ceiling (``tall-chain``'s, without the table) is no higher than the best value so
far is skipped as dominated (``proofs/best_order.md``). ``stats`` lists both, and the work
each method that ran counted (``work_by_method``: its ``stats["work"]``, else its
estimate; ``work_done``: their sum). A built-in method stops at its estimate, so
``work_done`` never passes the budget (``tests/offline/bounds/test_bound_budget.py``). Every
bound's validity is proven in ``proofs/``.

The methods with arrays over the rounds refuse horizons above
:data:`~schedlab.offline.bounds.time_indexed.MAX_HORIZON` rounds
(:class:`~schedlab.errors.HorizonError`), and every method refuses what would pass the
memory budget (:class:`~schedlab.errors.MemoryBudgetError`, :mod:`schedlab.budget`);
``best`` then goes on without them.

``trivial``
    ``sum_i o_i``: request ``i`` is active for ``o_i`` rounds, so ``C_i - a_i >= o_i``.
``volume`` (:mod:`schedlab.offline.bounds.volume`)
    Memory-time area and output lengths of the k first completions, ``O(n log n)``.
``tall-chain`` (:mod:`schedlab.offline.bounds.tall_chain`)
    Completions of requests that hold more than half the memory at their peak lie
    apart; the best order of up to 14 of them by a Held–Karp programme over subsets.
    Strong on Jaillet-parameter backlogs, nothing on ones without such requests.
``mean-busy-time`` (:mod:`schedlab.offline.bounds.mean_busy_time`)
    The volume bound with each request's memory profile (mean busy times and parallel
    inequalities), ``O(n log n)``: the fluid relaxation's value, as tight as the LP on
    large backlogs.
``fluid-spacing`` (:mod:`schedlab.offline.bounds.fluid_spacing`)
    The completion-spacing waste term (below) on the mean-busy-time bound's own prices,
    which are convex in time, so each request's best start is found by bisection and
    the starts are taken in blocks: ``O(T + n log T)`` and about 20 start blocks a request,
    2 s at ``n = 10^4``. ``best`` runs it up to ``n = FLUID_SPACING_MAX_N`` and horizons
    of ``fluid_spacing.MAX_HORIZON`` rounds.
    Above mean busy time by about 0.2 % on mixed backlogs of 1,000 requests and more.
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
    ``n > SPACING_MAX_N`` to ``LAGRANGIAN_MAX_N``, and from ``n >= LARGE_N`` on it
    replaces ``lp``. Neither of ``lagrangian`` and ``fluid-spacing`` dominates the other
    (``docs/design.md``, "Decision record").

Work and time (:mod:`schedlab.budget`): each method counts its work in its own units with
fixed defaults, and ``best`` plans by estimates, so the value depends only on the
instance (and ``work``); ``time_limit`` is a wall-clock cap (``None``: none), recorded
in ``stats["stopped_by"]`` when it binds. Under a cap, ``best`` gives every planned method
but the last half of what is left of it, the last one all of it. A method checks the cap inside its
longest unit of work too (``lagrangian`` between chunks of requests of a pricing), so a
cap is overrun by at most one such unit (``benchmarks/time_caps.py`` measures it;
``benchmarks/bounds_scaling.py`` the methods' times and values,
``benchmarks/bound_budget.py`` each method's work against its estimate).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schedlab.budget import UNLIMITED, Budget, memory_guard, stopped_by
from schedlab.errors import (
    HorizonError,
    InputError,
    InputTypeError,
    MemoryBudgetError,
    SchedlabError,
    SchedlabNote,
)
from schedlab.offline.bounds import (
    completion_spacing,
    cost,
    fluid_spacing,
    lagrangian,
    mean_busy_time,
    tall_chain,
    time_indexed,
    volume,
)
from schedlab.offline.bounds.bound import Bound, BoundFn
from schedlab.offline.bounds.cost import BEST_WORK
from schedlab.offline.instance import Instance, check_instance
from schedlab.progress import Progress, progress_for
from schedlab.registry import Registry

__all__ = [
    "BEST_WORK",
    "BOUNDS",
    "BUILTIN_BOUNDS",
    "ENTRY_POINTS",
    "FLUID_SPACING_MAX_N",
    "LAGRANGIAN_MAX_N",
    "LARGE_N",
    "SPACING_MAX_N",
    "Bound",
    "BoundFn",
    "BoundMethod",
    "available_bounds",
    "bound_steps",
    "bound_within",
    "check_work",
    "forget_bounds",
    "get_bound",
    "lower_bound",
    "plan",
    "register_bound",
]

#: From this many requests on, ``best`` skips ``lp`` (its master LP grows too large).
LARGE_N = 1500

#: Up to this many requests ``best`` runs ``completion-spacing`` (which solves the LP
#: itself) instead of ``lp`` and ``lagrangian``: it dominates both by construction (the
#: LP's Lagrangian plus a non-negative waste term), at about the cost of the two
#: together (``benchmarks/offline_targets.py --rows best`` measures it).
SPACING_MAX_N = 1000


#: Up to this many requests ``best`` runs ``fluid-spacing``: its arrays grow with the
#: horizon, its work with ``n log T``.
FLUID_SPACING_MAX_N = 100_000

#: Up to this many requests ``best`` runs ``lagrangian``: each of its pricings is
#: ``O(n · blocks)``, so beyond it not even one fits a cap of minutes, and ``best`` keeps
#: to the ``O(n log n)`` bounds.
LAGRANGIAN_MAX_N = 100_000


def trivial_bound(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
    """``sum_i o_i``: no request completes sooner than ``o_i`` rounds after release."""
    return Bound(float(instance.output.sum()), "trivial")


@dataclass(frozen=True)
class BoundMethod:
    """A registered bound: its function, whether ``best`` uses it for an instance, what
    ``best`` charges for it and what its value cannot pass.

    Attributes
    ----------
    name
        Registry name.
    fn
        The bound function.
    in_best
        ``True``/``False``, or a predicate of the instance (methods chosen by size).
    work
        Its estimated work on an instance, in start costs (:mod:`~.cost`), charged against
        ``best``'s work budget; ``None``: not estimated (``best`` runs it after the
        estimated methods and charges nothing).
    ceiling
        A proven upper bound on its value, cheap beside the method itself; ``best`` skips
        the method when the ceiling is no higher than the best value so far
        (``proofs/best_order.md``). ``None``: none known.
    """

    name: str
    fn: BoundFn
    in_best: bool | Callable[[Instance], bool] = True
    work: Callable[[Instance], float] | None = None
    ceiling: Callable[[Instance], float] | None = None

    def chosen_for(self, instance: Instance) -> bool:
        """Whether ``best`` chooses this method for ``instance`` (it runs if in reach)."""
        return self.in_best(instance) if callable(self.in_best) else self.in_best


#: The built-in methods, each with its estimated work (``best`` runs them cheapest first).
BUILTIN_BOUNDS: tuple[BoundMethod, ...] = (
    BoundMethod("trivial", trivial_bound, work=lambda instance: 0.0),
    BoundMethod("volume", volume.volume_bound, work=cost.sorting_work),
    BoundMethod(
        "tall-chain",
        tall_chain.tall_chain_bound,
        work=cost.tall_chain_work,
        ceiling=tall_chain.tall_chain_ceiling,
    ),
    BoundMethod("mean-busy-time", mean_busy_time.mean_busy_time_bound, work=cost.sorting_work),
    BoundMethod(
        "fluid-spacing",
        fluid_spacing.fluid_spacing,
        lambda instance: (
            instance.n <= FLUID_SPACING_MAX_N
            and fluid_spacing.price_horizon(instance) <= fluid_spacing.MAX_HORIZON
        ),
        work=cost.fluid_spacing_work,
    ),
    BoundMethod(
        "lp",
        time_indexed.lp_bound,
        lambda instance: SPACING_MAX_N < instance.n < LARGE_N,
        work=cost.lp_work,
    ),
    BoundMethod(
        "completion-spacing",
        completion_spacing.completion_spacing,
        lambda instance: instance.n <= SPACING_MAX_N,
        work=cost.spacing_work,
    ),
    BoundMethod(
        "lagrangian",
        lagrangian.lagrangian,
        lambda instance: SPACING_MAX_N < instance.n <= LAGRANGIAN_MAX_N,
        work=cost.lagrangian_work,
    ),
)

#: Entry-point group of installed bounds: ``name = "module:BOUND_METHOD"``.
ENTRY_POINTS = "schedlab.bounds"


#: Every method by name: the built-ins, those added by :func:`register_bound` and the
#: installed ones (:class:`~schedlab.registry.Registry`; ``best`` is no entry).
BOUNDS: Registry[BoundMethod] = Registry(
    "bound",
    BoundMethod,
    ENTRY_POINTS,
    ((method.name, method) for method in BUILTIN_BOUNDS),
    reserved=("best",),
    named=True,
)


def register_bound(
    name: str,
    fn: BoundFn,
    *,
    in_best: bool | Callable[[Instance], bool] = False,
    work: Callable[[Instance], float] | None = None,
) -> None:
    """Add a bound method ``fn(instance, *, budget) -> Bound`` under ``name``
    (``BOUNDS.register(name, BoundMethod(name, fn, in_best, work))``).

    With ``in_best`` it joins ``best``, charged ``work(instance)`` start costs
    (:mod:`~schedlab.offline.bounds.cost`), or, without ``work``, after the built-ins and
    charged nothing. The bound must be valid: ``best`` trusts it, and so does every gap
    schedlab reports.

    Raises
    ------
    RegistrationError
        If the name is taken or is ``"best"``.
    """
    BOUNDS.register(name, BoundMethod(name, fn, in_best, work))


def available_bounds() -> list[str]:
    """Names accepted by :func:`lower_bound`, sorted: built-in, registered and installed
    methods, and ``best``."""
    return sorted({*BOUNDS.names(), "best"})


def get_bound(name: str) -> BoundMethod:
    """The method registered or installed under ``name`` (:meth:`BOUNDS.get
    <schedlab.registry.Registry.get>`).

    Raises
    ------
    UnknownNameError
        Listing the known names.
    InputTypeError
        For an installed entry that is not a :class:`BoundMethod` of that name.
    """
    return BOUNDS.get(name)


def _installed_in_best(instance: Instance) -> list[BoundMethod]:
    """The installed methods ``best`` chooses for ``instance`` (after the others); one
    that cannot be loaded is left out with a :class:`~schedlab.errors.SchedlabNote`
    (a broken plug-in must not stop every bound: asked for by name, it is an error)."""
    methods = []
    own = BOUNDS.entries()
    for name in BOUNDS.names():
        if name in own:
            continue
        try:
            methods.append(get_bound(name))
        except SchedlabError as error:
            if name not in _LEFT_OUT:  # said once a process
                _LEFT_OUT.add(name)
                note = f"best leaves out bound {name!r}: {error}"
                warnings.warn(note, SchedlabNote, stacklevel=2)
    return [m for m in methods if m.chosen_for(instance)]


#: Installed bounds ``best`` has left out as broken, and said so.
_LEFT_OUT: set[str] = set()


def lower_bound(
    instance: Instance,
    method: str = "best",
    time_limit: float | None = None,
    *,
    max_memory: int | None = None,
    work: float | None = None,
    progress: bool | Progress = False,
) -> Bound:
    """A valid lower bound on the optimal total latency of ``instance``.

    Parameters
    ----------
    method
        A name of :func:`available_bounds`: a method, or ``"best"``, the largest of the
        methods chosen for the instance, run cheapest first within a work budget.
    time_limit
        Wall-clock cap in seconds for the whole call (``None``: none; every method then
        ends at its own work budget, the value depends only on the instance, and it is
        computed once a process: :func:`bound_within`).
    max_memory
        Memory budget in bytes of each method (``None``: a quarter of the machine's
        memory, :mod:`schedlab.budget`); ``best`` skips a method that would pass it.
    work
        ``best``'s work budget in start costs (``None``: :data:`BEST_WORK`): a method
        whose estimated work (:mod:`~schedlab.offline.bounds.cost`) does not fit what is
        left of it is out of reach. Ignored by the other methods.
    progress
        ``True``: a bar on standard error counts the methods and names the one running
        (:mod:`schedlab.progress`); or the caller's bar to step.

    Raises
    ------
    InputTypeError, InputError
        If ``work`` is not ``None`` or a positive finite number.
    """
    budget = Budget(time_limit, max_memory)
    return bound_within(instance, method, budget, progress=progress, work=work)


def check_work(work: object) -> float:
    """``work`` as a positive finite number of start costs (``None``: :data:`BEST_WORK`).

    Raises
    ------
    InputTypeError, InputError
        For anything else.
    """
    if work is None:
        return BEST_WORK
    if isinstance(work, bool) or not isinstance(work, int | float):
        raise InputTypeError(f"work: expected a number of start costs, got {work!r}")
    if not math.isfinite(work) or work <= 0:
        raise InputError(f"work: must be a positive number of start costs, got {work}")
    return float(work)


def _chosen(instance: Instance, method: str) -> list[BoundMethod]:
    """The methods ``method`` runs on ``instance`` (for ``best``: those chosen for it)."""
    check_instance(instance, "lower_bound")
    if method == "best":
        chosen = [m for m in BOUNDS.entries().values() if m.chosen_for(instance)]
        return chosen + _installed_in_best(instance)
    return [get_bound(method)]


def bound_steps(instance: Instance, method: str) -> int:
    """The steps :func:`bound_within` counts on a progress bar: one a method chosen."""
    return len(_chosen(instance, method))


def bound_within(
    instance: Instance,
    method: str,
    budget: Budget,
    *,
    progress: bool | Progress = False,
    counted: bool = False,
    work: float | None = None,
) -> Bound:
    """:func:`lower_bound` within ``budget`` (for methods that share theirs); ``counted``:
    the caller's ``progress`` bar already counts its :func:`bound_steps` (so its total is
    right from the start, as :func:`schedlab.solve` makes it); ``work``: ``best``'s work
    budget (:func:`lower_bound`).

    Without a wall-clock cap the bound depends only on the instance's content, the method
    (and the methods it runs, with their estimates), the work and memory budgets: it is
    computed once a process and the same call again returns a copy of it, ``runtime``
    included (the last 64 kept; :func:`forget_bounds` empties them). So
    :func:`schedlab.solve` of several solvers on one instance pays for it once.
    """
    allowed = check_work(work)
    chosen = _chosen(instance, method)
    # without a cap the value depends only on these (the methods themselves, with their
    # estimates and ceilings, which best's plan reads): computed once a process
    key = None
    if not budget.limited:
        key = (_content(instance), method, tuple(chosen), allowed, budget.max_memory)
    found = _COMPUTED.recall(key)
    with progress_for(progress, "lower bound") as bar:
        if not counted:
            bar.add(len(chosen))
        if found is not None:
            for entry in chosen:  # as they ran, at once
                bar.doing(entry.name)
                bar.step()
            return found
        if method != "best":
            bar.doing(method)
            with memory_guard(method):
                bound = chosen[0].fn(instance, budget=budget)
            bar.step()
        else:
            bound = _best(instance, chosen, budget, bar, allowed)
    _COMPUTED.keep(key, bound)
    return bound


class _Computed:
    """Bounds computed without a wall-clock cap, by their key in :func:`bound_within`: the
    last :data:`_MOST_COMPUTED` used, each given out as a copy. Safe across threads; a
    bound whose statistics cannot be copied is not kept."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[Any, ...], Bound] = OrderedDict()
        self._lock = threading.Lock()

    def recall(self, key: tuple[Any, ...] | None) -> Bound | None:
        """A copy of the bound kept under ``key`` (``None``: none)."""
        if key is None:
            return None
        with self._lock:
            found = self._kept.get(key)
            if found is None:
                return None
            self._kept.move_to_end(key)
        return dataclasses.replace(found, stats=copy.deepcopy(found.stats))

    def keep(self, key: tuple[Any, ...] | None, bound: Bound) -> None:
        """Keep a copy of ``bound`` under ``key`` (nothing for ``None``)."""
        if key is None:
            return
        try:
            kept = dataclasses.replace(bound, stats=copy.deepcopy(bound.stats))
        except Exception:  # a method's statistics that cannot be copied: not kept
            return
        with self._lock:
            self._kept[key] = kept
            if len(self._kept) > _MOST_COMPUTED:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        """Forget every bound (a benchmark that times the computation clears it first)."""
        with self._lock:
            self._kept.clear()


#: Most bounds the cache keeps (the least recently used is dropped first).
_MOST_COMPUTED = 64

#: The cache of :func:`bound_within`; the key holds the methods, so none of them goes
#: while its bound is kept.
_COMPUTED = _Computed()


def forget_bounds() -> None:
    """Forget every bound computed so far, so that the next call computes it again (for
    timing a bound: :func:`bound_within` returns a kept bound at once)."""
    _COMPUTED.clear()


def _content(instance: Instance) -> str:
    """A digest of what the bounds read of ``instance``: ``M``, prompts, outputs and
    releases."""
    digest = hashlib.sha256(str(instance.kv_tokens).encode())
    for array in (instance.prompt, instance.output, instance.arrival):
        digest.update(array.tobytes())
    return digest.hexdigest()


def plan(
    instance: Instance, chosen: list[BoundMethod], work: float
) -> tuple[list[BoundMethod], list[str], float]:
    """``best``'s plan: the ``chosen`` methods whose estimated work fits ``work``, cheapest
    first (ties in registry order; methods without an estimate last, charged nothing),
    the names of those out of reach, and the work charged.

    Going through the methods cheapest first, each is charged its estimate if that fits
    what is left; one that does not is out of reach (and so is every costlier one after
    it). Depends only on the instance and ``work``.
    """
    estimates = {m.name: None if m.work is None else m.work(instance) for m in chosen}
    order = sorted(chosen, key=lambda m: (estimates[m.name] is None, estimates[m.name] or 0.0))
    planned: list[BoundMethod] = []
    out_of_reach: list[str] = []
    charged = 0.0
    for entry in order:
        estimate = estimates[entry.name] or 0.0
        if charged + estimate > work:
            out_of_reach.append(entry.name)
            continue
        charged += estimate
        planned.append(entry)
    return planned, out_of_reach, charged


def _estimate(method: BoundMethod, instance: Instance) -> float:
    """What ``best`` charges ``method`` on ``instance`` (``0``: not estimated)."""
    return 0.0 if method.work is None else method.work(instance)


def _best(
    instance: Instance, chosen: list[BoundMethod], budget: Budget, bar: Progress, work: float
) -> Bound:
    """The largest bound of the methods of :func:`plan` (``best``), each stepping ``bar``.

    A method whose ceiling is no higher than the best value so far is skipped as
    dominated: it cannot raise the maximum (``proofs/best_order.md``). ``stats`` records
    the estimates charged (``work``) and the work counted (``work_done``, by method in
    ``work_by_method``). A method that
    refuses the instance's horizon (:class:`HorizonError`) or the memory budget
    (:class:`MemoryBudgetError`) is skipped. Under a wall-clock cap every method but the
    last planned gets half of what is left of it; once the cap has passed the rest are
    not run (``stats["stopped_by"] = "time_limit"``).
    """
    start = time.perf_counter()
    planned, out_of_reach, charged = plan(instance, chosen, work)
    for _ in out_of_reach:
        bar.step()
    values: dict[str, float] = {}
    done: dict[str, float] = {}
    stops: list[str | None] = []
    skipped: list[str] = []
    dominated: list[str] = []
    best: Bound | None = None
    for k, entry in enumerate(planned):
        if budget.expired() and best is not None:
            stops.append("time_limit")
            break
        ceiling = entry.ceiling
        if best is not None and ceiling is not None and ceiling(instance) <= best.value:
            dominated.append(entry.name)
            bar.step()
            continue
        # under a cap, every method but the last may use half of what is left
        share = budget if k == len(planned) - 1 else budget.share(0.5)
        bar.doing(entry.name)
        try:
            with memory_guard(entry.name):
                bound = entry.fn(instance, budget=share)
        except (HorizonError, MemoryBudgetError):
            skipped.append(entry.name)
            continue
        finally:
            bar.step()
        values[entry.name] = bound.value
        done[entry.name] = bound.stats.get("work", _estimate(entry, instance))
        stops.append(bound.stats.get("stopped_by"))
        if best is None or bound.value > best.value:
            best = bound
    assert best is not None  # "trivial" is always chosen and charged nothing
    return Bound(
        best.value,
        best.method,
        best.status,
        time.perf_counter() - start,
        {
            **best.stats,
            "values": values,
            "skipped": skipped,
            "dominated": dominated,
            "out_of_reach": out_of_reach,
            "work": charged,
            "work_budget": work,
            "work_done": sum(done.values()),
            "work_by_method": done,
            "stopped_by": stopped_by(*stops),
        },
    )
