"""CP-SAT solver: pair cuts, start windows, time limit and options; window repair."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.budget import Budget
from schedlab.errors import SchedlabError, ScheduleError
from schedlab.offline.backlogs import jaillet_instance
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.instance_io import read_instance
from schedlab.offline.result import Status
from schedlab.offline.solve import solve
from schedlab.offline.solvers.cpsat import (
    best_rule_schedule,
    pair_offsets,
    repair_window,
    start_slack,
    start_windows,
)
from schedlab.offline.verify import verify
from schedlab.testing import instances
from tests.conftest import ROOT


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 40), st.data())
def test_pair_cuts_forbid_exactly_the_infeasible_offsets(memory: int, data: st.DataObject) -> None:
    # two requests alone: the verifier decides every offset; the cut must agree
    s = [data.draw(st.integers(0, memory - 1)) for _ in range(2)]
    o = [data.draw(st.integers(1, memory - x)) for x in s]
    inst = Instance.from_arrays(memory, s, o)
    cuts = pair_offsets(inst)
    for delta in range(-2 * memory, 2 * memory):
        fits = verify(inst, [2 * memory, 2 * memory + delta]) == []
        cut = bool(cuts) and cuts[0][2] <= delta <= cuts[0][3]
        assert fits != cut, (delta, cuts)


def test_pair_cut_of_two_tall_requests() -> None:
    # M = 4, s = 0, o = 3 twice: offsets -1, 0, 1 overlap in a round holding 5 > 4 tokens
    # (e.g. offset 1: round 2 holds 3 + 2); offset 2 holds 3 + 1 = 4 and fits.
    assert pair_offsets(Instance.from_arrays(4, [0, 0], [3, 3])) == [(0, 1, -1, 1)]


@settings(max_examples=30, deadline=None)
@given(instances(max_n=6, max_kv_tokens=15, max_output=8, max_arrival=4))
def test_start_windows_hold_the_warm_start(inst: Instance) -> None:
    warm, _ = best_rule_schedule(inst)
    upper = int((warm + inst.output - inst.arrival).sum())
    slack = np.array(start_slack(inst, upper))
    assert (warm - inst.arrival <= slack).all()


@settings(max_examples=40, deadline=None)
@given(instances(max_n=6, max_kv_tokens=14, max_output=10, max_arrival=3))
def test_start_windows_hold_every_schedule_as_good_as_the_warm_start(inst: Instance) -> None:
    # the windows with the chain bound (proofs/cpsat_horizon.md, proofs/tall_chain.md) hold
    # the warm start and an optimum, and are never wider than the volume ones. The optimum
    # is dp's (checked against brute force in test_exact_agree.py): brute force's windows
    # are as wide as the warm start's slack, and one drawn instance of this size kept it
    # searching for over 15 minutes
    warm, _ = best_rule_schedule(inst)
    upper = int((warm + inst.output - inst.arrival).sum())
    slack = np.array(start_windows(inst, upper))
    assert (slack <= np.array(start_slack(inst, upper))).all()
    assert (warm - inst.arrival <= slack).all()
    optimum = solve(inst, "dp", bound=None)
    assert optimum.status == Status.OPTIMAL
    assert verify(inst, optimum.starts) == []
    assert (optimum.starts - inst.arrival <= slack).all()


def test_chain_windows_are_narrower_on_a_jaillet_backlog() -> None:
    # 11 of the 15 requests are tall: the chain bound of N \ {i} beats the volume bound
    inst = jaillet_instance(0, n=15)
    warm, _ = best_rule_schedule(inst)
    upper = int((warm + inst.output).sum())
    assert sum(start_windows(inst, upper)) < sum(start_slack(inst, upper)) / 2


def test_time_limit_gives_time_limit_status_and_valid_bound() -> None:
    inst = jaillet_instance(3)  # n in [40, 60]: not proven in 3 s on this machine
    began = time.perf_counter()
    result = solve(inst, "cpsat", time_limit=3.0)
    assert time.perf_counter() - began < 3.0 + 5.0  # model build + verification slack
    assert verify(inst, result.starts) == []
    assert result.lower_bound is not None and result.lower_bound <= result.objective
    if result.status != Status.OPTIMAL:  # the 3 s cap binds before the work budget
        assert result.status == Status.TIME_LIMIT


def test_unknown_option_is_rejected() -> None:
    with pytest.raises(TypeError, match="cpsat: unknown option"):
        solve(Instance.from_arrays(5, [0], [1]), "cpsat", time_limit=1, bogus=1)


def test_same_seed_same_schedule() -> None:
    inst = jaillet_instance(4, n=8)
    a = solve(inst, "cpsat", seed=3, time_limit=30, num_workers=1)
    b = solve(inst, "cpsat", seed=3, time_limit=30, num_workers=1)
    assert a.starts.tolist() == b.starts.tolist()


def test_a_model_too_large_to_pay_is_refused_in_one_line() -> None:
    inst = read_instance(ROOT / "instances" / "mixed-n200.json")
    with pytest.raises(SchedlabError, match=r"runs 85,351 rounds in all .* use alns or lp-search"):
        solve(inst, "cpsat", bound=None)
    # the option lifts it: a short run keeps its cap (the O(n^2) pair terms are built
    # under it) and returns at least its warm start
    began = time.perf_counter()
    result = solve(inst, "cpsat", bound=None, time_limit=1, max_intervals=100_000)
    assert time.perf_counter() - began < 1.0 + 1.0  # set-up slack (was over 3.6 s)
    assert result.status == Status.TIME_LIMIT
    assert verify(inst, result.starts) == []
    assert result.objective <= result.stats["warm_objective"]
    with pytest.raises(SchedlabError, match="max_intervals must be an integer >= 1"):
        solve(jaillet_instance(0, n=4), "cpsat", bound=None, max_intervals=0)


def _last_round_loads(inst: Instance, starts: np.ndarray) -> list[int]:
    """``L_e`` by Claims 1-2 of proofs/cpsat_last_rounds.md, from completions alone."""
    ends = (starts + inst.output).tolist()
    peak = (inst.prompt + inst.output).tolist()
    o = inst.output.tolist()
    return [
        sum(peak[j] - (ends[j] - ends[e]) for j in range(inst.n) if 0 <= ends[j] - ends[e] < o[j])
        for e in range(inst.n)
    ]


@st.composite
def tight_schedules(draw: st.DrawFn) -> tuple[Instance, np.ndarray]:
    """A feasible schedule: a random order's list schedule, some requests delayed."""
    inst = draw(instances(max_n=7, max_kv_tokens=20, max_output=10, max_arrival=4))
    order = draw(st.permutations(range(inst.n)))
    starts = list_schedule(inst, np.array(order, dtype=np.int64))
    delays = draw(st.lists(st.integers(0, 3), min_size=inst.n, max_size=inst.n))
    delayed = starts + np.array(delays, dtype=np.int64)
    return inst, delayed if verify(inst, delayed) == [] else starts


