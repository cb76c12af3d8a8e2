"""Receding horizon: windows solved exactly, committed, rolled; schedules verified."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from schedlab import solve, verify
from schedlab.budget import Budget
from schedlab.errors import SchedlabError, UnknownNameError
from schedlab.offline.instance import Instance
from schedlab.offline.solvers.receding_horizon import receding_order
from schedlab.testing import instances


def test_window_count_and_commits() -> None:
    # 7 requests, window 5, commit 2: the first window commits 2, the 5 left fit in one
    # last window that commits all of them -> 2 windows, every request once.
    inst = Instance.from_arrays(20, [1] * 7, [1, 2, 3, 4, 5, 6, 7])
    order, stats = receding_order(
        inst,
        np.arange(7),
        window=5,
        commit=2,
        solver="brute-force",
        budget=Budget(60),
    )
    assert sorted(order.tolist()) == list(range(7))
    assert stats["windows"] == 2 and stats["windows_optimal"] == 2


def test_single_window_order_follows_optimal_sub_schedule() -> None:
    # M = 4: long (0, 3) and short (3, 1) cannot overlap; the optimum runs the short first.
    inst = Instance.from_arrays(4, [0, 3], [3, 1])
    order, _ = receding_order(
        inst,
        np.array([0, 1]),
        window=2,
        commit=1,
        solver="brute-force",
        budget=Budget(60),
    )
    assert order.tolist() == [1, 0]
    assert solve(inst, "receding-horizon", window=2, commit=1, bound=None).objective == 5


@settings(max_examples=15, deadline=None)
@given(instances(max_n=8, max_kv_tokens=20, max_arrival=3, max_output=6))
def test_schedules_verified(inst: Instance) -> None:
    result = solve(inst, "receding-horizon", time_limit=5, window=3, commit=1, bound=None)
    assert verify(inst, result.starts) == []


def test_bad_parameters() -> None:
    inst = Instance.from_arrays(4, [0, 3], [3, 1])
    with pytest.raises(SchedlabError, match="commit"):
        solve(inst, "receding-horizon", window=2, commit=3)
    with pytest.raises(UnknownNameError):
        solve(inst, "receding-horizon", window_solver="oracle")


def test_windows_of_too_many_rounds_are_refused_before_the_first() -> None:
    # four requests of 10^7 rounds that cannot overlap: dp's window would take gigabytes;
    # the 1 s cap only keeps an unguarded solver from running away here
    inst = Instance.from_arrays(10**7 + 100, [10, 20, 30, 40], [10**7 - i for i in range(4)])
    message = r"^receding-horizon: a window of the 4 longest .* above the 20,480 that dp takes"
    with pytest.raises(SchedlabError, match=message):
        solve(inst, "receding-horizon", time_limit=1, bound=None)


def test_the_window_limit_is_the_window_solvers() -> None:
    inst = Instance.from_arrays(400, [0, 0, 0], [200, 200, 200])
    with pytest.raises(SchedlabError, match=r"runs 600 rounds .* above the 512 that brute-force"):
        solve(inst, "receding-horizon", window=3, window_solver="brute-force", bound=None)
    result = solve(inst, "receding-horizon", window=2, commit=1, window_solver="brute-force")
    assert verify(inst, result.starts) == []


@pytest.mark.parametrize(
    ("window_solver", "work"), [("dp", 7), ("cpsat", 0.5), ("brute-force", 5)]
)
def test_each_window_solver_shares_one_work_budget(window_solver: str, work: float) -> None:
    # its work budget in its window solver's unit: an integer for dp and brute-force,
    # deterministic seconds for cpsat
    inst = Instance.from_arrays(12, [2, 0, 3, 1, 4, 2, 1, 0], [3, 5, 2, 4, 1, 2, 3, 4])
    result = solve(inst, "receding-horizon", window_solver=window_solver, work=work, bound=None)
    assert verify(inst, result.starts) == []
    assert result.stats["window_solver"] == window_solver and result.stats["windows"] >= 1
    if result.stats["stopped_by"] == "work":
        assert result.stats["work_budget"] == {"work": work}
