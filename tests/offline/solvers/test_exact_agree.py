"""Exact solvers and bounds agree: bound <= dp = cpsat = brute force <= every heuristic.

Property tests for ``proofs/time_indexed_lagrangian.md``, ``proofs/volume_bound.md``,
``proofs/cpsat_horizon.md``, ``proofs/cpsat_pair_cuts.md`` and ``proofs/dp_rounds.md``;
every schedule goes through the independent verifier.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from schedlab.offline.bounds import BOUNDS, lower_bound
from schedlab.offline.instance import Instance
from schedlab.offline.instance_io import read_instance
from schedlab.offline.result import Status
from schedlab.offline.solve import solve
from schedlab.offline.solvers.rules import RULES
from schedlab.offline.verify import verify
from schedlab.testing import instances
from tests.conftest import INSTANCES

TINY = sorted(INSTANCES.glob("tiny-*.json"))


@settings(max_examples=30, deadline=None)
@given(instances(max_n=5, max_kv_tokens=12, max_output=6, max_arrival=3))
def test_bounds_exact_and_heuristics_are_ordered(inst: Instance) -> None:
    dp = solve(inst, "dp", bound=None)
    cpsat = solve(inst, "cpsat", bound=None, time_limit=30)
    oracle = solve(inst, "brute-force", bound=None)
    for result in (dp, cpsat):
        assert verify(inst, result.starts) == []
        assert result.status == Status.OPTIMAL
    assert dp.objective == cpsat.objective == oracle.objective
    for name in BOUNDS.entries():
        assert lower_bound(inst, name, time_limit=10).value <= dp.objective + 1e-9
    for rule in RULES:
        assert solve(inst, rule, bound=None).objective >= dp.objective


@pytest.mark.parametrize("path", TINY, ids=lambda p: p.stem)
@pytest.mark.parametrize("solver", ["dp", "cpsat"])
def test_tiny_proven_optima_are_reproduced(path, solver: str) -> None:  # type: ignore[no-untyped-def]
    inst = read_instance(path)
    result = solve(inst, solver, time_limit=60)
    assert verify(inst, result.starts) == []
    assert result.status == Status.OPTIMAL
    assert result.objective == inst.meta["optimum"]
    assert result.lower_bound is not None and result.lower_bound <= inst.meta["optimum"]
