"""Completion-spacing bound (proofs/completion_spacing.md): the waste term, validity for
any prices against exact optima, and the gain over the LP."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.budget import Budget
from schedlab.errors import SchedlabError
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds import BOUNDS, SPACING_MAX_N, lower_bound
from schedlab.offline.bounds.completion_spacing import (
    _spacing_value,
    grid_minima,
    piece_slack,
    piece_waste,
    spacing_bound_search,
    spacing_value,
    start_brackets,
)
from schedlab.offline.bounds.time_indexed import lagrangian_bound, lp_relaxation, uniform_blocks
from schedlab.offline.instance import Instance
from schedlab.offline.schedule import Schedule
from schedlab.offline.solve import solve
from schedlab.offline.verify import verify
from schedlab.testing import instances
from tests.conftest import verified_rule_objective


def _spacing_weights(inst: Instance, starts: np.ndarray) -> np.ndarray:
    """Per round t: |A(t)| (e(t) - t), e(t) the next round in which a request completes."""
    last = starts + inst.output - 1
    horizon = int(last.max()) + 1
    weights = np.zeros(horizon)
    for t in range(horizon):
        active = (starts <= t) & (t <= last)
        if active.any():
            weights[t] = active.sum() * (last[last >= t].min() - t)
    return weights


@settings(max_examples=40, deadline=None)
@given(
    instances(max_n=6, max_kv_tokens=20, max_output=8, max_arrival=4),
    st.sampled_from(["fcfs", "sof", "total-size", "svf", "mc-sf", "dp"]),
)
def test_spacing_lemma_on_schedules(inst: Instance, solver: str) -> None:
    # the lemma behind the bound: M - load(t) >= |A(t)| (e(t) - t) in every round of any
    # feasible schedule (here: the rules' schedules and an optimal one)
    starts = solve(inst, solver, bound=None).starts
    assert verify(inst, starts) == []
    load = np.asarray(Schedule(inst, starts).memory_profile, dtype=float)
    weights = _spacing_weights(inst, np.asarray(starts))
    assert (inst.kv_tokens - load[: len(weights)] >= weights - 1e-9).all()


def _pieces(inst: Instance, starts: np.ndarray, step: int) -> list[tuple[int, int, int, int]]:
    """(request, ℓ, m, Σ_t (e(t) - t)) for every piece of every request's active rounds."""
    last = starts + inst.output - 1
    completion_rounds = np.unique(last)
    out = []
    for i in range(inst.n):
        rounds = np.arange(starts[i], last[i] + 1)
        for cell in np.unique(rounds // step):
            piece = rounds[rounds // step == cell]
            nxt = completion_rounds[np.searchsorted(completion_rounds, piece)]
            m = int(np.isin(piece, completion_rounds).sum())
            out.append((i, len(piece), m, int((nxt - piece).sum())))
    return out


@settings(max_examples=40, deadline=None)
@given(
    instances(max_n=6, max_kv_tokens=20, max_output=10, max_arrival=4),
    st.sampled_from(["fcfs", "svf", "mc-sf", "dp"]),
    st.integers(1, 6),
)
def test_piece_slack_and_completion_budget(inst: Instance, solver: str, step: int) -> None:
    # the two counting steps of the proof, on real schedules: every piece carries at least
    # piece_slack(ℓ, m) of spacing weight, and the completions witnessed, each costing
    # s_i + (age at the piece start) + 1, add up to at most M per completion round
    starts = np.asarray(solve(inst, solver, bound=None).starts)
    assert verify(inst, starts) == []
    pieces = _pieces(inst, starts, step)
    for _, length, m, weight in pieces:
        assert weight >= piece_slack(np.array(length), np.array(m)) - 1e-9
    spent = 0
    for i in range(inst.n):
        rounds = np.arange(starts[i], starts[i] + inst.output[i])
        for cell in np.unique(rounds // step):
            piece = rounds[rounds // step == cell]
            m = int(np.isin(piece, starts + inst.output - 1).sum())
            spent += (inst.prompt[i] + piece[0] - starts[i] + 1) * m
    assert spent <= inst.kv_tokens * len(np.unique(starts + inst.output))


def test_piece_slack_is_reached_by_even_spacing() -> None:
    # ℓ = 5 rounds, m = 1 completion in the middle: runs of 2 and 2 rounds, weights
    # 2 + 1 and 2 + 1 = 6 >= (5 - 1)(5 + 1) / (2 * 2) = 6 (tight)
    assert piece_slack(np.array(5), np.array(1)) == 6
    # no completion inside: one run of 5, weight >= 5 * 6 / 2 = 15
    assert piece_slack(np.array(5), np.array(0)) == 15


def test_grid_minima_hand_computed() -> None:
    # blocks [0, 3) at 2 and [3, 5) at 1, then 0 from the horizon 5 on: rounds priced
    # 2 2 2 1 1 0 0 ..., cells of 2 rounds: min(2, 2), min(2, 1), min(1, 0), 0, ...
    cells = grid_minima(np.array([0, 3, 5]), np.array([2.0, 1.0]), 2, 9)
    assert cells.tolist()[:5] == [2.0, 1.0, 0.0, 0.0, 0.0]
    assert len(cells) * 2 > 9  # every round up to the reach has its cell


def test_piece_waste_matches_integer_minimum() -> None:
    # the closed form (real m) is at most the minimum over integer m = 0..ℓ
    for price in (0.0, 0.3, 2.0):
        for length in (0, 1, 2, 5, 17):
            for cost, nu in ((1.0, 0.0), (3.0, 0.05), (40.0, 0.5), (1.0, 1e-310)):
                m = np.arange(length + 1)
                exact = (price * piece_slack(np.array(length), m) + nu * cost * m).min()
                got = float(piece_waste(np.array(price), np.array(length), np.array(cost), nu))
                assert got <= exact + 1e-9
                assert got >= exact - max(1.0, exact)  # real relaxation, not far below


def _round_prices(bounds: np.ndarray, mu: np.ndarray, rounds: int) -> np.ndarray:
    """λ_t for t < rounds: μ_k on block k, 0 from the horizon T = bounds[-1] on."""
    lam = np.zeros(max(rounds, int(bounds[-1])))
    for k in range(len(mu)):
        lam[bounds[k] : bounds[k + 1]] = mu[k]
    return lam


def test_start_brackets_hand_computed() -> None:
    # one request s = 0, o = 4, a = 0 started at 0; prices 1.0 on rounds 0-1, 0.2 on 2-3;
    # grid step 4, so its active rounds 0..3 are one piece: ℓ = 4, age 0, cost s + 0 + 1 = 1.
    # f(0) = 0 + 4 - 0 + 1.0 * (1 + 2) + 0.2 * (3 + 4) = 8.4.
    # waste: least price on the cell [0, 4) is 0.2 (not 1.0); min over real m of
    # 0.2 (4 - m) 5 / (2 (m + 1)) + 0.4 m is at m + 1 = 5 sqrt(0.2 / 0.8) = 2.5: 0.5 + 0.6.
    # (With the cell's largest price, 1.0, it would be 1.6 at m = 4: an unsound 10.0.)
    inst = Instance.from_arrays(10, [0], [4])
    bounds = np.array([0, 2, 4])
    got = start_brackets(inst, bounds, np.array([1.0, 0.2]), 0.4, 4, np.array([0]))
    assert got == pytest.approx([8.4 + 1.1])


@pytest.mark.parametrize("step", [1, 2, 3, 5])
@pytest.mark.parametrize("nu", [0.0, 0.03, 0.4])
def test_start_brackets_recomputed_piece_by_piece(step: int, nu: float) -> None:
    # start_brackets(p)_i - f_i(p_i) is the sum over the pieces of [p_i, p_i + o_i) of
    # piece_waste(least round price of the piece's grid cell, ℓ, s_i + age + 1, ν);
    # f_i and the pieces are recomputed here round by round (starts need not be feasible,
    # some lie past the horizon T = 16 where prices are 0)
    inst = Instance.from_arrays(12, [1, 0, 3, 2, 4], [5, 7, 3, 6, 2], [0, 2, 1, 0, 5])
    bounds = uniform_blocks(16, 8)  # blocks of two rounds
    mu = np.array([0.5, 0.1, 0.9, 0.0, 0.4, 1.2, 0.3, 0.7])
    rng = np.random.default_rng(7)
    for _ in range(10):
        starts = inst.arrival + rng.integers(0, 14, inst.n)
        lam = _round_prices(bounds, mu, int((starts + inst.output).max()) + step)
        got = start_brackets(inst, bounds, mu, nu, step, starts)
        for i in range(inst.n):
            p, s, o = int(starts[i]), int(inst.prompt[i]), int(inst.output[i])
            a = int(inst.arrival[i])
            f = p + o - a + sum(lam[u] * (s + u - p + 1) for u in range(p, p + o))
            waste = 0.0
            for q in range(p // step, (p + o - 1) // step + 1):
                left, right = max(p, q * step), min(p + o, (q + 1) * step)
                least = lam[q * step : (q + 1) * step].min()
                waste += float(piece_waste(least, right - left, s + (left - p) + 1, nu))
            assert got[i] - f == pytest.approx(waste, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    instances(max_n=5, max_kv_tokens=12, max_output=6, max_arrival=3),
    st.sampled_from(["fcfs", "sof", "total-size", "svf", "mc-sf", "brute-force"]),
    st.integers(1, 30),
    st.integers(1, 12),
    st.floats(0, 2),
    st.integers(1, 6),
    st.data(),
)
def test_start_brackets_bound_each_schedule(
    inst: Instance,
    solver: str,
    horizon: int,
    blocks: int,
    nu: float,
    step: int,
    data: st.DataObject,
) -> None:
    # the proof's chain before the minimum over starts: for any feasible schedule p,
    # objective(p) >= sum_i bracket_i(p_i) - M sum_t λ_t - ν M n, for any μ, ν >= 0 and step
    bounds = uniform_blocks(horizon, blocks)
    mu = np.array(
        data.draw(st.lists(st.floats(0, 2), min_size=len(bounds) - 1, max_size=len(bounds) - 1))
    )
    result = solve(inst, solver, bound=None)
    assert verify(inst, result.starts) == []
    brackets = start_brackets(inst, bounds, mu, nu, step, np.asarray(result.starts))
    value = brackets.sum() - inst.kv_tokens * (mu @ np.diff(bounds)) - nu * inst.kv_tokens * inst.n
    assert value <= result.objective + 1e-9 * max(1.0, abs(value))


def test_zero_multiplier_gives_the_lagrangian() -> None:
    # ν = 0: every piece takes m = ℓ (no waste, no cost), so L+ = L(μ)
    inst = Instance.from_arrays(10, [1, 2, 3, 0], [4, 5, 6, 3], [0, 2, 1, 0])
    bounds = uniform_blocks(20, 5)
    mu = np.array([0.3, 0.2, 0.2, 0.1, 0.0])
    value, _, _ = lagrangian_bound(inst, bounds, mu)
    assert spacing_value(inst, bounds, mu, 0.0, step=3) == pytest.approx(value)


@settings(max_examples=30, deadline=None)
@given(
    instances(max_n=5, max_kv_tokens=12, max_output=6, max_arrival=3),
    st.integers(1, 30),
    st.integers(1, 12),
    st.floats(0, 2),
    st.integers(1, 6),
    st.data(),
)
def test_never_exceeds_optimum_for_any_prices(
    inst: Instance, horizon: int, blocks: int, nu: float, step: int, data: st.DataObject
) -> None:
    # valid for every μ >= 0, ν >= 0, grid step and horizon, not only the LP's prices
    bounds = uniform_blocks(horizon, blocks)
    mu = np.array(
        data.draw(st.lists(st.floats(0, 2), min_size=len(bounds) - 1, max_size=len(bounds) - 1))
    )
    result = solve(inst, "brute-force", bound=None)
    assert verify(inst, result.starts) == []
    assert spacing_value(inst, bounds, mu, nu, step) <= result.objective + 1e-9


def _random_case(
    rng: np.random.Generator,
) -> tuple[Instance, np.ndarray, np.ndarray, float, int]:
    """An instance, blocks, prices, a multiplier and a grid step; the multiplier
    log-uniform, so that the pieces' least waste falls inside its range, not at an end."""
    n = int(rng.integers(1, 13))
    memory = int(rng.integers(20, 60))
    output = rng.integers(1, 20, n)
    prompt = np.array([rng.integers(0, memory - o) for o in output])
    inst = Instance.from_arrays(memory, prompt, output, rng.integers(0, 30, n))
    bounds = uniform_blocks(int(rng.integers(1, 80)), int(rng.integers(1, 12)))
    mu = rng.uniform(0.0, 5.0, len(bounds) - 1) * (rng.random(len(bounds) - 1) < 0.9)
    nu = 0.0 if rng.random() < 0.1 else float(10.0 ** rng.uniform(-6, 2))
    return inst, bounds, mu, nu, int(rng.integers(1, 10))


def test_engines_agree_bit_for_bit() -> None:
    # releases past the horizon, empty pieces, zero prices and multipliers included
    rng = np.random.default_rng(5)
    for _ in range(300):
        inst, bounds, mu, nu, step = _random_case(rng)
        reference = spacing_value(inst, bounds, mu, nu, step, engine="python")
        assert spacing_value(inst, bounds, mu, nu, step, engine="compiled") == reference


def test_engines_agree_when_prices_overflow() -> None:
    # window sums past the float range make brackets NaN: both engines return NaN
    inst = Instance.from_arrays(100, [3], [2], [0])
    bounds = uniform_blocks(100, 100)
    mu = np.zeros(100)
    mu[50:] = 1e306
    for engine in ("python", "compiled"):
        assert np.isnan(spacing_value(inst, bounds, mu, 0.0, 1, engine=engine))


def test_engines_agree_on_a_mixed_backlog_at_the_lps_prices() -> None:
    inst = mixed_backlog(60, seed=2)
    relax = lp_relaxation(inst, max_rounds=20)
    for nu in (0.0, 1e-5, 1e-3):
        values = {
            engine: spacing_value(inst, relax.bounds, relax.prices, nu, 11, engine=engine)
            for engine in ("python", "compiled")
        }
        assert values["compiled"] == values["python"]


def test_an_unknown_engine_is_refused() -> None:
    inst = Instance.from_arrays(10, [1], [2])
    with pytest.raises(SchedlabError, match="engine: must be one of compiled, python"):
        spacing_value(inst, uniform_blocks(5, 5), np.zeros(5), 0.0, 1, engine="fortran")


@settings(max_examples=20, deadline=None)
@given(instances(max_n=5, max_kv_tokens=12, max_output=6, max_arrival=3))
def test_search_never_exceeds_optimum(inst: Instance) -> None:
    result = solve(inst, "brute-force", bound=None)
    assert verify(inst, result.starts) == []
    value, stats = spacing_bound_search(inst, budget=Budget(10))
    assert stats["lp"] <= value <= result.objective + 1e-9


def test_improves_on_the_lp_of_a_mixed_backlog() -> None:
    # the LP's fractional completions happen in every round; integer ones cannot, so the
    # waste term lifts the bound strictly above the LP's certificate
    inst = mixed_backlog(60, seed=1)
    value, stats = spacing_bound_search(inst, budget=Budget(25))
    assert stats["lp_status"] == "optimal"
    assert value > stats["lp"] + 1
    assert value <= verified_rule_objective(inst)


def test_best_uses_it_for_small_instances_only() -> None:
    in_best = BOUNDS["completion-spacing"].in_best
    assert callable(in_best)
    assert in_best(mixed_backlog(SPACING_MAX_N, seed=0))
    assert not in_best(mixed_backlog(SPACING_MAX_N + 1, seed=0))
    bound = lower_bound(Instance.from_arrays(4, [0, 0], [3, 3]), "best", time_limit=5)
    assert "completion-spacing" in bound.stats["values"]
    assert bound.value <= 8


def test_bad_step_is_rejected() -> None:
    inst = Instance.from_arrays(10, [1], [2])
    with pytest.raises(SchedlabError, match=r"^spacing_value: step must be >= 1, got 0$"):
        spacing_value(inst, uniform_blocks(4, 2), np.zeros(2), 0.0, step=0)


def test_evaluation_is_abandoned_once_its_extrapolation_passes_the_deadline() -> None:
    # the deadline already passed: the first chunk's time, extrapolated to the requests
    # left, ends past it, so the evaluation stops after that chunk (n = 40: 16+ chunks)
    inst = mixed_backlog(40, seed=2)
    bounds = uniform_blocks(200, 20)
    mu = np.full(20, 0.01)
    with pytest.raises(TimeoutError):
        _spacing_value(inst, bounds, mu, 0.1, 7, time.perf_counter() - 1.0)
    finite = _spacing_value(inst, bounds, mu, 0.1, 7, time.perf_counter() + 3600.0)
    assert finite == spacing_value(inst, bounds, mu, 0.1, 7)


def test_time_limit_is_kept() -> None:
    inst = mixed_backlog(150, seed=1)
    began = time.perf_counter()
    value, stats = spacing_bound_search(inst, budget=Budget(2.0))
    # 2 s, plus one LP solve or pricing in flight; no evaluation starts that cannot end
    assert time.perf_counter() - began < 6.0
    assert value >= stats["lp"] >= inst.output.sum()
