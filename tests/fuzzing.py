"""Fuzzing the offline solvers and bounds against the independent verifier.

:func:`random_instance` draws a small offline instance of one of several shapes (a
backlog, releases, degenerate sizes, memory as tight as the largest request allows, a far
release). :func:`fuzz_instance` runs every registered solver on it
(:func:`schedlab.available_solvers`; small work budgets, a wall-clock cap as an outer
safety) and every registered bound method (:func:`schedlab.offline.bounds.available_bounds`),
and counts in a :class:`Tally`:

* each schedule checked by :func:`schedlab.testing.check_schedule` (infeasible: a broken
  invariant; a ``SolverError`` from :func:`schedlab.solve`, which verifies too, counts
  the same), which also recomputes its objective ``sum_i (p_i + o_i - a_i)`` from the
  instance's requests in Python integers (wrong objective: the result's differs),
* each bound's value and each result's own lower bound at most every verified objective,
  by :func:`schedlab.testing.check_bound` (bound above objective),
* each ``OPTIMAL`` status against the best verified objective of the instance (false
  certificate: a claimed optimum another solver beat),
* runs past their budget: a solver or bound that its wall-clock cap
  (:data:`TIME_LIMIT_S`, an outer safety) stopped instead of its work budget,
* refusals (a :class:`~schedlab.errors.SchedlabError` other than ``SolverError``: a
  solver's or bound's documented limit, e.g. ``dp`` above ``max_requests``), and errors
  that are not ``SchedlabError`` (a broken invariant: bad input must give a typed error).

It is shared by ``tests/test_fuzz_solvers.py`` (a short seeded run) and
``benchmarks/fuzz.py`` (the long run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from schedlab import available_solvers, lower_bound, solve
from schedlab.errors import SchedlabError, SolverError
from schedlab.offline.bounds import available_bounds
from schedlab.offline.instance import Instance
from schedlab.offline.result import Status
from schedlab.offline.solvers import get_solver
from schedlab.testing import BoundViolation, ScheduleViolation, check_bound, check_schedule
from schedlab.testing.schedules import reproducer

#: Work budgets (each solver's option ``work``, in its own unit) given to every solver
#: that takes one (so each run is short and still depends only on the instance and the
#: seed): 2,000 moves, orders or nodes unless named here (``None``: none given, so its
#: own default applies).
SHORT_WORK: dict[str, float | None] = {
    "dp": 20_000,
    "cpsat": 0.2,
    "receding-horizon": None,
    "sorted-f": None,
    "sorted-f-seq": None,
}
#: Other options given to every solver that takes them.
SHORT_OPTIONS: dict[str, Any] = {"max_requests": 9}  # dp

#: Wall-clock cap of one solver run or bound (an outer safety; recorded when it binds).
TIME_LIMIT_S = 20.0

#: Shapes :func:`random_instance` draws.
SHAPES = ("backlog", "releases", "degenerate", "tight", "far-release")

#: Invariant counters of a :class:`Tally`: each must stay 0.
BROKEN = (
    "infeasible",
    "wrong_objectives",
    "bounds_above",
    "false_optima",
    "past_budget",
    "errors",
)


@dataclasses.dataclass
class Tally:
    """Counts of a fuzzing run; ``problems`` keeps a reproducer of each broken invariant."""

    instances: int = 0
    runs: int = 0
    bound_runs: int = 0
    refusals: int = 0
    past_budget: int = 0
    infeasible: int = 0
    wrong_objectives: int = 0
    bounds_above: int = 0
    false_optima: int = 0
    errors: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def broken(self) -> int:
        """Broken invariants counted (0 in a sound run)."""
        return sum(getattr(self, name) for name in BROKEN)

    def merge(self, other: Tally) -> None:
        """Add ``other``'s counts and problems to these."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def table(self) -> str:
        """The counts, one ``name  value`` line each."""
        rows = [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)]
        return "\n".join(f"{name:<17} {value:>8,}" for name, value in rows if name != "problems")

    def _broke(self, counter: str, text: str) -> None:
        setattr(self, counter, getattr(self, counter) + 1)
        self.problems.append(f"{counter}: {text}")


