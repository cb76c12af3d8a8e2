"""Brute force: its guards on the size of the search."""

from __future__ import annotations

import pytest

from schedlab import solve
from schedlab.errors import InstanceError, SchedlabError
from schedlab.offline.instance import Instance
from schedlab.offline.result import Status
from schedlab.offline.solvers.brute_force import brute_force


def test_a_search_over_too_many_rounds_is_refused_before_it_starts() -> None:
    # four requests of about 100 rounds that cannot overlap, released apart: start windows
    # of 433 rounds, over a minute of search; the 1 s cap keeps an unguarded solver short
    inst = Instance.from_arrays(110, [2, 4, 6, 8], [100, 99, 98, 97], [0, 25, 50, 75])
    message = r"^brute-force: the search spans 901 rounds .* = 512; use dp or cpsat"
    with pytest.raises(InstanceError, match=message):
        solve(inst, "brute-force", time_limit=1, bound=None)


def test_max_rounds_counts_the_latest_arrival_and_the_objective() -> None:
    inst = Instance.from_arrays(5, [0], [3], [4])  # spans 4 + 3 rounds
    with pytest.raises(InstanceError, match=r"spans 7 rounds .* above max_rounds = 6; "):
        solve(inst, "brute-force", max_rounds=6, bound=None)
    assert solve(inst, "brute-force", max_rounds=7, bound=None).status is Status.OPTIMAL


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "max_rounds must be >= 1, got 0"),
        (-1, "max_rounds must be >= 1, got -1"),
        (1.5, "max_rounds must be an integer, got 1.5"),
    ],
)
def test_max_rounds_called_directly_must_be_a_positive_integer(value, message: str) -> None:
    inst = Instance.from_arrays(5, [0], [3])
    with pytest.raises(SchedlabError, match=f"^brute-force: {message}$"):
        brute_force(inst, max_rounds=value)
