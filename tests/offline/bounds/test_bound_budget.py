"""``best`` within its work budget (issue 54): every method's counted work against its
estimate (:mod:`schedlab.offline.bounds.cost`) on random and degenerate instances, the
master LP's simplex work capped, and the 105 identical requests that once took minutes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.budget import Budget
from schedlab.offline.bounds import BEST_WORK, BOUNDS, lower_bound
from schedlab.offline.bounds.master import RestrictedMaster, master_allowance, pricing_width
from schedlab.offline.bounds.request_classes import request_classes
from schedlab.offline.bounds.time_indexed import lp_relaxation, uniform_blocks
from schedlab.offline.instance import Instance
from schedlab.testing import check_bound
from tests.conftest import verified_rule_objective

#: ``best`` on :func:`identical_105` before the master was solved by the primal simplex:
#: 51,744.0 by ``completion-spacing`` after 89.6 s (225 master solves, 332,599 dual
#: simplex iterations).
IDENTICAL_105_BEFORE = 51_744.0


def identical_105() -> Instance:
    """105 copies of one request (``s = 19``, ``o = 21``), released ``k mod 21``, ``M = 68``:
    the kept regression instance of issue 54."""
    k = np.arange(105)
    return Instance.from_arrays(68, np.full(105, 19), np.full(105, 21), k % 21, "identical-105")


def _check_work(inst: Instance) -> None:
    """``best``'s counted work within its budget, each method's within its estimate."""
    best = lower_bound(inst)
    assert best.stats["work_done"] <= best.stats["work_budget"] == BEST_WORK
    assert best.stats["work"] <= BEST_WORK
    for name, work in best.stats["work_by_method"].items():
        estimate = BOUNDS[name].work
        assert estimate is not None
        assert 0 <= work <= estimate(inst), name
    check_bound(inst, best, verified_rule_objective(inst))


def test_identical_105_keeps_its_bound_within_the_budget() -> None:
    inst = identical_105()
    best = lower_bound(inst)
    assert best.value >= IDENTICAL_105_BEFORE
    assert (best.method, best.status, best.stats["stopped_by"]) == (
        "completion-spacing",
        "proven",
        None,
    )
    assert best.stats["out_of_reach"] == []
    assert best.stats["work_done"] <= BEST_WORK
    spacing = best.stats["work_by_method"]["completion-spacing"]
    assert spacing <= BOUNDS["completion-spacing"].work(inst)  # type: ignore[misc]
    # a verified schedule's objective stays above it (mc-sf: 66,675)
    check_bound(inst, best, verified_rule_objective(inst, ("mc-sf", "svf", "sof")))


def _instance(n: int, shape: str, seed: int) -> Instance:
    """A random instance of ``n`` requests, or a degenerate one: identical requests,
    ``M`` equal to the largest request's peak, every request released at round 0."""
    rng = np.random.default_rng(seed)
    memory = int(rng.integers(2, 80))
    output = rng.integers(1, min(memory, 25), n)
    prompt = np.array([rng.integers(0, memory - o) for o in output])
    arrival = rng.integers(0, 30, n)
    if shape == "identical":
        prompt, output = np.full(n, prompt[0]), np.full(n, output[0])
    elif shape == "tight":
        memory = int((prompt + output).max())
    elif shape == "released-together":
        arrival = np.zeros(n, int)
    return Instance.from_arrays(memory, prompt, output, arrival)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 14),
    st.sampled_from(["random", "identical", "tight", "released-together"]),
    st.integers(0, 2**32 - 1),
)
def test_best_stays_within_its_budget(n: int, shape: str, seed: int) -> None:
    _check_work(_instance(n, shape, seed))


@pytest.mark.parametrize("shape", ["random", "tight", "released-together"])
def test_best_stays_within_its_budget_at_200_requests(shape: str) -> None:
    _check_work(_instance(200, shape, 7))


def test_the_lp_counts_its_work_and_stops_at_its_allowance() -> None:
    inst = identical_105()
    for rounds in (1, 4):
        relax = lp_relaxation(inst, max_rounds=rounds)
        blocks = len(relax.bounds) - 1
        width = pricing_width(relax.horizon, blocks)
        assert relax.stats["stopped_by"] == "work"
        assert relax.stats["iterations"] == rounds
        assert relax.stats["pricing_work"] <= rounds * request_classes(inst).n * (2 * width + 1)
        assert relax.stats["master_work"] <= master_allowance(
            inst.n, relax.horizon, blocks, rounds
        )
        assert relax.stats["work"] == relax.stats["pricing_work"] + relax.stats["master_work"]
        assert relax.stats["master_work"] > 0 or rounds == 1  # the first solve: no pivot
        again = lp_relaxation(inst, max_rounds=rounds)  # a deterministic count
        assert (again.value, again.stats["work"]) == (relax.value, relax.stats["work"])


def test_a_master_without_work_left_says_so() -> None:
    inst = identical_105()
    bounds = uniform_blocks(1269)
    master = RestrictedMaster(inst, bounds)
    every = np.arange(inst.n)
    master.add(every, np.full(inst.n, 1269))
    master.add(every, every // 2)  # over the memory: the master must pivot
    assert master.solve(Budget(), 0.0) == "work"
    assert master.work == 0
    assert master.solve(Budget(), np.inf) is None
    assert master.work > 0
