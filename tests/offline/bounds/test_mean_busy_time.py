"""Mean-busy-time bound (proofs/mean_busy_time_bound.md): hand-solved cases, exactness of
the arithmetic, and validity against exact optima and heuristic schedules."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings

from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds import lower_bound
from schedlab.offline.bounds.mean_busy_time import (
    busy_offsets,
    mean_busy_time_bound,
    mean_busy_time_value,
)
from schedlab.offline.bounds.volume import volume_bound
from schedlab.offline.instance import Instance
from schedlab.offline.result import Status
from schedlab.offline.solve import solve
from schedlab.offline.solvers.rules import RULES
from schedlab.offline.verify import verify
from schedlab.testing import instances


def _exact(inst: Instance) -> Fraction:
    """The bound of the proof in rational arithmetic, one request at a time."""
    order = sorted(range(inst.n), key=lambda i: (int(inst.volume[i]), i))
    y = Fraction(0)
    prefix = 0
    total = Fraction(0)
    for i in order:
        s, o, a, v = (int(x[i]) for x in (inst.prompt, inst.output, inst.arrival, inst.volume))
        moment = sum(Fraction(2 * k - 1, 2) * (s + k) for k in range(1, o + 1))
        prefix += v
        new = max(Fraction(prefix * prefix, 2 * inst.kv_tokens), y + v * a + moment)
        total += (new - y) / v + o - moment / v - a
        y = new
    return total


def test_single_request_is_tight() -> None:
    # M = 10, s = 1, o = 2: v = 1*2 + 3 = 5, m = (1/2)(2) + (3/2)(3) = 5.5, so B = p + 1.1
    # and d = 2 - 1.1 = 0.9. Y_1 = max(5^2/20, 5 * 1.1) = 5.5: busy 5.5 / 5 = 1.1, bound
    # 1.1 + 0.9 = 2, the optimum (start in round 0, complete at 2).
    inst = Instance.from_arrays(10, [1], [2])
    assert busy_offsets(inst).tolist() == pytest.approx([1.1])
    assert mean_busy_time_bound(inst).value == 2


def test_profiles_beat_the_volume_bound() -> None:
    # M = 10, eight requests s = 0, o = 4: v = 10, m = 0.5 + 3 + 7.5 + 14 = 25, offset
    # 2.5, d = 1.5. Volume bound: C_(k) >= max(k, 4): 4 * 4 + 5 + 6 + 7 + 8 = 42. Here
    # Y_k = max(V_k^2 / 20, Y_(k-1) + 25) ends at Y_8 = 80^2 / 20 = 320 (the release term
    # only lifts Y_1..Y_4), busy = 320 / 10 = 32, bound 32 + 8 * 1.5 = 44 > 42.
    inst = Instance.from_arrays(10, [0] * 8, [4] * 8)
    assert volume_bound(inst).value == 42
    assert mean_busy_time_bound(inst).value == 44
    optimum = solve(inst, "cpsat", bound=None, time_limit=30)
    assert optimum.status == Status.OPTIMAL and verify(inst, optimum.starts) == []
    assert optimum.objective >= 44


def test_release_enters_through_the_least_busy_time() -> None:
    # one request released in round 5, s = 0, o = 2 (v = 3, m = 0.5 + 3 = 3.5): Y_1 =
    # max(9/20, 3*5 + 3.5) = 18.5, busy 18.5/3, d = 2 - 3.5/3: bound 7 - 5 = 2 (tight)
    inst = Instance.from_arrays(10, [0], [2], [5])
    assert mean_busy_time_bound(inst).value == 2


def test_arithmetic_matches_rational_evaluation_on_a_backlog() -> None:
    # large prefix sums (V_k^2 ~ 1e17) must not lose the small requests' increments
    inst = mixed_backlog(400, seed=5)
    exact = _exact(inst)
    value = mean_busy_time_value(inst)
    assert value <= exact
    assert float(exact) - value <= 2e-9 * float(exact)


@settings(max_examples=40, deadline=None)
@given(instances(max_n=6, max_kv_tokens=30, max_output=12, max_arrival=8))
def test_arithmetic_matches_rational_evaluation(inst: Instance) -> None:
    exact = _exact(inst)
    value = mean_busy_time_value(inst)
    assert value <= exact
    assert float(exact) - value <= 1e-8 * max(1.0, float(exact))


@settings(max_examples=40, deadline=None)
@given(instances(max_n=5, max_kv_tokens=12, max_output=6, max_arrival=3))
def test_never_exceeds_optimum_or_any_rule(inst: Instance) -> None:
    bound = mean_busy_time_bound(inst).value
    optimum = solve(inst, "brute-force", bound=None)
    assert bound <= optimum.objective
    for rule in RULES:
        result = solve(inst, rule, bound=None)
        assert verify(inst, result.starts) == []
        assert bound <= result.objective


def test_tighter_than_volume_on_a_mixed_backlog() -> None:
    # a chat/summarisation request holds a few % of M, so each gains d_i - v_i/(2M),
    # roughly half its output length, over the volume bound's area term
    inst = mixed_backlog(500, seed=2)
    value = mean_busy_time_bound(inst).value
    assert value > 1.02 * volume_bound(inst).value
    best = min(solve(inst, rule, bound=None).objective for rule in RULES)
    assert value <= best


def test_registered_and_used_by_best() -> None:
    inst = Instance.from_arrays(10, [0] * 8, [4] * 8)
    values = lower_bound(inst, "best", time_limit=5).stats["values"]
    assert values["mean-busy-time"] == 44
    assert lower_bound(inst, "mean-busy-time").value == 44
