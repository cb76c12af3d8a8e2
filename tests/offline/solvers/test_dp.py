"""Dynamic programme over rounds: hand-solved cases, its rules and bounds, limits, errors."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from hypothesis import given, settings

from schedlab.errors import InstanceError, SchedlabError
from schedlab.offline.backlogs import jaillet_instance
from schedlab.offline.instance import Instance
from schedlab.offline.instance_io import read_instance
from schedlab.offline.result import Status
from schedlab.offline.schedule import Schedule
from schedlab.offline.solve import solve
from schedlab.offline.solvers import dp
from schedlab.offline.solvers.dp import Running, _Model, _SubsetOptima
from schedlab.offline.verify import verify
from schedlab.testing import instances
from tests.conftest import INSTANCES


def test_two_tall_requests_are_staggered() -> None:
    # M = 4, s = 0, o = 3 twice: they cannot start within one round of each other (the
    # pair would hold 5 tokens), so the best is starts 0 and 2: objective 3 + 5 = 8.
    inst = Instance.from_arrays(4, [0, 0], [3, 3])
    result = solve(inst, "dp", bound=None)
    assert verify(inst, result.starts) == []
    assert result.status == Status.OPTIMAL
    assert result.objective == 8
    assert sorted(result.starts.tolist()) == [0, 2]


def test_release_forces_a_wait() -> None:
    # request 1 is released in round 3; request 0 runs alone in rounds 0..1
    inst = Instance.from_arrays(5, [1, 1], [2, 2], [0, 3])
    result = solve(inst, "dp", bound=None)
    assert result.starts.tolist() == [0, 3]
    assert result.objective == 4


def test_too_many_requests_is_an_instance_error() -> None:
    inst = jaillet_instance(0, n=13)
    with pytest.raises(InstanceError, match="dp: n = 13 requests exceeds max_requests = 12"):
        solve(inst, "dp")


def test_time_limit_returns_a_valid_bound() -> None:
    # The instance of test_left_shift_obligation_met_in_the_last_round_of_its_window:
    # optimum 14, best rule 15. A 1 ns limit has passed before the first state is
    # expanded (the warm start alone takes longer), so the search stops there on any
    # machine: it cannot have reached the goal, and since OPT < 15 the root's estimate is
    # below the warm start, so the open list is not empty either. It returns the warm
    # start with the least estimate on the open list, which must not exceed the optimum.
    inst = Instance.from_arrays(7, [0, 2, 2], [3, 4, 3])
    optimum = solve(inst, "brute-force", bound=None).objective
    assert optimum == 14
    result = solve(inst, "dp", time_limit=1e-9, bound=None)
    assert verify(inst, result.starts) == []
    assert result.status == Status.TIME_LIMIT
    assert result.stats["expanded"] == 0
    assert result.objective == result.stats["warm_objective"] == 15
    assert result.lower_bound is not None and result.lower_bound <= optimum


def test_tall_requests_end_apart_in_the_estimate() -> None:
    # M = 10, s = 0, o = 6 twice: peaks 6 + 6 > 10, so the second completion is at least
    # min(o, 6 + 6 - 10) = 2 rounds after the first; both end no earlier than round 6.
    # Estimate 6 + 8 = 14, which is the optimum (starts 0 and 2: at round 5 the first
    # holds 6 and the second 6 - p <= 4 tokens, so p >= 2).
    inst = Instance.from_arrays(10, [0, 0], [6, 6])
    assert _Model(inst).estimate(0, 0b11, ()) == 14
    result = solve(inst, "dp", bound=None)
    assert result.status == Status.OPTIMAL
    assert result.objective == 14


def test_earliest_fit_waits_for_running_load() -> None:
    # M = 5: request 0 (s = 0, o = 4) has run one round, so it holds 2, 3, 4 tokens in the
    # next three rounds. Request 1 (s = 1, o = 2) holds 2 then 3 tokens. Offset 0 clashes
    # in its second round (3 + 3 > 5), offset 1 too (4 + 3 > 5), offset 2 in its first
    # (4 + 2 > 5); at offset 3 request 0 has finished.
    inst = Instance.from_arrays(5, [0, 1], [4, 2])
    assert _Model(inst).earliest_fit(1, 0, ((0, 1),)) == 3


@settings(max_examples=25, deadline=None)
@given(instances(max_n=4, max_kv_tokens=16, max_output=9, max_arrival=3))
def test_estimate_is_admissible_along_an_optimal_schedule(inst: Instance) -> None:
    # States along the brute-force optimum: the estimate never exceeds the cost left.
    oracle = solve(inst, "brute-force", bound=None)
    starts = oracle.starts.tolist()
    ends = [p + o for p, o in zip(starts, inst.output.tolist(), strict=True)]
    model = _Model(inst)
    for t in range(max(ends) + 1):
        unstarted = sum(1 << i for i, p in enumerate(starts) if p >= t)
        running = tuple((i, t - p) for i, p in enumerate(starts) if p < t < ends[i])
        left = sum(max(0, c - max(t, a)) for c, a in zip(ends, inst.arrival.tolist(), strict=True))
        assert model.estimate(t, unstarted, running) <= left
    assert solve(inst, "dp", bound=None).objective == oracle.objective


@pytest.mark.parametrize("seed", range(3))
def test_jaillet_instances_agree_with_cpsat(seed: int) -> None:
    inst = jaillet_instance(seed, n=6)
    dp = solve(inst, "dp", bound=None)
    cpsat = solve(inst, "cpsat", bound=None, time_limit=30)
    assert verify(inst, dp.starts) == []
    assert dp.status == cpsat.status == Status.OPTIMAL
    assert dp.objective == cpsat.objective


def _states_along(inst: Instance, starts: list[int]) -> Iterator[tuple[int, int, Running, int]]:
    """``(t, U, R, cost left)`` at every round of the schedule ``starts``."""
    ends = [p + o for p, o in zip(starts, inst.output.tolist(), strict=True)]
    arrivals = inst.arrival.tolist()
    for t in range(max(ends) + 1):
        unstarted = sum(1 << i for i, p in enumerate(starts) if p >= t)
        running = tuple((i, t - p) for i, p in enumerate(starts) if p < t < ends[i])
        left = sum(max(0, c - max(t, a)) for c, a in zip(ends, arrivals, strict=True))
        yield t, unstarted, running, left


@settings(max_examples=20, deadline=None)
@given(instances(max_n=4, max_kv_tokens=16, max_output=9, max_arrival=3))
def test_subset_optima_are_the_backlog_optima(inst: Instance) -> None:
    # W(X) = the brute-force optimum of the requests X alone with releases dropped
    subsets = _SubsetOptima(inst, math.inf, budget=math.inf)
    for mask in range(1, 1 << inst.n):
        keep = [i for i in range(inst.n) if mask >> i & 1]
        alone = Instance.from_arrays(inst.kv_tokens, inst.prompt[keep], inst.output[keep])
        assert subsets.value(mask) == solve(alone, "brute-force", bound=None).objective


def test_subset_optimum_of_three_tall_requests() -> None:
    # M = 4, s = 0, o = 3 three times: two of them cannot start within one round of each
    # other (test_two_tall_requests_are_staggered), so the best is starts 0, 2, 4:
    # W = 3 + 5 + 7 = 15; any two: 3 + 5 = 8.
    subsets = _SubsetOptima(Instance.from_arrays(4, [0, 0, 0], [3, 3, 3]), math.inf)
    assert subsets.value(0b111) == 15
    assert subsets.value(0b101) == 8
    assert subsets.value(0b010) == 3


@settings(max_examples=25, deadline=None)
@given(instances(max_n=4, max_kv_tokens=16, max_output=9, max_arrival=3))
def test_refined_estimate_is_admissible_along_an_optimal_schedule(inst: Instance) -> None:
    # The subset-optimum bounds never exceed the cost left at a state of a brute-force
    # optimum (budget 1: most subset optima are then lower bounds, which must stay valid).
    oracle = solve(inst, "brute-force", bound=None)
    for budget in (math.inf, 1):
        model = _Model(inst, _SubsetOptima(inst, math.inf, budget=budget))
        for t, unstarted, running, left in _states_along(inst, oracle.starts.tolist()):
            base = model.estimate(t, unstarted, running)
            assert base <= model.refined(t, unstarted, running, base) <= left


def test_subset_optima_raise_the_estimate() -> None:
    # Along the optimum of a Jaillet-parameter instance the refined estimate stays
    # admissible and is strictly above the base estimate at some states.
    inst = jaillet_instance(2, n=6)
    result = solve(inst, "dp", bound=None)
    assert verify(inst, result.starts) == []
    model = _Model(inst, _SubsetOptima(inst, math.inf))
    raised = 0
    for t, unstarted, running, left in _states_along(inst, result.starts.tolist()):
        base = model.estimate(t, unstarted, running)
        refined = model.refined(t, unstarted, running, base)
        assert base <= refined <= left
        raised += refined > base
    assert raised > 0


@settings(max_examples=40, deadline=None)
@given(instances(max_n=4, max_kv_tokens=12, max_output=6, max_arrival=3))
def test_no_request_of_an_optimum_can_start_one_round_earlier(inst: Instance) -> None:
    # The left-shift lemma checked on brute-force optima, independently of the DP: a
    # request started after its release either did not fit in the round before or meets
    # a full round (load exactly M) in rounds p .. C - 2.
    oracle = solve(inst, "brute-force", bound=None)
    assert verify(inst, oracle.starts) == []
    load = Schedule(inst, oracle.starts).memory_profile.tolist()
    for i, p in enumerate(oracle.starts.tolist()):
        if p == int(inst.arrival[i]):
            continue
        end = p + int(inst.output[i])
        fitted = load[p - 1] + int(inst.prompt[i]) + 1 <= inst.kv_tokens
        assert not fitted or inst.kv_tokens in load[p : end - 1]


def test_one_round_request_that_fitted_is_not_delayed() -> None:
    # Request 0 (s = 1, o = 1) fitted in round 0 (spare 2 >= s + 1): starting it in round 1
    # is never optimal, so round 1 offers only "start nothing"; with spare 0 it may start.
    inst = Instance.from_arrays(5, [1, 0], [1, 4])
    model = _Model(inst)
    running = ((1, 1),)
    assert [chosen for chosen, _ in model.choices(1, 0b01, running, 2)] == [[]]
    assert [chosen for chosen, _ in model.choices(1, 0b01, running, 0)] == [[], [0]]


def test_left_shift_rule_keeps_a_delay_that_meets_a_full_round() -> None:
    # M = 4; request 0 (s = 0, o = 3) holds 1, 2, 3 in rounds 0..2. Request 1 (s = 0,
    # o = 4) alone fits in round 1 (2 + 1 <= 4) but started there would hold 2 beside 3 in
    # round 2; started in round 0 it would hold 3 there. So it starts in round 2, where
    # the load is exactly 4 = M (a full round in its window, as the rule requires):
    # objective 3 + 6 = 9.
    inst = Instance.from_arrays(4, [0, 0], [3, 4])
    result = solve(inst, "dp", bound=None)
    assert verify(inst, result.starts) == []
    assert result.status == Status.OPTIMAL
    assert result.starts.tolist() == [0, 2]
    assert result.objective == 9


def test_left_shift_obligation_met_in_the_last_round_of_its_window() -> None:
    # M = 7; request 2 (s = 2, o = 3) holds 3, 4, 5; request 0 (s = 0, o = 3) holds 1, 2, 3;
    # request 1 (s = 2, o = 4) holds 3, 4, 5, 6. Starts 1, 3, 0 give loads 3, 5, 7, 6, 4, 5,
    # 6 and completions 4 + 7 + 3 = 14, the brute-force optimum. Request 0 fitted in round
    # 0 (3 + 1 <= 7) yet starts in round 1: allowed only because round 2, the last round
    # C - 2 of its window, is full; a window one round shorter would lose the optimum.
    inst = Instance.from_arrays(7, [0, 2, 2], [3, 4, 3])
    result = solve(inst, "dp", bound=None)
    assert verify(inst, result.starts) == []
    assert result.objective == solve(inst, "brute-force", bound=None).objective == 14


def test_state_key_fixes_the_moves_once_every_request_is_released() -> None:
    # M = 10, x = (s 3, o 2, a 0), y = (s 1, o 1, a 1); nothing started, round t - 1 left
    # empty (10 free, so spare = the largest s_i + 1 over the requests released by t - 1,
    # i.e. 4 from t = 1 on). At t = 1, y was not released in round 0, so it may start now:
    # {}, {x}, {y}, {x, y}. From t = 2 on, y (one round) fitted in round t - 1
    # (s + 1 = 2 <= 4), so it may not start late: {}, {x}. The key t' = min(t, a_max + 1)
    # must tell t = 1 from t = 2 (min(t, a_max) gave both t' = 1) and may join only rounds
    # with the same moves.
    inst = Instance.from_arrays(10, [3, 1], [2, 1], [0, 1])
    model = _Model(inst)
    moves: dict[tuple[int, int, Running, int], list[list[int]]] = {}
    for t in range(1, 6):
        spare = model.spare(t - 1, 0b11, 10)
        chosen = [c for c, _ in model.choices(t, 0b11, (), spare)]
        assert moves.setdefault((model.clock(t), 0b11, (), spare), chosen) == chosen
    assert moves == {(1, 0b11, (), 4): [[], [0], [1], [0, 1]], (2, 0b11, (), 4): [[], [0]]}
    # optimum: x at 0 (4, 5 tokens), y at 1 (2 tokens; 5 + 2 <= 10): 2 + 1 = 3
    result = solve(inst, "dp", bound=None)
    assert verify(inst, result.starts) == []
    assert result.status == Status.OPTIMAL
    assert result.objective == solve(inst, "brute-force", bound=None).objective == 3


def test_subset_budget_is_read_when_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # Backlog M = 7, s = (0, 2, 2), o = (3, 4, 3): W = 14 (the brute-force optimum of
    # test_time_limit_returns_a_valid_bound). With the module's budget set to 0 the search
    # stops at its root and leaves a lower bound below 14: the constant is honoured.
    inst = Instance.from_arrays(7, [0, 2, 2], [3, 4, 3])
    assert _SubsetOptima(inst, math.inf).value(0b111) == 14
    monkeypatch.setattr(dp, "SUBSET_BUDGET", 0)
    assert _SubsetOptima(inst, math.inf).value(0b111) < 14


@settings(max_examples=100, deadline=None)
@given(instances(max_n=5, max_kv_tokens=16, max_output=8, max_arrival=1))
def test_dp_matches_brute_force_where_rounds_fill_up(inst: Instance) -> None:
    # Five requests with outputs up to 8 in small memories: full rounds, and so the
    # left-shift obligations, are common; the rules must never cut off every optimum.
    result = solve(inst, "dp", bound=None)
    assert verify(inst, result.starts) == []
    assert result.status == Status.OPTIMAL
    assert result.objective == solve(inst, "brute-force", bound=None).objective


def test_an_instance_too_wide_for_dp_is_refused_before_memory_runs_out():
    # 50 requests ready at once: their fitting subsets would fill the machine's memory
    inst = read_instance(INSTANCES / "mixed-n50.json")
    with pytest.raises(SchedlabError, match="more than 20,000 start sets"):
        solve(inst, "dp", max_requests=60, bound=None)


def test_an_instance_of_too_many_rounds_is_refused_before_the_search() -> None:
    # four requests of 10^7 rounds that cannot overlap: the search would take gigabytes;
    # the 1 s cap only keeps an unguarded solver from running away here
    inst = Instance.from_arrays(10**7 + 100, [10, 20, 30, 40], [10**7 - i for i in range(4)])
    with pytest.raises(InstanceError, match=r"^dp: .* spans 39,999,994 rounds .* = 20,480; "):
        solve(inst, "dp", time_limit=1, bound=None)


def test_max_rounds_counts_the_latest_arrival_and_the_outputs() -> None:
    inst = Instance.from_arrays(10, [0, 0], [3, 3], [0, 5])  # spans 5 + 3 + 3 rounds
    with pytest.raises(InstanceError, match=r"spans 11 rounds .* above max_rounds = 10; "):
        solve(inst, "dp", max_rounds=10, bound=None)
    assert solve(inst, "dp", max_rounds=11, bound=None).status is Status.OPTIMAL


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_requests", 0),
        ("max_requests", -1),
        ("max_rounds", 0),
        ("work", 0),
        ("work", -1),
    ],
)
def test_a_count_option_below_one_is_refused_by_its_name(key: str, value: int) -> None:
    inst = Instance.from_arrays(7, [0, 2, 2], [3, 4, 3])
    with pytest.raises(SchedlabError, match=f"^dp: {key} must be >= 1, got {value}$"):
        solve(inst, "dp", bound=None, **{key: value})


def test_a_binding_work_budget_is_its_own_status(capsys):
    # dp at a tiny expansion budget stops by its work, not by a clock: WORK_LIMIT, with
    # the budget named, and the command line says which option raises it
    from schedlab.cli import main as cli_main

    instance = read_instance(INSTANCES / "tiny-1.json")
    result = solve(instance, "dp", bound=None, work=1)
    assert result.stats["stopped_by"] == "work"
    assert result.status is Status.WORK_LIMIT
    assert result.stats["work_budget"] == {"work": 1}
    assert verify(instance, result.starts) == []
    path = str(INSTANCES / "tiny-1.json")
    assert cli_main(["solve", path, "--solver", "dp", "--option", "work=1"]) == 0
    out = capsys.readouterr().out
    assert "WORK_LIMIT" in out and "raise it with --option work=..." in out
