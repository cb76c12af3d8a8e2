"""LP-guided solvers: order by LP mean starts, LP-guided repair; verified schedules."""

from __future__ import annotations

import numpy as np
import pytest

from schedlab import read_instance, solve, verify
from schedlab.bounds.time_indexed import LPRelaxation
from schedlab.instance import Instance
from schedlab.list_scheduling import list_schedule
from schedlab.solvers.lp_guided import lp_order, lp_swap_repair
from tests.conftest import INSTANCES

TINY = sorted(INSTANCES.glob("tiny-*.json"))


def test_lp_order_sorts_by_mean_start_then_output() -> None:
    inst = Instance.from_arrays(10, [0, 0, 0, 0], [5, 2, 3, 1])
    relax = LPRelaxation(
        value=0.0, mean_start=np.array([2.0, 0.5, 2.0, 3.0]), status="optimal", runtime=0.0
    )
    # request 1 first (0.5); 0 and 2 tie at 2.0 and 2 has the shorter output; 3 last
    assert lp_order(inst, relax).tolist() == [1, 2, 0, 3]


@pytest.mark.parametrize("path", TINY, ids=lambda p: p.stem)
@pytest.mark.parametrize("solver", ["sorted-lp", "lp-swap"])
def test_tiny_instances_verified_and_bound_valid(path, solver: str) -> None:
    inst = read_instance(path)
    result = solve(inst, solver, time_limit=5, bound=None)
    assert verify(inst, result.starts) == []
    optimum = inst.meta["optimum"]
    assert result.objective >= optimum
    assert result.lower_bound is not None and result.lower_bound <= optimum + 1e-6


def test_repair_moves_late_request_earlier() -> None:
    # M = 4: the long request (s=0, o=3) and the short one (s=3, o=1) cannot overlap.
    # Order [long, short] costs 3 + 4 = 7; the LP says the short starts first
    # (mean starts 1.0 vs 0.0), so the repair inserts it earlier: 1 + 4 = 5.
    inst = Instance.from_arrays(4, [0, 3], [3, 1])
    order, stats = lp_swap_repair(inst, np.array([0, 1]), np.array([1.0, 0.0]), time_limit=5)
    assert order.tolist() == [1, 0]
    assert int((list_schedule(inst, order) + inst.output).sum()) == 5
    assert stats["accepted"] == 1


def test_repair_with_releases_uses_full_decoding() -> None:
    inst = Instance.from_arrays(4, [0, 3, 0], [3, 1, 1], [0, 0, 1])
    order, _ = lp_swap_repair(inst, np.array([0, 1, 2]), np.array([1.0, 0.0, 1.0]), time_limit=5)
    assert verify(inst, list_schedule(inst, order)) == []
    assert int((list_schedule(inst, order) + inst.output - inst.arrival).sum()) <= int(
        (list_schedule(inst, [0, 1, 2]) + inst.output - inst.arrival).sum()
    )


def test_unknown_option() -> None:
    inst = Instance.from_arrays(4, [0], [3])
    with pytest.raises(TypeError, match="unknown option"):
        solve(inst, "sorted-lp", colour=1)
