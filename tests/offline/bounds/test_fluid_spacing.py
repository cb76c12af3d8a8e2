"""Fluid-spacing bound (proofs/fluid_spacing.md): the prices, the exact minimum over starts,
validity against exact optima and on real schedules, and the gain over mean busy time."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.budget import Budget
from schedlab.errors import SchedlabError
from schedlab.offline.bounds import BOUNDS, FLUID_SPACING_MAX_N, lower_bound
from schedlab.offline.bounds.completion_spacing import piece_waste, search_multiplier
from schedlab.offline.bounds.fluid_spacing import (
    MAX_HORIZON,
    FluidSpacing,
    busy_time_prices,
    fluid_spacing,
    fluid_spacing_search,
    price_horizon,
)
from schedlab.offline.bounds.mean_busy_time import mean_busy_time_value
from schedlab.offline.bounds.time_indexed import _prefix_factor, _prefix_sums, lagrangian_bound
from schedlab.offline.instance import Instance
from schedlab.offline.instance_io import read_instance
from schedlab.offline.solve import solve
from schedlab.offline.verify import verify
from schedlab.testing import instances
from tests.conftest import ROOT, verified_rule_objective


def _brackets(inst: Instance, nu: float, pieces: int, starts: np.ndarray) -> np.ndarray:
    """f_i(p_i) plus the age pieces' waste at start p_i, recomputed round by round, with
    each piece priced at the least price of its own rounds (no monotonicity used)."""
    prices = busy_time_prices(inst)

    def lam(u: int) -> float:
        return float(prices[u]) if u < len(prices) else 0.0

    out = np.zeros(inst.n)
    for i in range(inst.n):
        p, s, o, a = (int(x[i]) for x in (starts, inst.prompt, inst.output, inst.arrival))
        out[i] = p + o - a + sum(lam(u) * (s + u - p + 1) for u in range(p, p + o))
        for q in range(pieces):
            age, end = o * q // pieces, o * (q + 1) // pieces
            if end > age:
                least = min(lam(u) for u in range(p + age, p + end))
                out[i] += float(piece_waste(least, end - age, s + age + 1, nu))
    return out


def _dense_value(inst: Instance, nu: float, pieces: int) -> float:
    """L^F(ν) with the minimum over every start, one start at a time."""
    prices = busy_time_prices(inst)
    horizon = len(prices)
    total = 0.0
    for i in range(inst.n):
        a = int(inst.arrival[i])
        taus = np.arange(a, max(a, horizon) + 1)
        starts = np.zeros((len(taus), inst.n), dtype=np.int64)
        starts[:, i] = taus
        total += min(_brackets(inst, nu, pieces, row)[i] for row in starts)
    return total - inst.kv_tokens * float(prices.sum()) - nu * inst.kv_tokens * inst.n


def test_prices_hand_computed() -> None:
    # volumes 3 (s = 0, o = 2) and 10 (s = 0, o = 4), M = 4: V/M = 0.75, 3.25 and
    # c = (1/3 - 1/10, 1/10); λ_t = c_1 (0.75 - t - 1/2)+ + c_2 (3.25 - t - 1/2)+:
    # λ_0 = (7/30) 0.25 + 0.1 * 2.75 = 1/3, λ_1 = 0.1 * 1.75, λ_2 = 0.1 * 0.75; T = 3
    inst = Instance.from_arrays(4, [0, 0], [4, 2])
    assert busy_time_prices(inst) == pytest.approx([1 / 3, 0.175, 0.075])


@settings(max_examples=100, deadline=None)
@given(instances(max_n=8, max_kv_tokens=30, max_output=12, max_arrival=0))
def test_prices_are_the_sum_of_hinges_non_increasing_and_convex(inst: Instance) -> None:
    prices = busy_time_prices(inst)
    v = np.sort(inst.volume).astype(float)
    due = np.cumsum(v) / inst.kv_tokens
    c = 1 / v - np.append(1 / v[1:], 0.0)
    middle = np.arange(len(prices) + 3) + 0.5  # three rounds past T, where λ is 0
    direct = np.maximum(due[None, :] - middle[:, None], 0.0) @ c
    assert prices == pytest.approx(direct[: len(prices)], abs=1e-12)
    assert direct[len(prices) :] == pytest.approx(0.0, abs=1e-12)
    assert (prices >= 0).all()
    assert (np.diff(prices) <= 0).all()  # exactly, by a running minimum
    assert (np.diff(prices, 2) >= -1e-12).all()


@settings(max_examples=1000, deadline=None)
@given(instances(max_n=6, max_kv_tokens=30, max_output=12, max_arrival=6))
def test_best_start_is_the_least_start_cost(inst: Instance) -> None:
    # f_i is convex, so bisection on f_i(τ + 1) - f_i(τ) finds its minimum over every
    # start τ >= a_i (compared with all starts up to max(a_i, T) + 5)
    bound = FluidSpacing(inst)
    for i in range(inst.n):
        taus = np.arange(inst.arrival[i], max(inst.arrival[i], bound.horizon) + 6)
        costs = bound.costs(np.full(len(taus), i), taus)
        assert bound.best_cost[i] == pytest.approx(costs.min(), rel=1e-12, abs=1e-9)
        assert inst.arrival[i] <= bound.best_start[i] <= max(inst.arrival[i], bound.horizon)


@settings(max_examples=60, deadline=None)
@given(
    instances(max_n=4, max_kv_tokens=16, max_output=8, max_arrival=4),
    st.floats(0, 2),
    st.integers(1, 4),
    st.integers(1, 6),
)
def test_blocks_never_exceed_the_minimum_over_every_start(
    inst: Instance, nu: float, pieces: int, blocks: int
) -> None:
    # blocks of one start take the minimum over every start exactly; wider blocks price
    # each block's starts at its last start, which can only lower the value
    dense = _dense_value(inst, nu, pieces)
    exact = FluidSpacing(inst, pieces=pieces, blocks=len(busy_time_prices(inst)))
    assert exact.width == 1
    assert exact.value(nu) == pytest.approx(dense, rel=1e-9, abs=1e-9)
    assert FluidSpacing(inst, pieces=pieces, blocks=blocks).value(nu) <= dense + 1e-9


@settings(max_examples=60, deadline=None)
@given(
    instances(max_n=5, max_kv_tokens=16, max_output=8, max_arrival=4),
    st.sampled_from(["fcfs", "sof", "total-size", "svf", "mc-sf", "brute-force"]),
    st.floats(0, 2),
    st.integers(1, 4),
)
def test_brackets_at_a_schedules_starts_bound_its_objective(
    inst: Instance, solver: str, nu: float, pieces: int
) -> None:
    # the proof's chain before the minimum over starts, for any feasible schedule p:
    # objective(p) >= sum_i bracket_i(p_i) - M sum_t λ_t - ν M n
    result = solve(inst, solver, bound=None)
    assert verify(inst, result.starts) == []
    brackets = _brackets(inst, nu, pieces, np.asarray(result.starts))
    value = (
        brackets.sum()
        - inst.kv_tokens * busy_time_prices(inst).sum()
        - nu * inst.kv_tokens * inst.n
    )
    assert value <= result.objective + 1e-9 * max(1.0, abs(value))


@settings(max_examples=40, deadline=None)
@given(
    instances(max_n=5, max_kv_tokens=12, max_output=6, max_arrival=3),
    st.floats(0, 2),
    st.integers(1, 4),
    st.integers(1, 8),
)
def test_never_exceeds_optimum(inst: Instance, nu: float, pieces: int, blocks: int) -> None:
    result = solve(inst, "brute-force", bound=None)
    assert verify(inst, result.starts) == []
    assert FluidSpacing(inst, pieces=pieces, blocks=blocks).value(nu) <= result.objective + 1e-9
    assert fluid_spacing(inst).value <= result.objective


def test_long_horizons_are_refused_and_left_out_of_best() -> None:
    # 200 requests of 99,999 tokens of output in M = 100,000: T = 9,999,900 rounds
    inst = Instance.from_arrays(100_000, [0] * 200, [99_999] * 200)
    assert price_horizon(inst) == 9_999_900 > MAX_HORIZON
    with pytest.raises(SchedlabError, match=r"^fluid_spacing: the horizon is 9,999,900 rounds"):
        FluidSpacing(inst)
    assert not BOUNDS["fluid-spacing"].chosen_for(inst)


def test_nan_multiplier_counts_as_zero() -> None:
    bound = FluidSpacing(Instance.from_arrays(10, [1, 2, 3, 0], [4, 5, 6, 3]))
    assert bound.value(float("nan")) == bound.value(0.0)


def test_numpy_integers_are_accepted() -> None:
    inst = Instance.from_arrays(10, [1, 2], [2, 3])
    bound = FluidSpacing(inst, pieces=np.int64(3), blocks=np.int32(4))
    assert bound.pieces == 3
    assert bound.value(0.1) <= solve(inst, "brute-force", bound=None).objective


def test_zero_multiplier_gives_the_lagrangian() -> None:
    # ν = 0: every piece takes m = ℓ (no waste), so L^F(0) = L(λ) with the fluid prices
    inst = Instance.from_arrays(10, [1, 2, 3, 0], [4, 5, 6, 3], [0, 2, 1, 0])
    bound = FluidSpacing(inst)
    bounds = np.arange(bound.horizon + 1)
    value, _, _ = lagrangian_bound(inst, bounds, bound.prices)
    assert bound.value(0.0) == pytest.approx(value)


def test_improves_on_mean_busy_time_on_the_shipped_backlog() -> None:
    # integer completions waste memory; the fluid bound cannot see it, this one does
    inst = read_instance(ROOT / "instances" / "mixed-n200.json")
    value, stats = fluid_spacing_search(inst)
    assert stats["stopped_by"] is None
    assert value > stats["lagrangian"] + 100
    assert value > mean_busy_time_value(inst) + 100
    assert value <= verified_rule_objective(inst)


def test_best_uses_it_up_to_its_size() -> None:
    in_best = BOUNDS["fluid-spacing"].in_best
    assert callable(in_best)
    assert in_best(Instance.from_arrays(10, [1] * FLUID_SPACING_MAX_N, [2] * FLUID_SPACING_MAX_N))
    assert not in_best(
        Instance.from_arrays(10, [1] * (FLUID_SPACING_MAX_N + 1), [2] * (FLUID_SPACING_MAX_N + 1))
    )
    bound = lower_bound(Instance.from_arrays(4, [0, 0], [3, 3]), "best", time_limit=5)
    assert "fluid-spacing" in bound.stats["values"]
    assert bound.value <= 8


def test_expired_cap_gives_the_trivial_bound() -> None:
    # the cap passed before L(λ) is known: nothing better than sum_i o_i is certain
    inst = Instance.from_arrays(10, [1, 2, 3, 0], [4, 5, 6, 3])
    budget = Budget(1e-3)
    while not budget.expired():
        pass
    value, stats = fluid_spacing_search(inst, budget=budget)
    assert stats["stopped_by"] == "time_limit"
    assert value == inst.output.sum()
    bound = fluid_spacing(inst, budget=budget)
    assert (bound.value, bound.status) == (inst.output.sum(), "stopped")


def test_evaluations_check_the_deadline() -> None:
    inst = Instance.from_arrays(10, [1, 2, 3, 0], [4, 5, 6, 3])
    bound = FluidSpacing(inst)
    with pytest.raises(TimeoutError):
        bound.value(0.01, deadline=time.perf_counter() - 1.0)
    with pytest.raises(TimeoutError):
        FluidSpacing(inst, deadline=time.perf_counter() - 1.0)


def test_search_starts_no_evaluation_its_estimate_says_will_not_fit() -> None:
    # an estimate of 10 s per evaluation and 1 s left: nothing is evaluated, the search
    # reports that the deadline cut it
    calls: list[float] = []
    search = search_multiplier(
        lambda nu, _: calls.append(nu) or 0.0, 1.0, time.perf_counter() + 1.0, seconds=10.0
    )
    assert calls == []
    assert search.cut and search.evaluations == 0 and search.value == -np.inf


def test_long_flat_horizon_keeps_the_best_start_and_the_costs_accurate() -> None:
    # 3,000 requests of nearly equal volume, T = 743,945 rounds: f_i is nearly flat over
    # long stretches, where a forward difference taken from two start costs (each with
    # the rounding error of P1(T)) has no reliable sign; the one summed by parts keeps it.
    # Every cost is within the error bound E of its exact sum, and the margin the bound
    # takes for rounding stays a small part of the value.
    rng = np.random.default_rng(1)
    inst = Instance.from_arrays(2000, rng.integers(0, 3, 3000), rng.integers(990, 1000, 3000))
    bound = FluidSpacing(inst)
    assert bound.horizon == 743_945
    cost_error, _ = bound._table.rounding(2.0, float(bound.horizon + 1), 999.0)
    taus = np.arange(bound.horizon + 2)
    for i in range(0, inst.n, 300):
        costs = bound.costs(np.full(len(taus), i), taus)
        assert bound.best_cost[i] <= costs.min() + 2e-3  # 0.18 above with two costs
        tau, o, s = int(bound.best_start[i]), int(inst.output[i]), int(inst.prompt[i])
        window = range(tau, min(tau + o, bound.horizon))
        exact = tau + o + math.fsum(float(bound.prices[u]) * (s + u - tau + 1) for u in window)
        assert abs(bound.best_cost[i] - exact) <= cost_error
    value, stats = fluid_spacing_search(inst)
    assert 0 < stats["rounding"] < 1e-4 * value
    assert value >= stats["lagrangian"] * (1 - 1e-9) - stats["rounding"]  # Claim 4


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 1e6, allow_subnormal=False), min_size=0, max_size=300),
    st.integers(0, 12),
)
def test_prefix_sums_stay_within_their_error_factor(values: list[float], scale: int) -> None:
    # two-level prefix sums of non-negative terms: every prefix within β ε sum(x) of the
    # exact one (math.fsum), β = 2K + m + 2
    x = np.asarray(values, dtype=float) * 10.0**scale
    got = _prefix_sums(x)
    assert len(got) == len(x) + 1 and got[0] == 0.0
    total = math.fsum(x)
    slack = _prefix_factor(len(x)) * np.finfo(float).eps * total
    for k in range(len(x) + 1):
        assert abs(got[k] - math.fsum(x[:k])) <= slack


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pieces": 0}, "fluid_spacing: pieces must be an integer >= 1, got 0"),
        ({"blocks": 2.5}, "fluid_spacing: blocks must be an integer >= 1, got 2.5"),
        ({"blocks": True}, "fluid_spacing: blocks must be an integer >= 1, got True"),
        ({"pieces": -3}, "fluid_spacing: pieces must be an integer >= 1, got -3"),
    ],
)
def test_bad_options_are_rejected(options: dict[str, object], message: str) -> None:
    inst = Instance.from_arrays(10, [1], [2])
    with pytest.raises(SchedlabError, match=f"^{message}$"):
        FluidSpacing(inst, **options)  # type: ignore[arg-type]
