"""Schedules with eviction (:mod:`schedlab.offline.online.runs`): the verifier finds each
kind of violation, and the objective and waste are what their definitions say."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from schedlab.errors import ScheduleError
from schedlab.offline.instance import Instance
from schedlab.offline.online.runs import (
    assert_runs_feasible,
    evictions,
    last_starts,
    objective,
    run_schedule,
    runs_to_lists,
    verify_runs,
    wasted_rounds,
    wasted_token_rounds,
)
from schedlab.offline.schedule import Schedule, total_latency
from schedlab.offline.verify import verify
from schedlab.testing import instances

# M = 10: request 0 (s 2, o 4, a 0), request 1 (s 3, o 3, a 2)
INSTANCE = Instance.from_arrays(10, [2, 3], [4, 3], [0, 2])

# request 0 runs 2 rounds (holding 3, 4), is evicted, and reruns from round 5 on;
# request 1 runs in rounds 2..4 (holding 4, 5, 6) meanwhile
GOOD = (((0, 2), (5, 4)), ((2, 3),))


def test_a_feasible_schedule_with_an_eviction() -> None:
    assert verify_runs(INSTANCE, GOOD) == []
    assert last_starts(GOOD).tolist() == [5, 2]
    assert objective(INSTANCE, GOOD) == (5 + 4 - 0) + (2 + 3 - 2)
    assert evictions(GOOD) == 1
    assert wasted_rounds(GOOD) == 2
    assert wasted_token_rounds(INSTANCE, GOOD) == 3 + 4  # s + 1, s + 2 of the evicted run
    assert runs_to_lists(GOOD) == [[[0, 2], [5, 4]], [[2, 3]]]


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        ((((0, 4),),), r"^runs: 1 entries for 2 requests$"),
        ((((0, 2), (1, 4)), ((2, 3),)), r"request 0: run 1 starts in round 1, before run 0 "),
        ((((0, 2), (5, 3)), ((2, 3),)), r"request 0: its last run has 3 rounds, not its output"),
        ((((0, 4), (5, 4)), ((2, 3),)), r"request 0: run 0 has 4 rounds, so it completed"),
        ((((0, 0), (5, 4)), ((2, 3),)), r"request 0: run 0 has 0 rounds \(at least 1\)"),
        ((((0, 4),), ((1, 3),)), r"request 1: run 0 starts in round 1, before its release"),
        ((((0, 4),), ((2, 3),)), r"memory: round 3 exceed M = 10 \(peak 11 tokens in round 3\)"),
        ((((0, 4),), ()), r"request 1: expected a non-empty sequence of \(start, rounds\) runs"),
        ((((0, 4),), ((2.0, 3),)), r"request 1: run 0: start and rounds must be integers"),
        ((((0, 4),), ((2,),)), r"request 1: run 0: expected \(start, rounds\), got \(2,\)"),
    ],
)
def test_each_violation_is_named(runs: tuple, message: str) -> None:
    problems = verify_runs(INSTANCE, runs)
    assert any(re.search(message, p) for p in problems), problems
    with pytest.raises(ScheduleError, match=r"^infeasible runs: "):
        assert_runs_feasible(INSTANCE, runs)


def test_the_memory_of_an_evicted_run_counts_while_it_runs() -> None:
    # request 0's first run (0, 3) holds 5 tokens in round 2, beside request 1's 4: fine;
    # a first run of 4 rounds would have completed; (0, 3) then (3, 4) overlaps nothing
    assert verify_runs(INSTANCE, (((0, 3), (5, 4)), ((2, 3),))) == []
    # in a tighter memory the evicted run's tokens are what overflows
    tight = Instance.from_arrays(8, [2, 3], [4, 3], [0, 2])
    problems = verify_runs(tight, (((0, 3), (5, 4)), ((2, 3),)))
    assert problems == ["memory: round 2 exceed M = 8 (peak 9 tokens in round 2)"]


@st.composite
def _runs(draw: st.DrawFn, instance: Instance) -> tuple:
    """Random runs: per request up to two evicted runs, then a complete one, with gaps."""
    runs = []
    for request in instance.requests:
        t = request.arrival + draw(st.integers(0, 3))
        mine = []
        for _ in range(draw(st.integers(0, 2)) if request.output > 1 else 0):
            rounds = draw(st.integers(1, request.output - 1))
            mine.append((t, rounds))
            t += rounds + draw(st.integers(0, 3))
        mine.append((t, request.output))
        runs.append(tuple(mine))
    return tuple(runs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.data(), instances(max_n=4, max_kv_tokens=40, max_output=6, max_arrival=4))
def test_the_last_runs_of_any_accepted_schedule_are_a_schedule(
    data: st.DataObject, instance: Instance
) -> None:
    # proofs/hindsight.md, claims 1 and 2
    runs = data.draw(_runs(instance))
    assume(verify_runs(instance, runs) == [])
    starts = last_starts(runs)
    assert verify(instance, starts) == []
    assert objective(instance, runs) == total_latency(instance, starts)


def test_memory_use_counts_the_evicted_runs() -> None:
    # request 0 holds 3, 4, 5 in rounds 0..2 and is evicted; request 1 holds 4 in round 2
    runs = (((0, 3), (5, 4)), ((2, 3),))
    assert verify_runs(INSTANCE, runs) == []
    held = run_schedule(INSTANCE, runs)
    assert held.peak_memory == 5 + 4  # round 2, the evicted run's last
    # token-rounds (3+4+5) + (3+4+5+6) + (4+5+6) over M = 10 times the makespan 9
    assert held.utilisation == pytest.approx(45 / 90)
    # the last runs alone peak lower: the figure an online result must not report
    assert Schedule(INSTANCE, last_starts(runs)).peak_memory == 6
