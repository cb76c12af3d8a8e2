"""ALNS: exact evaluations, exact window repair, work budget, never worse than its start."""

from __future__ import annotations

from itertools import permutations
from math import factorial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab import read_instance, solve, verify
from schedlab.budget import Budget
from schedlab.errors import SchedlabError
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.schedule import total_latency
from schedlab.offline.solvers.alns import (
    DEFAULT_EVALUATIONS,
    OPERATORS,
    RELEASE_EVALUATIONS,
    ALNSSettings,
    improve_alns,
)
from schedlab.offline.solvers.local_search import best_start_order
from schedlab.testing import instances
from tests.conftest import INSTANCES


def strict_value(inst: Instance, order: np.ndarray | list[int]) -> int:
    return total_latency(inst, list_schedule(inst, order))


@settings(max_examples=80, deadline=None)
@given(
    instances(max_n=10, max_kv_tokens=30),
    st.integers(0, 2**16),
    st.sampled_from([*((name,) for name in OPERATORS), OPERATORS]),
)
def test_the_best_order_is_what_its_strict_decode_says_and_no_worse_than_the_start(
    inst: Instance, seed: int, operators: tuple[str, ...]
) -> None:
    # with releases the search decodes in full, on backlogs incrementally: either way the
    # objective it reports is the full strict decode's, and the start is never lost
    start = np.arange(inst.n)
    config = ALNSSettings(work=60, width=4, remove=2, operators=operators)
    order, stats = improve_alns(inst, start, config, seed=seed)
    assert sorted(order.tolist()) == list(range(inst.n))
    assert stats["objective_strict"] == strict_value(inst, order)
    assert stats["objective_strict"] <= strict_value(inst, start)
    assert stats["evaluations"] <= 60
    assert verify(inst, list_schedule(inst, order)) == []


@settings(max_examples=40, deadline=None)
@given(instances(max_n=5, max_kv_tokens=25, max_arrival=0), st.integers(0, 99))
def test_one_permute_window_over_the_whole_order_finds_the_best_order(
    inst: Instance, seed: int
) -> None:
    # permute re-sequences k requests exactly: with k = n one iteration sees every order
    k = inst.n
    config = ALNSSettings(work=factorial(k) - 1, permute=max(k, 2), operators=("permute",))
    order, stats = improve_alns(inst, np.arange(k), config, seed=seed)
    best = min(strict_value(inst, list(p)) for p in permutations(range(k)))
    assert stats["objective_strict"] == best == strict_value(inst, order)
    assert stats["iterations"] == (1 if k > 1 else 0)


def test_same_seed_same_search_and_the_work_budget_is_kept() -> None:
    inst = mixed_backlog(60, kv_tokens=6000, seed=3)
    order, _ = best_start_order(inst)
    config = ALNSSettings(work=1500)
    a, stats_a = improve_alns(inst, order, config, seed=7)
    b, stats_b = improve_alns(inst, order, config, seed=7)
    assert a.tolist() == b.tolist()
    assert {k: v for k, v in stats_a.items() if k != "evaluations_per_s"} == {
        k: v for k, v in stats_b.items() if k != "evaluations_per_s"
    }
    assert stats_a["stopped_by"] == "work" and stats_a["evaluations"] <= 1500
    assert stats_a["objective_strict"] < strict_value(inst, order)  # it does improve
    _, other = improve_alns(inst, order, config, seed=8)
    assert (
        other["uses"] != stats_a["uses"]
        or other["objective_strict"] != stats_a["objective_strict"]
    )


def test_a_longer_budget_is_never_worse_on_a_mixed_backlog() -> None:
    inst = mixed_backlog(80, kv_tokens=8000, seed=1)
    order, _ = best_start_order(inst)
    values = [
        improve_alns(inst, order, ALNSSettings(work=e), seed=0)[1]["objective_strict"]
        for e in (0, 400, 4000)
    ]
    assert values[0] == strict_value(inst, order)
    assert values[2] <= values[1] <= values[0]
    assert values[2] < values[0]


def test_the_solver_is_verified_never_worse_than_mc_sf_backfill_and_records_its_stop() -> None:
    inst = mixed_backlog(50, kv_tokens=5000, seed=2)
    result = solve(inst, "alns", work=800)
    assert verify(inst, result.starts) == []
    rule = solve(inst, "mc-sf-backfill")
    assert result.objective <= rule.objective
    assert result.stats["stopped_by"] == "work"
    capped = solve(inst, "alns", work=None, idle=None, time_limit=0.5)
    assert verify(inst, capped.starts) == []
    assert capped.stats["stopped_by"] == "time_limit"
    # the default end: idle evaluations after the best last fell, before the budget
    ended = solve(inst, "alns", idle=300)
    assert verify(inst, ended.starts) == []
    assert ended.stats["stopped_by"] is None
    assert ended.stats["best_at"] + 300 <= ended.stats["evaluations"]
    # at most one iteration more, the longest: reinsert, 14 + 15 + 16 evaluations
    assert ended.stats["evaluations"] < ended.stats["best_at"] + 300 + 45
    budgeted = solve(inst, "alns", work=ended.stats["evaluations"], idle=None)
    assert budgeted.objective <= ended.objective


