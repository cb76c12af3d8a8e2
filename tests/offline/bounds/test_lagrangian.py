"""Large-n Lagrangian bound: valid on small instances, tighter than volume on a backlog."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from schedlab.budget import Budget
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds import BOUNDS, LARGE_N, SPACING_MAX_N, lower_bound
from schedlab.offline.bounds.lagrangian import fluid_prices, lagrangian_bound_search
from schedlab.offline.bounds.time_indexed import uniform_blocks
from schedlab.offline.bounds.volume import volume_bound
from schedlab.offline.instance import Instance
from schedlab.offline.solve import solve
from tests.strategies import instances


def test_fluid_prices_count_waiting_requests() -> None:
    # M = 10, volumes 5 and 5: fluid completions max(ceil(5/10), 2) = 2 and 2. In the
    # block [0, 2) both wait (2/10 each round), in [2, 4) none does.
    inst = Instance.from_arrays(10, [1, 1], [2, 2])
    np.testing.assert_allclose(fluid_prices(inst, uniform_blocks(4, 2)), [0.2, 0.0])


@settings(max_examples=25, deadline=None)
@given(instances(max_n=5, max_memory=12, max_output=6, max_arrival=3))
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
    assert lower_bound(mixed_backlog(10, seed=0), time_limit=5).stats["values"].keys() == {
        "trivial",
        "volume",
        "tall-chain",
        "mean-busy-time",
        "fluid-spacing",
        "completion-spacing",
    }
    assert BOUNDS["lagrangian"].in_best(mixed_backlog(LARGE_N, seed=0))
