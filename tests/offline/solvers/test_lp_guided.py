"""LP-guided solvers: order by LP mean starts, LP-guided repair; verified schedules."""

from __future__ import annotations

import numpy as np
import pytest

from schedlab import read_instance, solve, verify
from schedlab.budget import Budget
from schedlab.errors import SchedlabError
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds.time_indexed import LPRelaxation
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.solvers.local_search import best_start_order
from schedlab.offline.solvers.lp_guided import (
    DEFAULT_IDLE,
    DEFAULT_MOVES,
    RELEASE_MOVES,
    lp_order,
    lp_search,
    lp_swap_repair,
)
from tests.conftest import INSTANCES

TINY = sorted(INSTANCES.glob("tiny-*.json"))


def test_lp_order_sorts_by_mean_start_then_output() -> None:
    inst = Instance.from_arrays(10, [0, 0, 0, 0], [5, 2, 3, 1])
    relax = LPRelaxation(
        value=0.0, mean_start=np.array([2.0, 0.5, 2.0, 3.0]), status="optimal", runtime=0.0
    )
    # request 1 first (0.5); 0 and 2 tie at 2.0 and 2 has the shorter output; 3 last
    assert lp_order(inst, relax).tolist() == [1, 2, 0, 3]


@pytest.mark.parametrize("path", TINY, ids=lambda p: p.stem)
@pytest.mark.parametrize("solver", ["sorted-lp", "lp-swap"])
def test_tiny_instances_verified_and_bound_valid(path, solver: str) -> None:
    inst = read_instance(path)
    result = solve(inst, solver, time_limit=5, bound=None)
    assert verify(inst, result.starts) == []
    optimum = inst.meta["optimum"]
    assert result.objective >= optimum
    assert result.lower_bound is not None and result.lower_bound <= optimum + 1e-6


def test_repair_moves_late_request_earlier() -> None:
    # M = 4: the long request (s=0, o=3) and the short one (s=3, o=1) cannot overlap.
    # Order [long, short] costs 3 + 4 = 7; the LP says the short starts first
    # (mean starts 1.0 vs 0.0), so the repair inserts it earlier: 1 + 4 = 5.
    inst = Instance.from_arrays(4, [0, 3], [3, 1])
    order, stats = lp_swap_repair(inst, np.array([0, 1]), np.array([1.0, 0.0]), budget=Budget(5))
    assert order.tolist() == [1, 0]
    assert int((list_schedule(inst, order) + inst.output).sum()) == 5
    assert stats["accepted"] == 1


def test_repair_with_releases_uses_full_decoding() -> None:
    inst = Instance.from_arrays(4, [0, 3, 0], [3, 1, 1], [0, 0, 1])
    order, _ = lp_swap_repair(
        inst, np.array([0, 1, 2]), np.array([1.0, 0.0, 1.0]), budget=Budget(5)
    )
    assert verify(inst, list_schedule(inst, order)) == []
    assert int((list_schedule(inst, order) + inst.output - inst.arrival).sum()) <= int(
        (list_schedule(inst, [0, 1, 2]) + inst.output - inst.arrival).sum()
    )


def test_unknown_option() -> None:
    inst = Instance.from_arrays(4, [0], [3])
    with pytest.raises(TypeError, match="unknown option"):
        solve(inst, "sorted-lp", colour=1)


@pytest.mark.parametrize("path", TINY, ids=lambda p: p.stem)
def test_lp_search_tiny_instances(path) -> None:
    inst = read_instance(path)
    result = solve(inst, "lp-search", work=200, bound=None)
    assert verify(inst, result.starts) == []
    optimum = inst.meta["optimum"]
    assert result.objective >= optimum
    assert result.lower_bound is not None and result.lower_bound <= optimum + 1e-6


@pytest.mark.parametrize("screen", [None, 2])
def test_lp_search_is_seeded_and_never_worse_than_its_repair(screen: int | None) -> None:
    inst = mixed_backlog(40, seed=5)
    runs = [
        solve(inst, "lp-search", seed=11, work=400, screen=screen, bound=None) for _ in range(2)
    ]
    assert runs[0].starts.tolist() == runs[1].starts.tolist()  # no time limit: same seed, same run
    result = runs[0]
    assert verify(inst, result.starts) == []
    stats = result.stats
    assert stats["search"]["moves"] == 400
    # the search returns the best order it saw (starting from the repaired one), and
    # the answer is the best of its decodes (strict, left-shifted strict, backfilling)
    assert result.objective <= stats["search"]["objective_strict"] <= stats["repaired_objective"]
    assert result.objective <= stats["objectives"]["strict+left-shift"]


