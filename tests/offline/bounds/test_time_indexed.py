"""Time-indexed LP relaxation and its Lagrangian certificate.

Checks ``proofs/time_indexed_lagrangian.md``: exact pricing (against enumeration of
every start), validity for every horizon and block width, convergence to the LP.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.budget import Budget
from schedlab.offline.backlogs import jaillet_instance, mixed_backlog
from schedlab.offline.bounds import lower_bound
from schedlab.offline.bounds.time_indexed import (
    LPRelaxation,
    block_loads,
    lagrangian_bound,
    lp_relaxation,
    price_starts,
    uniform_blocks,
)
from schedlab.offline.instance import Instance
from schedlab.offline.solve import solve
from schedlab.testing import instances


def _brute_min(inst: Instance, bounds: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """min over tau in [a, T + max o] of f_i(tau), summing the prices round by round."""
    horizon = int(bounds[-1])
    lam = np.zeros(horizon + int(inst.arrival.max() + inst.output.max()) + 3)
    lam[:horizon] = np.repeat(mu, np.diff(bounds))
    out = []
    for s, o, a in zip(inst.prompt, inst.output, inst.arrival, strict=True):
        out.append(
            min(
                t + o - a + sum(lam[u] * (s + u - t + 1) for u in range(t, t + o))
                for t in range(a, max(a, horizon) + 2)
            )
        )
    return np.array(out)


@settings(max_examples=60, deadline=None)
@given(
    instances(max_n=4, max_kv_tokens=20, max_output=15, max_arrival=30),
    st.integers(1, 60),
    st.integers(1, 25),
    st.data(),
)
def test_pricing_is_exact(inst: Instance, horizon: int, blocks: int, data: st.DataObject) -> None:
    # every start is enumerated; the piecewise-quadratic search must find the same minimum
    bounds = uniform_blocks(horizon, blocks)
    mu = np.array(
        data.draw(st.lists(st.floats(0, 3), min_size=len(bounds) - 1, max_size=len(bounds) - 1))
    )
    best, arg = price_starts(inst, bounds, mu)
    brute = _brute_min(inst, bounds, mu)
    np.testing.assert_allclose(best, brute, rtol=1e-9, atol=1e-9)
    assert (arg >= inst.arrival).all()


def test_zero_prices_give_the_trivial_bound() -> None:
    # with mu = 0 every request starts at its release: L = sum o_i
    inst = Instance.from_arrays(10, [1, 2, 3], [4, 5, 6], [0, 2, 1])
    value, _, arg = lagrangian_bound(inst, uniform_blocks(20, 5), np.zeros(5))
    assert value == 15
    assert arg.tolist() == [0, 2, 1]


def test_block_loads_match_memory_profile() -> None:
    # a schedule's block loads are its per-round loads summed over each block
    inst = Instance.from_arrays(20, [1, 2, 0], [3, 2, 4])
    starts = np.array([0, 1, 3])
    bounds = uniform_blocks(8, 4)  # blocks of two rounds
    from schedlab.offline.schedule import Schedule

    profile = np.zeros(8)
    prof = Schedule(inst, starts).memory_profile
    profile[: len(prof)] = prof
    np.testing.assert_allclose(block_loads(inst, bounds, starts), profile.reshape(4, 2).sum(1))


@settings(max_examples=25, deadline=None)
@given(
    instances(max_n=5, max_kv_tokens=12, max_output=6, max_arrival=3),
    st.one_of(st.none(), st.integers(1, 40)),
    st.integers(1, 50),
)
def test_lp_value_never_exceeds_optimum(inst: Instance, horizon: int | None, blocks: int) -> None:
    # valid for every horizon (even too short ones) and every aggregation
    optimum = solve(inst, "brute-force", bound=None).objective
    relax = lp_relaxation(inst, horizon=horizon, max_blocks=blocks, budget=Budget(20))
    assert relax.value <= optimum + 1e-9
    assert relax.value >= inst.output.sum() - 1e-6
    assert relax.mean_start.shape == (inst.n,)
    assert (relax.mean_start >= inst.arrival - 1e-6).all()


def test_converged_lp_meets_master_and_reproduces_tiny_optima() -> None:
    inst = jaillet_instance(2, n=10)
    relax = lp_relaxation(inst, budget=Budget(60))
    assert isinstance(relax, LPRelaxation)
    assert relax.status == "optimal"
    assert relax.value == pytest.approx(relax.lp_value, rel=1e-4)
    assert relax.value <= solve(inst, "cpsat", time_limit=60, bound=None).objective


def test_lp_bound_registered_and_respects_time_limit() -> None:
    inst = jaillet_instance(1)  # n in [40, 60]
    bound = lower_bound(inst, "lp", time_limit=1.0)
    assert bound.runtime < 5.0
    assert bound.value >= inst.output.sum()


def test_bad_horizon_is_rejected() -> None:
    inst = Instance.from_arrays(10, [1], [2])
    with pytest.raises(ValueError, match="horizon"):
        lp_relaxation(inst, horizon=0)


@pytest.mark.parametrize("checks", [0, 1])
def test_lp_drops_a_pricing_cut_by_the_cap(
    checks: int, cut_after: Callable[[int], Budget]
) -> None:
    # the cap passes inside the first round's pricing (checks=0) or its smoothing
    # pricing (1): the round's master still gives the mean starts, and the value is
    # the trivial bound or that round's Lagrangian value
    inst = mixed_backlog(40, seed=4)
    relax = lp_relaxation(inst, budget=cut_after(checks))
    assert relax.stats["stopped_by"] == "time_limit"
    assert relax.stats["iterations"] == 1
    assert len(relax.stats["history"]) == checks
    assert relax.mean_start.shape == (inst.n,)
    uncut = lp_relaxation(inst, max_rounds=1)
    if checks == 0:
        assert relax.value == inst.output.sum()
    else:
        assert relax.value == uncut.value
        np.testing.assert_array_equal(relax.mean_start, uncut.mean_start)