@settings(max_examples=400, deadline=None)
@given(instances(max_n=6, max_kv_tokens=20, max_output=10, max_arrival=4), st.data())
def test_last_round_loads_decide_feasibility(inst: Instance, data: st.DataObject) -> None:
    # Claim 1 with Claim 2's loads: every last round within M iff the verifier accepts
    horizon = int(inst.output.sum()) + int(inst.arrival.max())
    starts = np.array(
        [data.draw(st.integers(int(a), int(a) + horizon)) for a in inst.arrival.tolist()]
    )
    fits = all(load <= inst.kv_tokens for load in _last_round_loads(inst, starts))
    assert fits == (verify(inst, starts) == [])


@settings(max_examples=400, deadline=None)
@given(tight_schedules())
def test_left_shift_rule_decides_a_one_round_move(case: tuple[Instance, np.ndarray]) -> None:
    # Claim 3: j moves one round earlier (others fixed) iff neither (A) nor (B) holds
    inst, starts = case
    assert verify(inst, starts) == []
    loads = _last_round_loads(inst, starts)
    ends = (starts + inst.output).tolist()
    s, o, memory = inst.prompt.tolist(), inst.output.tolist(), inst.kv_tokens
    for j in range(inst.n):
        if starts[j] == inst.arrival[j]:
            continue
        moved = starts.copy()
        moved[j] -= 1
        movable = verify(inst, moved) == []
        a = any(ends[f] == starts[j] and loads[f] >= memory - s[j] for f in range(inst.n))
        b = any(
            1 <= ends[j] - ends[e] <= o[j] - 1 and loads[e] == memory
            for e in range(inst.n)
            if e != j
        )
        assert movable == (not (a or b)), (j, starts.tolist())


