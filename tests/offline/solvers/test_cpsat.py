"""CP-SAT solver: pair cuts, start windows, time limit and options."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.offline.backlogs import jaillet_instance
from schedlab.offline.instance import Instance
from schedlab.offline.result import Status
from schedlab.offline.solve import solve
from schedlab.offline.solvers.cpsat import (
    best_rule_schedule,
    pair_offsets,
    start_slack,
)
from schedlab.offline.verify import verify
from tests.strategies import instances


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 40), st.data())
def test_pair_cuts_forbid_exactly_the_infeasible_offsets(memory: int, data: st.DataObject) -> None:
    # two requests alone: the verifier decides every offset; the cut must agree
    s = [data.draw(st.integers(0, memory - 1)) for _ in range(2)]
    o = [data.draw(st.integers(1, memory - x)) for x in s]
    inst = Instance.from_arrays(memory, s, o)
    cuts = pair_offsets(inst)
    for delta in range(-2 * memory, 2 * memory):
        fits = verify(inst, [2 * memory, 2 * memory + delta]) == []
        cut = bool(cuts) and cuts[0][2] <= delta <= cuts[0][3]
        assert fits != cut, (delta, cuts)


def test_pair_cut_of_two_tall_requests() -> None:
    # M = 4, s = 0, o = 3 twice: offsets -1, 0, 1 overlap in a round holding 5 > 4 tokens
    # (e.g. offset 1: round 2 holds 3 + 2); offset 2 holds 3 + 1 = 4 and fits.
    assert pair_offsets(Instance.from_arrays(4, [0, 0], [3, 3])) == [(0, 1, -1, 1)]


@settings(max_examples=30, deadline=None)
@given(instances(max_n=6, max_memory=15, max_output=8, max_arrival=4))
def test_start_windows_hold_the_warm_start(inst: Instance) -> None:
    warm, _ = best_rule_schedule(inst)
    upper = int((warm + inst.output - inst.arrival).sum())
    slack = np.array(start_slack(inst, upper))
    assert (warm - inst.arrival <= slack).all()


def test_time_limit_gives_time_limit_status_and_valid_bound() -> None:
    inst = jaillet_instance(3)  # n in [40, 60]: not proven in 3 s on this machine
    began = time.perf_counter()
    result = solve(inst, "cpsat", time_limit=3.0)
    assert time.perf_counter() - began < 3.0 + 5.0  # model build + verification slack
    assert verify(inst, result.starts) == []
    assert result.lower_bound is not None and result.lower_bound <= result.objective
    if result.status != Status.OPTIMAL:
        assert result.status == Status.TIME_LIMIT


def test_unknown_option_is_rejected() -> None:
    with pytest.raises(TypeError, match="cpsat: unknown option"):
        solve(Instance.from_arrays(5, [0], [1]), "cpsat", time_limit=1, bogus=1)


def test_same_seed_same_schedule() -> None:
    inst = jaillet_instance(4, n=8)
    a = solve(inst, "cpsat", seed=3, time_limit=30, num_workers=1)
    b = solve(inst, "cpsat", seed=3, time_limit=30, num_workers=1)
    assert a.starts.tolist() == b.starts.tolist()
