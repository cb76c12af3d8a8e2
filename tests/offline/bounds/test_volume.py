"""Volume bound (proofs/volume_bound.md): hand-solved cases and validity on random ones."""

from __future__ import annotations

from hypothesis import given, settings

from schedlab.offline.bounds import lower_bound
from schedlab.offline.bounds.volume import volume_bound, volume_completions
from schedlab.offline.instance import Instance
from schedlab.offline.solve import solve
from schedlab.testing import instances


def test_two_small_requests_bound_meets_optimum() -> None:
    # M = 10, two requests s = 1, o = 2: volumes 1*2 + 3 = 5 each. C_(1) >= max(ceil(5/10),
    # 2) = 2 and C_(2) >= max(ceil(10/10), 2) = 2, so the bound is 4; both start in round
    # 0 (loads 4 then 6 <= 10) and reach it.
    inst = Instance.from_arrays(10, [1, 1], [2, 2])
    assert volume_completions(inst).tolist() == [2, 2]
    assert volume_bound(inst).value == 4
    assert solve(inst, "brute-force", bound=None).objective == 4


def test_area_term_dominates_when_memory_is_tight() -> None:
    # M = 4, two requests s = 0, o = 3 (volume 6 each): C_(1) >= max(ceil(6/4), 3) = 3,
    # C_(2) >= max(ceil(12/4), 3) = 3: bound 6. They cannot share rounds 2 and 3 (3 + 2
    # > 4), so the optimum staggers them: starts 0 and 2, objective 3 + 5 = 8 >= 6.
    inst = Instance.from_arrays(4, [0, 0], [3, 3])
    assert volume_bound(inst).value == 6
    assert solve(inst, "brute-force", bound=None).objective == 8


def test_releases_are_subtracted() -> None:
    # one request released in round 5 with o = 2: C >= a + o = 7, latency bound 7 - 5 = 2
    inst = Instance.from_arrays(10, [0], [2], [5])
    assert volume_bound(inst).value == 2


def test_registered_and_used_by_best() -> None:
    inst = Instance.from_arrays(4, [0, 0], [3, 3])
    assert lower_bound(inst, "volume").value == 6
    assert lower_bound(inst, "best", time_limit=5).stats["values"]["volume"] == 6


@settings(max_examples=40, deadline=None)
@given(instances(max_n=5, max_kv_tokens=12, max_output=6, max_arrival=3))
def test_volume_bound_never_exceeds_optimum(inst: Instance) -> None:
    optimum = solve(inst, "brute-force", bound=None)
    assert volume_bound(inst).value <= optimum.objective
