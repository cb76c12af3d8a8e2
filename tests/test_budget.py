"""Budgets: a Stop grants work one unit or a batch at a time, and says why it ended."""

from __future__ import annotations

import time

import pytest

from schedlab.budget import MAX_TIME_LIMIT, UNLIMITED, Budget, Expired
from schedlab.errors import SchedlabError


def test_a_batch_is_granted_up_to_the_work_left() -> None:
    stop = Budget().stop(10)
    assert [stop.take(4), stop.take(4), stop.take(4)] == [4, 4, 2]
    assert stop.reason is None and stop.work == 10
    assert stop.take(4) == 0 and stop.reason == "work"


def test_units_and_batches_count_alike() -> None:
    stop = Budget().stop(3)
    assert stop.take(2) == 2
    assert stop() is False  # the third unit
    assert stop() is True and stop.reason == "work" and stop.work == 3


def test_without_a_work_limit_a_batch_runs_until_the_cap() -> None:
    assert Budget().stop().take(10**9) == 10**9
    stop = Budget(0.01).stop()
    assert stop.take(5) == 5
    time.sleep(0.02)
    assert stop.take(5) == 0 and stop.reason == "time_limit" and stop.work == 5


def test_no_work_budget_grants_nothing() -> None:
    stop = Budget().stop(0)
    assert stop.take(1) == 0 and stop.reason == "work"


@pytest.mark.parametrize("units", [0, -3])
def test_a_batch_of_less_than_one_unit_is_refused(units: int) -> None:
    with pytest.raises(ValueError, match="units must be >= 1"):
        Budget().stop(10).take(units)


def test_check_raises_once_the_cap_has_passed() -> None:
    Budget(60).check()
    UNLIMITED.check()
    with pytest.raises(Expired):
        Budget(1e-9).check()


def test_a_time_limit_past_the_longest_is_refused() -> None:
    assert Budget(MAX_TIME_LIMIT).time_limit == MAX_TIME_LIMIT
    with pytest.raises(SchedlabError, match=r"^time_limit: at most 1e\+09 seconds, got 1e\+12"):
        Budget(1e12)