def random_instance(rng: np.random.Generator, shape: str | None = None) -> Instance:
    """A random feasible instance (every request fits alone: ``s + o <= M``) of ``shape``
    (one of :data:`SHAPES`; drawn when ``None``), of 1 to 14 requests."""
    shape = shape or str(rng.choice(SHAPES))
    n = int(rng.integers(1, 15))
    memory = int(rng.integers(1, 80))
    if shape == "degenerate":
        n = int(rng.choice([1, 1, 2, 3, n]))
        memory = int(rng.choice([1, 2, memory]))
    output = rng.integers(1, min(memory, 25) + 1, n)
    prompt = np.array([rng.integers(0, memory - o + 1) for o in output])
    if shape == "degenerate":
        kind = int(rng.integers(4))
        if kind == 0:  # every request the same
            prompt, output = np.full(n, prompt[0]), np.full(n, output[0])
        elif kind == 1:  # each as large as the memory allows
            prompt = memory - output
        elif kind == 2:  # one-token outputs, empty prompts
            prompt, output = np.zeros(n, int), np.ones(n, int)
    arrival = np.zeros(n, int)
    if shape in ("releases", "degenerate", "far-release") and rng.random() < 0.8:
        arrival = rng.integers(0, int(rng.choice([2, 10, 60])), n)
    if shape == "far-release":
        arrival[int(rng.integers(n))] = int(rng.choice([500, 5_000, 50_000]))
    if shape == "tight":  # M = the largest request's peak
        memory = int((prompt + output).max())
    return Instance.from_arrays(memory, prompt, output, arrival, name=f"fuzz-{shape}")


def fuzz_instance(
    instance: Instance,
    tally: Tally,
    *,
    solvers: Sequence[str] | None = None,
    bounds: Sequence[str] | None = None,
    seed: int = 0,
) -> None:
    """Run every solver and bound on ``instance`` and count into ``tally`` (the module's
    docstring lists what is checked)."""
    tally.instances += 1
    here = reproducer(instance)
    objectives: dict[str, int] = {}
    optimal: dict[str, int] = {}
    own_bounds: dict[str, float] = {}
    for name in available_solvers() if solvers is None else solvers:
        accepted = get_solver(name).options
        options = {key: value for key, value in SHORT_OPTIONS.items() if key in accepted}
        work = SHORT_WORK.get(name, 2_000)
        if "work" in accepted and work is not None:
            options["work"] = work
        tally.runs += 1
        try:
            result = solve(
                instance, name, time_limit=TIME_LIMIT_S, seed=seed, bound=None, **options
            )
        except SolverError as exc:
            tally._broke("infeasible", f"{name} seed={seed} on {here}: {exc}")
            continue
        except SchedlabError:
            tally.refusals += 1
            continue
        except Exception as exc:  # counted: bad input must give a typed error
            tally._broke("errors", f"{name} seed={seed} on {here}: {type(exc).__name__}: {exc}")
            continue
        if result.stats.get("stopped_by") == "time_limit":
            tally._broke("past_budget", f"{name} seed={seed} on {here}: {TIME_LIMIT_S} s cap")
        try:
            objective = check_schedule(instance, result.starts)
        except ScheduleViolation as exc:
            tally._broke("infeasible", f"{name} seed={seed}: {exc}")
            continue
        if result.objective != objective:
            tally._broke(
                "wrong_objectives",
                f"{name} seed={seed} on {here}: reports {result.objective}, is {objective}",
            )
        objectives[name] = objective
        if result.status is Status.OPTIMAL:
            optimal[name] = objective
        if result.lower_bound is not None:
            own_bounds[name] = result.lower_bound
    best = min(objectives.values(), default=None)
    if best is None:
        return
    for name, value in own_bounds.items():
        try:
            check_bound(instance, value, best)  # best <= the solver's own objective
        except BoundViolation as exc:
            tally._broke("bounds_above", f"{name}'s own bound: {exc}")
    for name, value in optimal.items():
        if value != best:
            tally._broke("false_optima", f"{name}: OPTIMAL {value} but {best} found on {here}")
    for method in available_bounds() if bounds is None else bounds:
        tally.bound_runs += 1
        try:
            bound = lower_bound(instance, method, time_limit=TIME_LIMIT_S)
        except SchedlabError:
            tally.refusals += 1
            continue
        except Exception as exc:  # counted likewise
            tally._broke("errors", f"bound {method} on {here}: {type(exc).__name__}: {exc}")
            continue
        if bound.stats.get("stopped_by") == "time_limit":
            tally._broke("past_budget", f"bound {method} on {here}: {TIME_LIMIT_S} s cap")
        try:
            check_bound(instance, bound, best)
        except BoundViolation as exc:
            tally._broke("bounds_above", str(exc))


def fuzz(count: int, seed: int, **options: Any) -> Tally:
    """:func:`fuzz_instance` on ``count`` instances of :func:`random_instance` drawn from
    ``seed``; solver seeds drawn from it too."""
    rng = np.random.default_rng(seed)
    tally = Tally()
    for _ in range(count):
        instance = random_instance(rng)
        fuzz_instance(instance, tally, seed=int(rng.integers(2**16)), **options)
    return tally
