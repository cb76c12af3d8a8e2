"""Completion-spacing bound (proofs/completion_spacing.md): the waste term, validity for
any prices against exact optima, and the gain over the LP."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.bounds import BOUNDS, SPACING_MAX_N, lower_bound
from schedlab.bounds.completion_spacing import (
    piece_slack,
    piece_waste,
    spacing_bound_search,
    spacing_value,
)
from schedlab.bounds.time_indexed import lagrangian_bound, uniform_blocks
from schedlab.instance import Instance
from schedlab.schedule import Schedule
from schedlab.solve import solve
from schedlab.verify import verify
from schedlab.workloads import mixed_backlog
from tests.strategies import instances


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
    instances(max_n=6, max_memory=20, max_output=8, max_arrival=4),
    st.sampled_from(["fcfs", "sof", "total-size", "svf", "mc-sf", "brute-force"]),
)
def test_spacing_lemma_on_schedules(inst: Instance, solver: str) -> None:
    # the lemma behind the bound: M - load(t) >= |A(t)| (e(t) - t) in every round of any
    # feasible schedule (here: the rules' schedules and an optimal one)
    starts = solve(inst, solver, bound=None).starts
    assert verify(inst, starts) == []
    load = np.asarray(Schedule(inst, starts).memory_profile, dtype=float)
    weights = _spacing_weights(inst, np.asarray(starts))
    assert (inst.memory - load[: len(weights)] >= weights - 1e-9).all()


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
    instances(max_n=6, max_memory=20, max_output=10, max_arrival=4),
    st.sampled_from(["fcfs", "svf", "mc-sf", "brute-force"]),
    st.integers(1, 6),
)
def test_piece_slack_and_completion_budget(inst: Instance, solver: str, step: int) -> None:
    # the two counting steps of the proof, on real schedules: every piece carries at least
    # piece_slack(ℓ, m) of spacing weight, and the completions witnessed, each costing
    # s_i + (age at the piece start) + 1, add up to at most M per completion round
    starts = np.asarray(solve(inst, solver, bound=None).starts)
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
    assert spent <= inst.memory * len(np.unique(starts + inst.output))


def test_piece_slack_is_reached_by_even_spacing() -> None:
    # ℓ = 5 rounds, m = 1 completion in the middle: runs of 2 and 2 rounds, weights
    # 2 + 1 and 2 + 1 = 6 >= (5 - 1)(5 + 1) / (2 * 2) = 6 (tight)
    assert piece_slack(np.array(5), np.array(1)) == 6
    # no completion inside: one run of 5, weight >= 5 * 6 / 2 = 15
    assert piece_slack(np.array(5), np.array(0)) == 15


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


def test_zero_multiplier_gives_the_lagrangian() -> None:
    # ν = 0: every piece takes m = ℓ (no waste, no cost), so L+ = L(μ)
    inst = Instance.from_arrays(10, [1, 2, 3, 0], [4, 5, 6, 3], [0, 2, 1, 0])
    bounds = uniform_blocks(20, 5)
    mu = np.array([0.3, 0.2, 0.2, 0.1, 0.0])
    value, _, _ = lagrangian_bound(inst, bounds, mu)
    assert spacing_value(inst, bounds, mu, 0.0, step=3) == pytest.approx(value)


@settings(max_examples=30, deadline=None)
@given(
    instances(max_n=5, max_memory=12, max_output=6, max_arrival=3),
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
    optimum = solve(inst, "brute-force", bound=None).objective
    assert spacing_value(inst, bounds, mu, nu, step) <= optimum + 1e-9


@settings(max_examples=20, deadline=None)
@given(instances(max_n=5, max_memory=12, max_output=6, max_arrival=3))
def test_search_never_exceeds_optimum(inst: Instance) -> None:
    optimum = solve(inst, "brute-force", bound=None).objective
    value, stats = spacing_bound_search(inst, time_limit=10)
    assert stats["lp"] <= value <= optimum + 1e-9


def test_improves_on_the_lp_of_a_mixed_backlog() -> None:
    # the LP's fractional completions happen in every round; integer ones cannot, so the
    # waste term lifts the bound strictly above the LP's certificate
    inst = mixed_backlog(60, seed=1)
    value, stats = spacing_bound_search(inst, time_limit=25)
    assert stats["lp_status"] == "optimal"
    assert value > stats["lp"] + 1
    assert value <= min(solve(inst, rule, bound=None).objective for rule in ("svf", "sof"))


def test_best_uses_it_for_small_instances_only() -> None:
    in_best = BOUNDS["completion-spacing"][1]
    assert callable(in_best)
    assert in_best(mixed_backlog(SPACING_MAX_N, seed=0))
    assert not in_best(mixed_backlog(SPACING_MAX_N + 1, seed=0))
    bound = lower_bound(Instance.from_arrays(4, [0, 0], [3, 3]), "best", time_limit=5)
    assert "completion-spacing" in bound.stats["values"]
    assert bound.value <= 8


def test_bad_step_is_rejected() -> None:
    inst = Instance.from_arrays(10, [1], [2])
    with pytest.raises(ValueError, match="step"):
        spacing_value(inst, uniform_blocks(4, 2), np.zeros(2), 0.0, step=0)


def test_time_limit_is_kept() -> None:
    inst = mixed_backlog(150, seed=1)
    began = time.perf_counter()
    value, stats = spacing_bound_search(inst, time_limit=2.0)
    # 2 s, plus one LP solve or pricing in flight; no evaluation starts that cannot end
    assert time.perf_counter() - began < 6.0
    assert value >= stats["lp"] >= inst.output.sum()