@settings(max_examples=25, deadline=None)
@given(instances(max_n=7, max_kv_tokens=16, max_output=12, max_arrival=3))
def test_cpsat_equals_dp_on_tall_backlogs(inst: Instance) -> None:
    # outputs up to M: most requests tall, the regime of the last-round model's pair terms
    cpsat = solve(inst, "cpsat", bound=None, time_limit=30)
    dp = solve(inst, "dp", bound=None)
    assert verify(inst, cpsat.starts) == []
    assert cpsat.status == dp.status == Status.OPTIMAL
    assert cpsat.objective == dp.objective
    assert cpsat.objective <= cpsat.stats["warm_objective"]


def test_a_short_run_is_never_worse_than_its_warm_start() -> None:
    # identical requests: the left-shifted warm start is re-sorted into the index order that
    # the model requires, so it is a solution, and the objective is capped by it
    inst = read_instance(ROOT / "instances" / "jaillet-s3.json")
    result = solve(inst, "cpsat", bound=None, work=2.0)
    assert verify(inst, result.starts) == []
    assert result.objective <= result.stats["warm_objective"]
    assert result.stats["stopped_by"] == "work"
    # the hint is a solution, so CP-SAT holds one from the start (not UNKNOWN)
    assert result.stats["cpsat_status"] == "FEASIBLE"


def test_a_cap_that_passes_while_the_model_is_built_returns_the_warm_start() -> None:
    # 3,000 requests (sum o = 10,332, under max_intervals): O(n^2) pairs outlast a 0.5 s cap
    rng = np.random.default_rng(0)
    inst = Instance.from_arrays(50, rng.integers(1, 6, 3000), rng.integers(1, 7, 3000))
    began = time.perf_counter()
    result = solve(inst, "cpsat", bound=None, time_limit=0.5)
    assert time.perf_counter() - began < 0.5 + 1.5  # was 3.3 s
    assert result.stats["cpsat_status"] == "NOT_RUN"
    assert result.stats["stopped_by"] == "time_limit"
    assert result.status == Status.TIME_LIMIT
    assert result.objective == result.stats["warm_objective"]
    assert verify(inst, result.starts) == []


@settings(max_examples=150, deadline=None)
@given(tight_schedules(), st.data())
def test_window_repair_equals_brute_force(
    case: tuple[Instance, np.ndarray], data: st.DataObject
) -> None:
    # every placement of the freed requests within reach, the others fixed, by the verifier
    inst, starts = case
    free = data.draw(st.lists(st.integers(0, inst.n - 1), min_size=1, max_size=3, unique=True))
    reach = data.draw(st.integers(0, 4))
    repaired = repair_window(inst, starts, free, reach)
    assert verify(inst, repaired.starts) == []
    others = np.setdiff1d(np.arange(inst.n), free)
    assert (repaired.starts[others] == starts[others]).all()
    ranges = [
        range(max(int(inst.arrival[i]), int(starts[i]) - reach), int(starts[i]) + reach + 1)
        for i in free
    ]
    best = None
    for placed in itertools.product(*ranges):
        trial = starts.copy()
        trial[free] = placed
        if verify(inst, trial) == []:
            best = sum(placed) if best is None else min(best, sum(placed))
    assert repaired.status == Status.OPTIMAL
    assert int(repaired.starts[free].sum()) == best
    assert repaired.gain == int(starts[free].sum()) - best >= 0


