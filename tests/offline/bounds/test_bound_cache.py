"""A bound computed without a wall-clock cap is computed once a process
(:func:`schedlab.offline.bounds.bound_within`): the same call returns a copy, a call
that could differ (another instance, method, work or memory budget, a registry that
changed, a cap) computes again."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Iterator

import pytest

from schedlab import solve
from schedlab.budget import UNLIMITED, Budget
from schedlab.offline.bounds import BOUNDS, Bound, forget_bounds, lower_bound, register_bound
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
    BOUNDS.unregister("counted")


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
    BOUNDS.unregister("counted")
    lower_bound(INSTANCE)  # another set of methods

    def doubled(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
        return Bound(0.0, "counted")

    register_bound("counted", doubled, in_best=True)  # one name, another function
    assert lower_bound(INSTANCE).stats["values"]["counted"] == 0.0
    assert counted == [5]


def test_a_method_with_another_estimate_is_computed_again(counted: list[int]) -> None:
    lower_bound(INSTANCE)
    estimated = dataclasses.replace(BOUNDS.unregister("counted"), work=lambda instance: 1e15)
    BOUNDS.register("counted", estimated)
    again = lower_bound(INSTANCE)  # best's plan changed: counted is out of reach now
    assert "counted" in again.stats["out_of_reach"] and counted == [5]


def test_statistics_that_cannot_be_copied_are_not_kept() -> None:
    def locked(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
        return Bound(1.0, "locked", stats={"lock": threading.Lock()})

    register_bound("locked", locked)
    try:
        assert lower_bound(INSTANCE, "locked").value == 1.0  # computed, not kept
        assert lower_bound(INSTANCE, "locked").value == 1.0
    finally:
        BOUNDS.unregister("locked")


def test_threads_share_the_kept_bounds() -> None:
    # more instances than are kept, so that threads also drop each other's entries
    instances = [Instance.from_arrays(12, [1, k % 5], [2, 1 + k % 7], [0, k]) for k in range(100)]
    forget_bounds()

    def work(seed: int) -> list[float]:
        return [lower_bound(instances[(seed + k) % 100], "trivial").value for k in range(400)]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(work, range(4)))
    expected = [float(inst.output.sum()) for inst in instances]
    for seed, values in enumerate(runs):
        assert values == [expected[(seed + k) % 100] for k in range(400)]
