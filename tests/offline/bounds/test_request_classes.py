"""Identical requests grouped for the time-indexed LP (``proofs/time_indexed_lagrangian.md``,
Claim 4): the grouping itself, and the class LP's value against the full request LP solved
with every column by SciPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from schedlab.offline.bounds.request_classes import request_classes
from schedlab.offline.bounds.time_indexed import lp_relaxation, uniform_blocks
from schedlab.offline.instance import Instance
from schedlab.testing import instances


@st.composite
def _with_duplicates(draw: st.DrawFn, most_kinds: int = 4, most_copies: int = 4) -> Instance:
    """A few kinds of request, each repeated, in a shuffled order."""
    kinds = draw(st.integers(1, most_kinds))
    kv_tokens = draw(st.integers(8, 14))
    requests = []
    for _ in range(kinds):
        prompt = draw(st.integers(1, 4))
        output = draw(st.integers(1, 4))
        arrival = draw(st.integers(0, 3))
        requests += [(prompt, output, arrival)] * draw(st.integers(1, most_copies))
    order = draw(st.permutations(range(len(requests))))
    prompt, output, arrival = (np.array([requests[k][j] for k in order]) for j in range(3))
    return Instance.from_arrays(kv_tokens, prompt, output, arrival)


@given(inst=st.one_of(instances(max_n=8), _with_duplicates()))
def test_classes_stand_for_every_request(inst: Instance) -> None:
    classes = request_classes(inst)
    rows = zip(inst.prompt, inst.output, inst.arrival, strict=True)
    keys = {(int(s), int(o), int(a)) for s, o, a in rows}
    assert classes.n == len(keys)
    assert int(classes.count.sum()) == inst.n
    assert np.bincount(classes.of, minlength=classes.n).tolist() == classes.count.tolist()
    for name in ("prompt", "output", "arrival"):
        assert classes.per_request(getattr(classes.instance, name)).tolist() == (
            getattr(inst, name).tolist()
        )
    # classes in the order of their first request
    firsts = [int(np.flatnonzero(classes.of == c)[0]) for c in range(classes.n)]
    assert firsts == sorted(firsts)
    if classes.n == inst.n:
        assert classes.instance is inst


def _full_block_lp(inst: Instance, bounds: np.ndarray) -> float:
    """The block LP with every column ``(i, τ)``, ``a_i <= τ <= max(a_i, T)``, written
    out round by round (no code of the LP under test)."""
    horizon = int(bounds[-1])
    columns, costs = [], []
    for i in range(inst.n):
        a, s, o = int(inst.arrival[i]), int(inst.prompt[i]), int(inst.output[i])
        for tau in range(a, max(a, horizon) + 1):
            load = np.zeros(len(bounds) - 1)
            for t in range(tau, min(tau + o, horizon)):
                block = int(np.searchsorted(bounds, t, side="right")) - 1
                load[block] += s + t - tau + 1
            columns.append((i, load))
            costs.append(tau + o - a)
    memory = np.array([load for _, load in columns]).T
    convexity = np.zeros((inst.n, len(columns)))
    for j, (i, _) in enumerate(columns):
        convexity[i, j] = 1.0
    result = linprog(
        costs,
        A_ub=memory,
        b_ub=inst.kv_tokens * np.diff(bounds),
        A_eq=convexity,
        b_eq=np.ones(inst.n),
        bounds=(0, None),
        method="highs",
    )
    assert result.status == 0
    return float(result.fun)


@settings(max_examples=40, deadline=None)
@given(inst=_with_duplicates(), horizon=st.integers(1, 16), blocks=st.integers(1, 16))
def test_class_lp_has_the_request_lps_value(inst: Instance, horizon: int, blocks: int) -> None:
    relax = lp_relaxation(inst, horizon=horizon, max_blocks=blocks, max_rounds=None)
    assert relax.status == "optimal"
    full = _full_block_lp(inst, uniform_blocks(horizon, blocks))
    assert relax.value <= full + 1e-6 * full
    assert relax.value == pytest.approx(full, rel=1e-5)
    # identical requests start alike on average
    classes = request_classes(inst)
    for c in range(classes.n):
        assert np.ptp(relax.mean_start[classes.of == c]) == 0.0