def test_window_repair_recovers_a_delay_and_proves_a_tight_window() -> None:
    # a freed request delayed as far as the others let it: the repair wins the delay back
    inst = read_instance(ROOT / "instances" / "jaillet-s1.json")
    starts = solve(inst, "sof", bound=None).starts
    free = [int(i) for i in np.argsort(starts, kind="stable")[20:26]]
    delays = {}
    for i in free:
        delayed = starts.copy()
        while True:
            delayed[i] += 1
            if verify(inst, delayed) != []:
                break
        delays[i] = int(delayed[i] - starts[i]) - 1
    i = max(delays, key=delays.get)
    assert delays[i] > 0
    delayed = starts.copy()
    delayed[i] += delays[i]
    repaired = repair_window(inst, delayed, free, delays[i] + 5)
    assert repaired.status == Status.OPTIMAL
    assert repaired.gain >= delays[i]
    assert verify(inst, repaired.starts) == []
    again = repair_window(inst, repaired.starts, free, 5)
    assert again.status == Status.OPTIMAL and again.gain == 0


def test_window_repair_refuses_bad_input_in_one_line() -> None:
    inst = jaillet_instance(0, n=6)
    starts = solve(inst, "sof", bound=None).starts
    with pytest.raises(ScheduleError, match="infeasible schedule"):
        repair_window(inst, np.zeros(inst.n, dtype=np.int64), [0], 2)
    with pytest.raises(ScheduleError, match="must be an integer round"):
        repair_window(inst, starts + 0.5, [0], 2)
    with pytest.raises(SchedlabError, match="starts must be a sequence of 6 starts"):
        repair_window(inst, dict(enumerate(starts.tolist())), [0], 2)
    for free in ([0, 0], [inst.n], [-1], [1.5], [True], ["1"], None, 1):
        with pytest.raises(SchedlabError, match="repair_window: free"):
            repair_window(inst, starts, free, 2)
    for reach in (-1, 1.5, True, 10**12):
        with pytest.raises(SchedlabError, match="repair_window: reach"):
            repair_window(inst, starts, [0], reach)
    for work in (-1, float("nan"), None):
        with pytest.raises(SchedlabError, match="work must be a positive"):
            repair_window(inst, starts, [0], 2, work=work)
    with pytest.raises(SchedlabError, match="starts must be at most"):
        repair_window(inst, np.append(starts[:-1], 2**62), [0], 2)
    assert repair_window(inst, starts, [np.int64(0)], np.int64(2)).status == Status.OPTIMAL
    unchanged = repair_window(inst, starts, [], 3)
    assert unchanged.status == Status.OPTIMAL and unchanged.gain == 0
    assert (unchanged.starts == starts).all()


def test_window_repair_builds_its_model_under_the_time_limit() -> None:
    # every request of n = 200 freed: the model outlasts a 0.5 s cap (was 2.8 s)
    inst = read_instance(ROOT / "instances" / "mixed-n200.json")
    starts = solve(inst, "sof", bound=None).starts
    began = time.perf_counter()
    repaired = repair_window(inst, starts, range(inst.n), 3000, budget=Budget(0.5))
    assert time.perf_counter() - began < 0.5 + 1.0
    assert repaired.status == Status.TIME_LIMIT and repaired.gain == 0
    assert (repaired.starts == starts).all()


def test_window_repair_holds_the_window_only() -> None:
    # a release at round 10^12: the load is held over the window's rounds, not from round 0
    inst = Instance.from_arrays(10, [1, 1, 1], [2, 2, 2], [0, 10**12, 10**12])
    starts = np.array([0, 10**12, 10**12 + 2])
    repaired = repair_window(inst, starts, [2], 5)
    assert repaired.status == Status.OPTIMAL and repaired.gain == 2  # back to its release
    assert repaired.starts.tolist() == [0, 10**12, 10**12]
