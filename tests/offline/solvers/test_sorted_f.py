"""Sorted-F: batch selection, schedules, and the guarantee of proofs/sorted_f.md."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import schedlab.offline.solvers.sorted_f as sorted_f_module
from schedlab import solve, verify
from schedlab.budget import Budget
from schedlab.errors import SchedlabError
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.instance import Instance
from schedlab.offline.solvers.brute_force import brute_force
from schedlab.offline.solvers.sorted_f import (
    exact_min_f_batch,
    fast_min_f_batch,
    prune_batch,
    sequential_starts,
    sorted_f_batches,
)
from schedlab.testing import instances

EXACT_RATIO = 80  # proofs/sorted_f.md, Theorem (exact selection)
FAST_RATIO = 160  # proofs/sorted_f.md, Theorem (fast selection)


def hand_instance() -> Instance:
    # M = 10; peaks w = s + o are 1, 1, 1, 8, 8. The three o = 1 requests fit together
    # (w sum 3) with F = 3 / 9 = 1/3; adding either big one overflows (3 + 8 > 10), and
    # smaller subsets have F = 1/2 or 1. Then the big ones only fit alone: F = 4 < 8.
    return Instance.from_arrays(10, [0, 0, 0, 4, 0], [1, 1, 1, 4, 8])


def test_hand_batches_and_sequential_schedule() -> None:
    inst = hand_instance()
    batches, stats = sorted_f_batches(inst, method="exact")
    assert [b.tolist() for b in batches] == [[0, 1, 2], [3], [4]]
    starts = sequential_starts(inst, batches)
    # batch 2 starts when batch 1 (max o = 1) ends, batch 3 four rounds later
    assert starts.tolist() == [0, 0, 0, 1, 5]
    assert verify(inst, starts) == []
    result = solve(inst, "sorted-f-seq", bound=None)
    assert result.objective == 1 + 1 + 1 + 5 + 13
    assert stats["exact"] == 3


def _brute_min_f(weight: np.ndarray, output: np.ndarray, memory: int) -> tuple[float, float]:
    """Least F and least max(o)/|X| over all feasible subsets (q of the proof)."""
    best_f = best_q = np.inf
    n = len(weight)
    for k in range(1, n + 1):
        for subset in itertools.combinations(range(n), k):
            idx = list(subset)
            if weight[idx].sum() <= memory:
                best_f = min(best_f, output[idx].sum() / k**2)
                best_q = min(best_q, output[idx].max() / k)
    return best_f, best_q


@st.composite
def items(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int]:
    memory = draw(st.integers(2, 40))
    n = draw(st.integers(1, 9))
    output = np.array([draw(st.integers(1, memory)) for _ in range(n)])
    prompt = np.array([draw(st.integers(0, memory - o)) for o in output])
    return prompt + output, output, memory


@settings(max_examples=60, deadline=None)
@given(items())
def test_exact_batch_is_least_f_and_fast_within_lemma_bounds(data: tuple) -> None:
    weight, output, memory = data
    least_f, q = _brute_min_f(weight, output, memory)
    for batch, factor in (
        (exact_min_f_batch(weight, output, memory), 2),
        (fast_min_f_batch(weight, output, memory), 4),
    ):
        assert weight[batch].sum() <= memory
        k = len(batch)
        f = output[batch].sum() / k**2
        if factor == 2:
            assert f == pytest.approx(least_f)
        # Lemma 1: no member has o >= 2 * mean o; Lemmas 2/3: max o / |X| < factor * q
        assert output[batch].max() < 2 * output[batch].sum() / k or k == 1
        assert output[batch].max() / k < factor * q + 1e-12


def test_prune_drops_long_member() -> None:
    # {o = 1, 1, 10}: F = 12/9 > 2/4 = F({1, 1}), so 10 is dropped; then 1/1 > 2/4 stops.
    out = np.array([1, 1, 10])
    assert sorted(prune_batch(out, np.array([0, 1, 2])).tolist()) == [0, 1]


backlogs = instances(max_n=6, max_kv_tokens=12, max_arrival=0, max_output=5)


@settings(max_examples=25, deadline=None)
@given(backlogs)
def test_guarantee_against_optimum_and_bound(inst: Instance) -> None:
    optimum = solve(inst, "brute-force", bound=None).objective
    for method, ratio in (("exact", EXACT_RATIO), ("fast", FAST_RATIO)):
        seq = solve(inst, "sorted-f-seq", method=method, bound="best")
        assert seq.objective <= ratio * optimum
        assert (
            seq.objective <= ratio * seq.lower_bound
        )  # the property the proof's ratio implies when the bound is tight
        cont = solve(inst, "sorted-f", method=method, bound=None)
        assert cont.objective <= seq.objective  # the continuous variant keeps the best of three


def _packing_q(inst: Instance, members: list[int]) -> float:
    w = (inst.prompt + inst.output)[members]
    o = inst.output[members]
    return _brute_min_f(w, o, inst.kv_tokens)[1]


@settings(max_examples=20, deadline=None)
@given(backlogs)
def test_packing_lemma_on_optimal_schedules(inst: Instance) -> None:
    # Lemma 4: requests Y completing by T in a feasible schedule admit a batch
    # Z ⊆ Y with max o / |Z| <= 10 T / |Y|.
    starts = brute_force(inst, budget=Budget(), seed=0).starts
    completion = starts + inst.output
    for horizon in sorted(set(completion.tolist())):
        done = np.flatnonzero(completion <= horizon).tolist()
        assert _packing_q(inst, done) <= 10 * horizon / len(done)


@settings(max_examples=30, deadline=None)
@given(instances(max_n=8, max_kv_tokens=30, max_arrival=5))
def test_schedules_verified_with_releases(inst: Instance) -> None:
    for solver in ("sorted-f", "sorted-f-seq"):
        for method in ("exact", "fast", "auto"):
            result = solve(inst, solver, method=method, bound=None)
            assert verify(inst, result.starts) == []


def test_batches_partition_requests_in_non_decreasing_f() -> None:
    from schedlab.offline.backlogs import mixed_backlog

    inst = mixed_backlog(300, seed=3)
    batches, _ = sorted_f_batches(inst, method="fast")
    flat = np.sort(np.concatenate(batches))
    assert flat.tolist() == list(range(inst.n))
    weight = inst.prompt + inst.output
    assert all(weight[b].sum() <= inst.kv_tokens for b in batches)
    assert verify(inst, solve(inst, "sorted-f", bound=None).starts) == []


def test_time_limit_falls_back_and_stays_feasible() -> None:
    from schedlab.offline.backlogs import mixed_backlog

    inst = mixed_backlog(2000, seed=1)
    batches, stats = sorted_f_batches(inst, method="fast", budget=Budget(1e-9))
    assert stats["stopped_by"] == "time_limit" and stats["fallback"] == len(batches)
    assert verify(inst, sequential_starts(inst, batches)) == []


def test_bad_method_and_option() -> None:
    inst = hand_instance()
    with pytest.raises(SchedlabError, match="method must be one of"):
        solve(inst, "sorted-f", method="greedy")
    with pytest.raises(TypeError, match="unknown option"):
        solve(inst, "sorted-f-seq", colour="red")


def test_continuous_returns_the_best_candidate_and_follows_the_size_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inst = mixed_backlog(60, seed=3)
    result = solve(inst, "sorted-f", bound=None)
    objectives = result.stats["objectives"]
    assert set(objectives) == {"sequential", "strict", "backfill"}
    assert result.objective == min(objectives.values())
    assert verify(inst, result.starts) == []
    # above BACKFILL_MAX_N requests the backfilling decode is left out
    monkeypatch.setattr(sorted_f_module, "BACKFILL_MAX_N", 59)
    small = solve(inst, "sorted-f", bound=None)
    assert set(small.stats["objectives"]) == {"sequential", "strict"}
    assert small.objective == min(small.stats["objectives"].values())
    assert verify(inst, small.starts) == []


def _same_batches(inst: Instance, method: str) -> None:
    compiled, compiled_stats = sorted_f_batches(inst, method=method)
    reference, reference_stats = sorted_f_batches(inst, method=method, engine="python")
    assert [b.tolist() for b in compiled] == [b.tolist() for b in reference]
    assert compiled_stats == reference_stats


@settings(max_examples=300, deadline=None)
@given(
    instances(max_n=40, max_kv_tokens=60, max_arrival=0, max_output=40),
    st.sampled_from(["fast", "auto"]),
)
def test_compiled_fast_selection_equals_reference(inst: Instance, method: str) -> None:
    # proofs/sorted_f.md, "Compiled selection": the kernel takes the same batches as
    # _FastSelector.select + prune_batch, one after another (ties included: small M and
    # outputs make many equal peaks and outputs)
    _same_batches(inst, method)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_compiled_fast_selection_equals_reference_on_larger_backlogs(seed: int) -> None:
    # hundreds of requests, many output classes, FAST_CHUNK-sized calls of the kernel
    rng = np.random.default_rng(seed)
    n, memory = int(rng.integers(100, 700)), int(rng.integers(50, 3000))
    output = rng.integers(1, memory // 2 + 1, n)
    prompt = np.array([rng.integers(0, memory - o + 1) for o in output])
    _same_batches(Instance.from_arrays(memory, prompt, output), "fast")


def test_compiled_selection_above_its_memory_limit_runs_the_reference() -> None:
    memory = sorted_f_module.COMPILED_MAX_MEMORY + 1  # M^3 would overflow int64
    inst = Instance.from_arrays(memory, [memory // 2, 10, 0], [memory // 2, 5, 7])
    _same_batches(inst, "fast")


def test_unknown_sorted_f_engine() -> None:
    with pytest.raises(SchedlabError, match="sorted-f: engine must be one of compiled, python"):
        sorted_f_batches(hand_instance(), engine="cython")


@settings(max_examples=100, deadline=None)
@given(instances(max_n=12, max_kv_tokens=30, max_arrival=20))
def test_sequential_starts_follow_the_recurrence(inst: Instance) -> None:
    # T_b = max(T_{b-1} + max o over X_{b-1}, max a over X_b), batch by batch
    batches, _ = sorted_f_batches(inst, method="fast")
    expected = np.zeros(inst.n, dtype=np.int64)
    ready = 0
    for batch in batches:
        begin = max(ready, int(inst.arrival[batch].max()))
        expected[batch] = begin
        ready = begin + int(inst.output[batch].max())
    starts = sequential_starts(inst, batches)
    assert starts.tolist() == expected.tolist()
    assert verify(inst, starts) == []