def test_the_default_temperatures_scale_with_n() -> None:
    assert ALNSSettings().temperatures(200) == (0.1 / 200, 0.1 / 200 / 100)
    assert ALNSSettings(start_temperature=1e-3).temperatures(10) == (1e-3, 1e-5)
    assert ALNSSettings(end_temperature=1e-4).temperatures(1000) == (1e-4, 1e-4)
    # an end temperature above the default start raises the start to it (constant)
    assert ALNSSettings(end_temperature=1e-3).temperatures(1000) == (1e-3, 1e-3)
    assert ALNSSettings(end_temperature=1e-5).temperatures(20_000) == (1e-5, 1e-5)
    with pytest.raises(SchedlabError, match="temperatures must satisfy"):
        ALNSSettings(start_temperature=1e-4, end_temperature=1e-3)


def test_the_default_work_budget_is_smaller_with_release_times() -> None:
    # with release times every evaluation is a full decode in Python
    released = Instance.from_arrays(12, [0, 3, 5, 2, 1], [3, 1, 4, 2, 5], [0, 0, 2, 3, 3])
    backlog = Instance.from_arrays(12, [0, 3, 5, 2, 1], [3, 1, 4, 2, 5])
    assert ALNSSettings().work_budget(released) == RELEASE_EVALUATIONS < DEFAULT_EVALUATIONS
    assert ALNSSettings().work_budget(backlog) == DEFAULT_EVALUATIONS
    assert ALNSSettings(work=7).work_budget(released) == 7
    assert ALNSSettings(work=None).work_budget(backlog) is None
    result = solve(released, "alns", idle=None, bound=None)
    assert result.stats["stopped_by"] == "work"
    assert RELEASE_EVALUATIONS - 45 < result.stats["evaluations"] <= RELEASE_EVALUATIONS
    assert verify(released, result.starts) == []
    with pytest.raises(SchedlabError, match=r"^alns: work must be an integer, 'auto'"):
        ALNSSettings(work="many")


def test_a_bad_idle_is_refused_in_one_line() -> None:
    for idle, message in ((2.5, "idle must be an integer"), ("5", "idle must be an integer")):
        with pytest.raises(SchedlabError, match=f"^alns: {message}"):
            ALNSSettings(idle=idle)  # type: ignore[arg-type]
    assert ALNSSettings(idle=np.int64(7)).idle == 7
    one = solve(Instance.from_arrays(10, [1], [2]), "alns", bound=None)
    assert one.stats["best_at"] == 0 and one.stats["evaluations"] == 0


def test_no_budget_at_all_is_refused() -> None:
    inst = mixed_backlog(10, kv_tokens=3000, seed=0)
    with pytest.raises(SchedlabError, match="set time_limit or work"):
        improve_alns(inst, np.arange(10), ALNSSettings(work=None), budget=Budget())


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("work", -1, "work must be >= 0"),
        ("width", 0, "width must be >= 1"),
        ("block", 1, "block must be >= 2"),
        ("permute", 8, "permute must be in 2..7"),
        ("remove", 17, "remove must be in 1..width"),
        ("end_temperature", 0.0, "end_temperature must be a finite number > 0"),
        ("start_temperature", -1.0, "start_temperature must be a finite number > 0"),
        ("start_temperature", float("inf"), "start_temperature must be a finite number"),
        ("end_temperature", "0.1", "end_temperature must be a finite number"),
        ("work", 1.5, "work must be an integer, 'auto' or None"),
        ("work", True, "work must be an integer, 'auto' or None"),
        ("work", float("nan"), "work must be an integer, 'auto' or None"),
        ("idle", True, "idle must be an integer, or None"),
        ("idle", 0, "idle must be >= 1 or None"),
        ("reaction", 1.5, "reaction must be in"),
        ("operators", ("move", "move"), "operators must be distinct"),
        ("operators", ("split",), "operators must be distinct"),
    ],
)
def test_bad_settings_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(SchedlabError, match=message):
        ALNSSettings(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("evaluations", [10, 50, 200])
def test_a_short_search_never_returns_worse_than_no_search(evaluations: int) -> None:
    # on the shipped n = 200 the start's left-shifted schedule (260,653) beats the strict
    # decodes of the orders a short search finds: it must stay a candidate
    inst = read_instance(INSTANCES / "mixed-n200.json")
    unsearched = solve(inst, "alns", work=0, bound=None)
    searched = solve(inst, "alns", work=evaluations, bound=None)
    assert verify(inst, searched.starts) == []
    assert searched.objective <= unsearched.objective
