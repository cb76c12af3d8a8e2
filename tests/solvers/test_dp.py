"""Dynamic programme over rounds: hand-solved case, limits and errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from schedlab.errors import InstanceError
from schedlab.instance import Instance
from schedlab.result import Status
from schedlab.solve import solve
from schedlab.solvers.dp import _Model
from schedlab.verify import verify
from schedlab.workloads import jaillet_instance
from tests.strategies import instances


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
@given(instances(max_n=4, max_memory=16, max_output=9, max_arrival=3))
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
