"""Completion-chain bound (proofs/tall_chain.md): the Held–Karp table against enumeration
of orders, hand-solved cases, and validity against brute-force optima."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.offline.bounds.tall_chain import (
    MAX_CHAIN,
    chain_members,
    chain_values,
    tall_chain_bound,
    tall_chain_without,
)
from schedlab.offline.instance import Instance
from schedlab.offline.solve import solve
from schedlab.testing import instances


def _chain_by_orders(memory: int, prompt: list[int], output: list[int], mask: int) -> int:
    """``min over orders`` of ``sum_k c_k`` by enumeration (the definition)."""
    members = [k for k in range(len(output)) if mask >> k & 1]
    best = None
    for order in itertools.permutations(members):
        c = total = 0
        for pos, j in enumerate(order):
            if pos == 0:
                c = output[j]
            else:
                i = order[pos - 1]
                c += min(output[j], max(0, prompt[i] + output[i] + prompt[j] + output[j] - memory))
            total += c
        best = total if best is None else min(best, total)
    return 0 if best is None else best


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.data())
def test_table_equals_enumeration_of_orders(memory: int, data: st.DataObject) -> None:
    m = data.draw(st.integers(0, 6))
    output = [data.draw(st.integers(1, memory)) for _ in range(m)]
    prompt = [data.draw(st.integers(0, memory - o)) for o in output]
    values = chain_values(memory, np.array(prompt, dtype=np.int64), np.array(output))
    assert len(values) == 1 << m
    for mask in range(1 << m):
        assert values[mask] == _chain_by_orders(memory, prompt, output, mask)


def test_three_tall_requests_hand_solved() -> None:
    # M = 10, three requests s = 0, o = 8 (peak 8): gap = min(8, 8 + 8 - 10) = 6, so the
    # chain is 8, 14, 20: bound 42. Every pair overlaps at most 2 rounds (offset >= 6:
    # round 7 holds 8 + 2 = 10), so starts 0, 6, 12 are optimal and meet it.
    inst = Instance.from_arrays(10, [0, 0, 0], [8, 8, 8])
    assert tall_chain_bound(inst).value == 42
    assert solve(inst, "brute-force", bound=None).objective == 42
    # without any one of them: 8 + 14 = 22
    assert tall_chain_without(inst) == [22, 22, 22]


def test_small_requests_count_their_output() -> None:
    # M = 10: one tall request (s 1, o 8, peak 9) and one small (s 1, o 2, peak 3): the
    # chain holds the tall one only (8), the small one adds o = 2: bound 10. Alone the
    # tall one costs 8 (its chain), the small one 2.
    inst = Instance.from_arrays(10, [1, 1], [8, 2])
    assert chain_members(inst) == [0]
    assert tall_chain_bound(inst).value == 10
    assert tall_chain_without(inst) == [2, 8]


def test_at_most_max_chain_members_of_largest_peak() -> None:
    n = MAX_CHAIN + 3
    peaks = list(range(21, 21 + n))  # all tall (2 * 21 > 40), all fit alone in M = 40
    inst = Instance.from_arrays(40, [1] * n, [p - 1 for p in peaks])
    members = chain_members(inst)
    assert members == list(range(3, n))  # the three smallest peaks left out


@settings(max_examples=60, deadline=None)
@given(instances(max_n=6, max_kv_tokens=14, max_output=10, max_arrival=3))
def test_bound_never_exceeds_the_optimum(inst: Instance) -> None:
    # optima by dp (checked against brute force in tests/offline/solvers/test_exact_agree.py):
    # brute force's start windows make some instances of this size take many minutes
    optimum = solve(inst, "dp", bound=None).objective
    assert tall_chain_bound(inst).value <= optimum
    for i, value in enumerate(tall_chain_without(inst)):
        keep = np.arange(inst.n) != i
        if not keep.any():
            assert value == 0
            continue
        rest = Instance.from_arrays(
            inst.kv_tokens, inst.prompt[keep], inst.output[keep], inst.arrival[keep]
        )
        assert value == tall_chain_bound(rest).value
        assert value <= solve(rest, "dp", bound=None).objective


@settings(max_examples=30, deadline=None)
@given(st.integers(10, 30), st.data())
def test_bound_valid_on_tall_backlogs(memory: int, data: st.DataObject) -> None:
    # mostly tall requests, where the chain is the binding bound; dp is the oracle here
    # (brute force's start windows are too wide for outputs this long: minutes an example),
    # and tests/offline/solvers/test_exact_agree.py checks dp against brute force
    n = data.draw(st.integers(2, 5))
    output = [data.draw(st.integers(memory // 2, memory)) for _ in range(n)]
    prompt = [data.draw(st.integers(0, memory - o)) for o in output]
    inst = Instance.from_arrays(memory, prompt, output)
    optimum = solve(inst, "dp", bound=None)
    assert optimum.status.name == "OPTIMAL"
    assert tall_chain_bound(inst).value <= optimum.objective
