"""check_schedule and check_bound: hand-solved schedules, each violation caught and named,
and agreement with the solvers' own objective on drawn instances."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

from schedlab import solve
from schedlab.offline.bounds import Bound
from schedlab.offline.instance import Instance
from schedlab.testing import (
    BoundViolation,
    InvariantViolation,
    ObjectiveViolation,
    ScheduleViolation,
    check_bound,
    check_schedule,
    instances,
)

# M = 10; request 0 (s=2, o=4, a=0) and request 1 (s=3, o=2, a=1)
PAIR = Instance.from_arrays(10, [2, 3], [4, 2], [0, 1])


def test_a_feasible_schedule_gives_its_objective():
    # starts 0 and 1: round 2 is the peak, 2+3 + 3+2 = 10 = M; F = (0+4-0) + (1+2-1) = 6
    assert check_schedule(PAIR, [0, 1]) == 6
    assert check_schedule(PAIR, np.array([0, 1]), objective=6) == 6
    assert check_schedule(PAIR, {1: 1, 0: 0}) == 6
    assert check_schedule(PAIR, [4, 1]) == (4 + 4) + 2


@pytest.mark.parametrize(
    ("starts", "message"),
    [
        ([0, 2], r"round 3 exceed M = 10 \(peak 11 tokens in round 3\)"),
        ([0, 0], "request 1: starts in round 0, before its release round 1"),
        ([0], "1 request\\(s\\) not scheduled: 1"),
        ([0, 1.5], "request 1: start must be an integer round"),
        ([(0, 0), (1, 1)], "expected one start round per request, got pairs"),
        (7, "expected one start round per request, got int"),
    ],
)
def test_an_infeasible_schedule_is_named(starts, message):
    with pytest.raises(ScheduleViolation, match=message) as caught:
        check_schedule(PAIR, starts)
    assert isinstance(caught.value, AssertionError)
    assert "Instance.from_arrays(10, [2, 3], [4, 2], [0, 1])" in str(caught.value)


def test_a_wrong_objective_is_caught():
    with pytest.raises(ObjectiveViolation, match=r"reports objective 5, but .* is 6"):
        check_schedule(PAIR, [0, 1], objective=5)


def test_bounds():
    check_bound(PAIR, 6, 6)
    check_bound(PAIR, Bound(5.5, "lp"), 6)
    check_bound(PAIR, 6 + 1e-7, 6)  # within solve's tolerance for floating-point bounds
    with pytest.raises(BoundViolation, match=r"bound 'lp' = 6\.5 exceeds 6"):
        check_bound(PAIR, Bound(6.5, "lp"), 6)
    with pytest.raises(BoundViolation, match="not a finite number"):
        check_bound(PAIR, math.nan, 6)
    assert issubclass(BoundViolation, InvariantViolation)


def test_a_large_instance_is_named_not_quoted():
    big = Instance.from_arrays(5, [0] * 30, [1] * 30, [0] * 30, name="big")
    with pytest.raises(ScheduleViolation, match=r"instance 'big' \(30 requests, M = 5\)"):
        check_schedule(big, [0] * 30)


@settings(max_examples=60, deadline=None)
@given(instances())
def test_the_objective_is_the_solvers(instance):
    result = solve(instance, "fcfs", bound="trivial")
    objective = check_schedule(instance, result.starts, result.objective)
    check_bound(instance, result.lower_bound, objective)
