"""Every registered solver and bound on random instances of every shape, against the
independent verifier (``tests/fuzzing.py``): the short, seeded run of CI; the long one is
``python benchmarks/fuzz.py``. The checks are shown to fail on solvers and bounds that
lie, so a run that counts nothing broken means something."""

from __future__ import annotations

import numpy as np
import pytest

from schedlab import available_solvers
from schedlab.offline.bounds import BOUNDS, Bound, BoundMethod
from schedlab.offline.instance import Instance
from schedlab.offline.result import SolverOutput, Status
from schedlab.offline.solvers import SOLVERS, SolverInfo
from tests.fuzzing import SHAPES, Tally, fuzz_instance, random_instance


@pytest.mark.parametrize("shape", SHAPES)
def test_random_instances_break_no_invariant(shape: str) -> None:
    instance = random_instance(np.random.default_rng(SHAPES.index(shape) + 43), shape)
    tally = Tally()
    fuzz_instance(instance, tally, seed=7)
    assert tally.broken == 0, tally.problems
    assert tally.runs == len(available_solvers())
    assert tally.refusals < tally.runs  # something ran


#: Four requests of peak 6 in a memory of 12: two fit at once, so a serial schedule is
#: not optimal.
PAIRS = Instance.from_arrays(12, [2, 2, 2, 2], [4, 4, 4, 4])


def _serial_claimed_optimal(instance, *, budget, seed=0):  # type: ignore[no-untyped-def]
    """One request after another, claimed optimal and its objective a proven bound."""
    starts = np.concatenate([[0], np.cumsum(instance.output)[:-1]])
    objective = float((starts + instance.output - instance.arrival).sum())
    return SolverOutput(starts, Status.OPTIMAL, objective)


def _all_at_once(instance, *, budget, seed=0):  # type: ignore[no-untyped-def]
    return SolverOutput(np.zeros(instance.n, np.int64))


def _crash(instance, *, budget, seed=0):  # type: ignore[no-untyped-def]
    raise ZeroDivisionError("a bug")


def _bogus_bound(instance, *, budget):  # type: ignore[no-untyped-def]
    return Bound(1e12, "bogus")


@pytest.mark.parametrize(
    ("fn", "counter"),
    [(_serial_claimed_optimal, "false_optima"), (_all_at_once, "infeasible"), (_crash, "errors")],
)
def test_a_lying_solver_is_counted(fn, counter: str) -> None:
    tally = Tally()
    with SOLVERS.temporarily("liar", SolverInfo("liar", fn, exact=True)):
        fuzz_instance(PAIRS, tally, solvers=["liar", "fcfs"], bounds=[])
    assert getattr(tally, counter) == 1 and tally.broken >= 1
    assert any(p.startswith(f"{counter}: ") for p in tally.problems)
    if fn is _serial_claimed_optimal:  # its own bound is above fcfs's objective too
        assert tally.bounds_above == 1


def test_a_bound_above_an_objective_is_counted() -> None:
    tally = Tally()
    with BOUNDS.temporarily("bogus", BoundMethod("bogus", _bogus_bound)):
        fuzz_instance(PAIRS, tally, solvers=["fcfs"], bounds=["bogus", "trivial"])
    assert tally.bounds_above == 1 and tally.broken == 1
    assert "bound 'bogus' = 1e+12 exceeds 24" in tally.problems[0]


def test_a_refusal_is_counted_apart() -> None:
    tally = Tally()
    big = Instance.from_arrays(50, [1] * 13, [2] * 13)  # dp's max_requests, brute-force's n
    fuzz_instance(big, tally, solvers=["dp", "brute-force", "fcfs"], bounds=[])
    assert (tally.runs, tally.refusals, tally.broken) == (3, 2, 0)
