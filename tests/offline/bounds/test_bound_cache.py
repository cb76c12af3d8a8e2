"""A bound computed without a wall-clock cap is computed once a process
(:func:`schedlab.offline.bounds.bound_within`): the same call returns a copy, a call
that could differ (another instance, method, work or memory budget, a registry that
changed, a cap) computes again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from schedlab import solve
from schedlab.budget import UNLIMITED, Budget
from schedlab.offline.bounds import BOUNDS, Bound, lower_bound, register_bound
from schedlab.offline.instance import Instance

INSTANCE = Instance.from_arrays(12, [2, 0, 3, 1, 4], [3, 5, 2, 4, 1], [0, 1, 1, 3, 4])


@pytest.fixture
def counted() -> Iterator[list[int]]:
    """A bound method ``counted`` (in ``best``) that records each run's instance size."""
    calls: list[int] = []

    def bound(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
        calls.append(instance.n)
        return Bound(float(instance.output.sum()), "counted", stats={"calls": len(calls)})

    register_bound("counted", bound, in_best=True)
    yield calls
    del BOUNDS["counted"]


def test_the_same_call_is_computed_once(counted: list[int]) -> None:
    first = lower_bound(INSTANCE, "counted")
    again = lower_bound(INSTANCE, "counted")
    assert counted == [5] and again == first
    again.stats["calls"] = -1  # a copy: the next caller sees the first result
    assert lower_bound(INSTANCE, "counted").stats == {"calls": 1}
    # so is best, and every solve of the instance after the first
    best = lower_bound(INSTANCE)
    assert counted == [5, 5] and lower_bound(INSTANCE) == best
    for solver in ("fcfs", "svf", "local-search"):
        assert solve(INSTANCE, solver).lower_bound >= best.value
    assert counted == [5, 5]


def test_a_call_that_could_differ_is_computed_again(counted: list[int]) -> None:
    lower_bound(INSTANCE, "counted")
    same_content = Instance.from_arrays(12, [2, 0, 3, 1, 4], [3, 5, 2, 4, 1], [0, 1, 1, 3, 4])
    lower_bound(same_content, "counted")
    assert counted == [5]  # the content is the key, not the object
    other = Instance.from_arrays(12, [2, 0, 3, 1], [3, 5, 2, 4], [0, 1, 1, 3])
    lower_bound(other, "counted")
    lower_bound(INSTANCE, "counted", max_memory=2**30)
    lower_bound(INSTANCE, "counted", time_limit=60)  # under a cap: never kept
    lower_bound(INSTANCE, "counted", time_limit=60)
    assert counted == [5, 4, 5, 5, 5]
    lower_bound(INSTANCE)
    lower_bound(INSTANCE, work=1e6)
    assert counted == [5, 4, 5, 5, 5, 5, 5]


def test_best_runs_again_when_its_methods_change(counted: list[int]) -> None:
    lower_bound(INSTANCE)
    del BOUNDS["counted"]
    lower_bound(INSTANCE)  # another set of methods

    def doubled(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
        return Bound(0.0, "counted")

    register_bound("counted", doubled, in_best=True)  # one name, another function
    assert lower_bound(INSTANCE).stats["values"]["counted"] == 0.0
    assert counted == [5]
