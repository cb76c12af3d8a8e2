"""Left-shift compaction: feasible, never later, and a fixpoint no single move improves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab import solve, verify
from schedlab.budget import Budget
from schedlab.errors import SchedlabError, ScheduleError
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.decoder import ENGINES, list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.solvers import alns
from schedlab.offline.solvers import left_shift as left_shift_module
from schedlab.offline.solvers.left_shift import earliest_start, left_shift
from schedlab.testing import instances


@pytest.mark.parametrize("engine", ENGINES)
def test_request_moves_into_the_gap_a_strict_decode_leaves(engine: str) -> None:
    # M = 10, (s, o): A = (5, 2), B = (6, 1), C = (1, 1), strict order A B C.
    # A starts at 0 holding 6, 7. B needs 7 tokens: 6 + 7 and 7 + 7 exceed 10, so it
    # starts at 2 (A done). C needs 2 tokens; strict order keeps it at or after B's
    # start: round 2 (7 + 2 = 9). Beside A in round 0 it also fits (6 + 2 = 8), and
    # that is where the left shift puts it: starts 0, 2, 0, objective down by 2.
    inst = Instance.from_arrays(10, [5, 6, 1], [2, 1, 1])
    strict = list_schedule(inst, [0, 1, 2])
    assert strict.tolist() == [0, 2, 2]
    shifted, stats = left_shift(inst, strict, engine=engine)
    assert shifted.tolist() == [0, 2, 0]
    assert stats == {"passes": 2, "moved": 1, "gain": 2, "stopped_by": None}
    assert verify(inst, shifted) == []


def test_earliest_start_respects_release_and_growth() -> None:
    # Others hold 4, 4, 9, 0 in rounds 0..3 (M = 10). A request (s = 1, o = 2) holds
    # 2 then 3: from round 0 it needs 4 + 2, 4 + 3 (fits); from round 1, 4 + 2 then
    # 9 + 3 (no); from round 2, 9 + 2 (no); from round 3, 0 + 2, 0 + 3 (fits).
    load = np.array([4, 4, 9, 0, 0])
    assert earliest_start(load, 10, 1, 2, 0, 3) == 0
    assert earliest_start(load, 10, 1, 2, 1, 3) == 3
    assert earliest_start(load, 10, 1, 2, 1, 2) is None


@settings(max_examples=60, deadline=None)
@given(
    instances(max_n=8, max_kv_tokens=25, max_arrival=4),
    st.randoms(use_true_random=False),
    st.booleans(),
)
def test_left_shift_is_feasible_monotone_and_a_fixpoint(inst: Instance, rnd, backfill) -> None:
    order = list(range(inst.n))
    rnd.shuffle(order)
    before = list_schedule(inst, order, backfill=backfill)
    after, stats = left_shift(inst, before)
    assert verify(inst, after) == []
    assert (after <= before).all()
    assert stats["gain"] == int(before.sum() - after.sum()) >= 0
    # no request can start one round or more earlier with all others where they are
    # (checked by the independent verifier, not by the compaction's own test)
    for i in range(inst.n):
        for t in range(int(inst.arrival[i]), int(after[i])):
            moved = after.copy()
            moved[i] = t
            assert verify(inst, moved) != []


@pytest.mark.parametrize("engine", ENGINES)
def test_infeasible_schedule_is_refused(engine: str) -> None:
    # M = 5: two requests (s = 2, o = 2) both at round 0 hold 3 + 3 = 6 > 5.
    inst = Instance.from_arrays(5, [2, 2], [2, 2])
    with pytest.raises(ScheduleError, match="request 0 does not fit at its start round 0"):
        left_shift(inst, np.array([0, 0]), engine=engine)


@settings(max_examples=1200, deadline=None)
@given(
    instances(max_n=10, max_kv_tokens=30, max_arrival=6),
    st.randoms(use_true_random=False),
    st.booleans(),
    st.sampled_from([1, 2, None]),
)
def test_compiled_and_reference_engines_shift_alike(inst: Instance, rnd, backfill, passes) -> None:
    # the kernel's one-sweep earliest fit against the sliding-window maximum, pass for
    # pass (max_passes 1 and 2 compare intermediate schedules, None the fixpoint)
    order = list(range(inst.n))
    rnd.shuffle(order)
    before = list_schedule(inst, order, backfill=backfill)
    late = before + np.array([rnd.randrange(3) for _ in range(inst.n)])  # idle rounds
    start = late if verify(inst, late) == [] else before
    compiled, c_stats = left_shift(inst, start, max_passes=passes)
    python, p_stats = left_shift(inst, start, max_passes=passes, engine="python")
    assert compiled.tolist() == python.tolist()
    assert c_stats == p_stats
    assert verify(inst, compiled) == []


def test_expired_cap_returns_the_schedule_reached_and_says_so() -> None:
    inst = Instance.from_arrays(10, [5, 6, 1], [2, 1, 1])
    strict = list_schedule(inst, [0, 1, 2])
    shifted, stats = left_shift(inst, strict, budget=Budget(1e-9))
    assert shifted.tolist() == strict.tolist()  # nothing done, nothing lost
    assert stats["stopped_by"] == "time_limit"


@pytest.mark.parametrize("engine", ENGINES)
def test_start_before_release_is_refused_not_shifted(engine: str) -> None:
    # a negative start (the compiled kernel would index before its load array) and a
    # start before a release are both infeasible: refused up front, naming the request
    far = 1_000_000
    inst = Instance.from_arrays(2 * far + 2, [0, 0], [far, far], [0, 0])
    with pytest.raises(ScheduleError, match="request 0 starts in round -2000000, before"):
        left_shift(inst, np.array([-2 * far, 0]), engine=engine)
    released = Instance.from_arrays(10, [1, 1], [2, 2], [0, 3])
    with pytest.raises(ScheduleError, match="request 1 starts in round 1, before its release 3"):
        left_shift(released, np.array([0, 1]), engine=engine)


@pytest.mark.parametrize("solver", ["local-search", "lp-swap", "lp-search", "alns"])
def test_searches_report_a_left_shift_cut_by_the_cap(solver: str, monkeypatch) -> None:
    # every search ends with a left shift; one cut by the time limit must show in the
    # solver's stopped_by (here every shift runs under an already expired cap)
    def cut(instance, starts, **options):
        return left_shift(instance, starts, **{**options, "budget": Budget(1e-9)})

    monkeypatch.setattr(left_shift_module, "left_shift", cut)
    monkeypatch.setattr(alns, "left_shift", cut)
    inst = mixed_backlog(30, seed=3)
    result = solve(inst, solver, bound=None)
    assert result.stats["stopped_by"] == "time_limit"
    assert verify(inst, result.starts) == []


def test_unknown_engine_is_refused() -> None:
    inst = Instance.from_arrays(10, [5], [2])
    with pytest.raises(SchedlabError, match="left_shift: engine must be one of"):
        left_shift(inst, np.array([0]), engine="fortran")