def test_lp_search_ends_its_search_on_idle_moves_by_default() -> None:
    inst = mixed_backlog(40, seed=5)
    result = solve(inst, "lp-search", bound=None)
    search = result.stats["search"]
    assert search["moves"] == search["improved"] + DEFAULT_IDLE < DEFAULT_MOVES
    assert search["stopped_by"] is None and result.stats["stopped_by"] is None
    assert verify(inst, result.starts) == []


def test_lp_search_caps_its_python_search_with_releases_at_local_searchs_budget() -> None:
    # with release times every move is a full decode in Python: the default cap is smaller
    inst = Instance.from_arrays(12, [0, 3, 5, 2, 1], [3, 1, 4, 2, 5], [0, 0, 2, 3, 3])
    result = solve(inst, "lp-search", idle=None, bound=None)
    assert result.stats["search"]["moves"] == RELEASE_MOVES < DEFAULT_MOVES
    assert result.stats["search"]["stopped_by"] == "work"
    assert verify(inst, result.starts) == []


@pytest.mark.parametrize("work", [None, 1.5, True, "AUTO"])
def test_lp_search_called_directly_refuses_a_move_count_that_is_no_integer(work) -> None:
    inst = Instance.from_arrays(4, [0, 1], [3, 1])
    with pytest.raises(SchedlabError, match=r"^lp-search: work must be an integer or 'auto'"):
        lp_search(inst, work=work)


def test_lp_search_with_releases_and_a_time_limit() -> None:
    inst = Instance.from_arrays(12, [0, 3, 5, 2, 1], [3, 1, 4, 2, 5], [0, 0, 2, 3, 3])
    result = solve(inst, "lp-search", time_limit=2, work=50, bound=None)
    assert verify(inst, result.starts) == []
    with pytest.raises(TypeError, match="unknown option"):
        solve(inst, "lp-search", colour=1)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"width": 0}, "lp-search: width must be >= 1, got 0"),
        ({"work": -1}, "lp-search: work must be >= 0, got -1"),
        ({"history": 0}, "lp-search: history must be >= 1, got 0"),
        ({"screen": 0}, "lp-search: screen must be >= 1 or None, got 0"),
        ({"idle": 0}, "lp-search: idle must be >= 1 or None, got 0"),
        ({"work": "many"}, "lp-search: work must be an integer or 'auto', got 'many'"),
    ],
)
def test_lp_search_refuses_bad_search_options_by_their_names(options, message: str) -> None:
    inst = Instance.from_arrays(4, [0, 1], [3, 1])
    with pytest.raises(SchedlabError, match=f"^{message}$"):
        solve(inst, "lp-search", bound=None, **options)


def test_lp_search_stops_at_its_time_limit() -> None:
    # a move budget no machine finishes in 2 s: the time limit must end the search
    inst = mixed_backlog(60, seed=1)
    result = solve(inst, "lp-search", time_limit=2, work=10**7, idle=None, bound=None)
    assert verify(inst, result.starts) == []
    assert result.stats["search"]["moves"] < 10**7
    assert result.stats["search"]["stopped_by"] == "time_limit"
    assert result.runtime < 2 + 3  # the final decodes and left shift run after the search


@pytest.mark.parametrize("solver", ["lp-swap", "lp-search"])
def test_a_relaxation_cut_short_costs_no_more_than_the_best_rule(solver: str) -> None:
    # at 1 s the LP of 1,500 requests stops after a round or two: its order is poor, and
    # the solver starts from the best rule's order instead
    inst = mixed_backlog(1500, seed=4)
    result = solve(inst, solver, time_limit=1.0, bound=None)
    assert verify(inst, result.starts) == []
    assert result.stats["lp_stopped_by"] == "time_limit"
    assert result.stats["start"] != "lp"
    order, _ = best_start_order(inst)
    assert result.objective <= int((list_schedule(inst, order) + inst.output).sum())


@pytest.mark.parametrize("width", [0, -7])
@pytest.mark.parametrize("solver", ["lp-swap", "lp-search"])
def test_a_repair_width_below_one_is_refused(solver: str, width: int) -> None:
    # it would leave the repair out silently (21,919 instead of 21,848 on mixed-n50)
    inst = Instance.from_arrays(4, [0, 1], [3, 1])
    with pytest.raises(SchedlabError, match=f"^{solver}: repair_width must be >= 1, got {width}$"):
        solve(inst, solver, bound=None, repair_width=width)
