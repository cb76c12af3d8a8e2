"""Large-n Lagrangian bound: valid on small instances, tighter than volume on a backlog."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings

from schedlab.budget import Budget, Expired
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds import (
    BOUNDS,
    LAGRANGIAN_MAX_N,
    LARGE_N,
    SPACING_MAX_N,
    lower_bound,
)
from schedlab.offline.bounds.lagrangian import SCALES, fluid_prices, lagrangian_bound_search
from schedlab.offline.bounds.time_indexed import lagrangian_bound, price_starts, uniform_blocks
from schedlab.offline.bounds.volume import volume_bound, volume_completions
from schedlab.offline.instance import Instance
from schedlab.offline.priority import best_rule_schedule
from schedlab.offline.solve import solve
from schedlab.testing import instances


def test_fluid_prices_count_waiting_requests() -> None:
    # M = 10, volumes 5 and 5: fluid completions max(ceil(5/10), 2) = 2 and 2. In the
    # block [0, 2) both wait (2/10 each round), in [2, 4) none does.
    inst = Instance.from_arrays(10, [1, 1], [2, 2])
    np.testing.assert_allclose(fluid_prices(inst, uniform_blocks(4, 2)), [0.2, 0.0])


@settings(max_examples=25, deadline=None)
@given(instances(max_n=5, max_kv_tokens=12, max_output=6, max_arrival=3))
def test_never_exceeds_optimum(inst: Instance) -> None:
    optimum = solve(inst, "brute-force", bound=None).objective
    value, _ = lagrangian_bound_search(inst, budget=Budget(5), blocks=20, max_steps=20)
    assert value <= optimum + 1e-9


def test_tighter_than_volume_on_a_mixed_backlog() -> None:
    inst = mixed_backlog(150, seed=3)
    value, stats = lagrangian_bound_search(inst, budget=Budget(20), blocks=200, max_steps=15)
    assert value > 1.05 * volume_bound(inst).value
    assert stats["blocks"] <= 200


def test_best_chooses_methods_by_size() -> None:
    in_best = BOUNDS["lp"].in_best
    assert callable(in_best)
    assert not in_best(mixed_backlog(SPACING_MAX_N, seed=0))  # completion-spacing has the LP
    assert in_best(mixed_backlog(SPACING_MAX_N + 1, seed=0))
    assert not in_best(mixed_backlog(LARGE_N, seed=0))
    stats = lower_bound(mixed_backlog(10, seed=0), time_limit=5).stats
    assert stats["values"].keys() == {
        "trivial",
        "volume",
        "mean-busy-time",
        "fluid-spacing",
        "completion-spacing",
    }
    assert stats["dominated"] == ["tall-chain"]  # no request peaks above M / 2
    assert BOUNDS["lagrangian"].in_best(mixed_backlog(LARGE_N, seed=0))
    many = Instance.from_arrays(10, [1] * (LAGRANGIAN_MAX_N + 1), [2] * (LAGRANGIAN_MAX_N + 1))
    assert not BOUNDS["lagrangian"].in_best(many)


def test_pricing_checks_the_cap_between_chunks(cut_after: Callable[[int], Budget]) -> None:
    inst = mixed_backlog(30, seed=1)
    bounds = uniform_blocks(400, 20)
    with pytest.raises(Expired):
        price_starts(inst, bounds, np.ones(20), Budget(1e-9))
    price_starts(inst, bounds, np.ones(20), cut_after(1))  # 30 requests: one chunk


@pytest.mark.parametrize("finished", [0, 1, 2, 3, 7])
def test_a_pricing_cut_by_the_cap_is_dropped(
    finished: int, cut_after: Callable[[int], Budget]
) -> None:
    # the value is the best of the pricings that finished, or L(0) = sum o_i when none
    # did; never a partial minimum. The first len(SCALES) pricings are the starting
    # scales, whose best is known here; later ones are subgradient steps.
    inst = mixed_backlog(50, seed=2)
    value, stats = lagrangian_bound_search(
        inst, budget=cut_after(finished), blocks=200, max_steps=30
    )
    assert stats["priced"] == finished
    assert stats["stopped_by"] == "time_limit"
    bounds = uniform_blocks(int(stats["horizon"]), 200)
    fluid = fluid_prices(inst, bounds)
    priced = [lagrangian_bound(inst, bounds, scale * fluid)[0] for scale in SCALES[:finished]]
    best = max(priced, default=-np.inf)
    if finished <= len(SCALES):
        assert value == max(best - 1e-9 * abs(best), inst.output.sum())
    else:
        assert value >= best - 1e-9 * abs(best)
    uncut, _ = lagrangian_bound_search(inst, blocks=200, max_steps=30)
    assert value <= uncut


def test_a_passed_cap_gives_the_zero_price_bound() -> None:
    inst = mixed_backlog(60, seed=0)
    value, stats = lagrangian_bound_search(inst, budget=Budget(1e-9))
    assert value == inst.output.sum()
    assert stats["priced"] == 0
    assert stats["stopped_by"] == "time_limit"
    # nor were the rules decoded past the first: the horizon is its schedule's
    first, _ = best_rule_schedule(inst, Budget(1e-9))
    end = max(volume_completions(inst).max(), (first + inst.output).max())
    assert stats["horizon"] == end
