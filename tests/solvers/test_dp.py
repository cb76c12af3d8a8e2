"""Dynamic programme over rounds: hand-solved case, limits and errors."""

from __future__ import annotations

import pytest

from schedlab.errors import InstanceError
from schedlab.instance import Instance
from schedlab.result import Status
from schedlab.solve import solve
from schedlab.verify import verify
from schedlab.workloads import jaillet_instance


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
    inst = jaillet_instance(0, n=12)
    result = solve(inst, "dp", time_limit=1.0, bound=None)
    assert verify(inst, result.starts) == []
    assert result.status in (Status.TIME_LIMIT, Status.OPTIMAL)
    assert result.lower_bound is not None and result.lower_bound <= result.objective
    assert result.runtime < 1.0 + 3.0  # checked after every expanded state
