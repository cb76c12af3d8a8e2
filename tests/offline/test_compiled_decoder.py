"""The compiled decoder agrees with the reference engine, schedule for schedule.

``schedlab.offline.compiled_decoder`` implements the procedure of
``schedlab.offline.decoder`` (proved in ``proofs/list_scheduling.md``) in numba; these
hypothesis tests compare the two on 1,500 random cases: both modes with and without
releases, backfilling of orders by output length (one tree, not one per output
bucket), and moves evaluated incrementally by the compiled resumable decode against a
full reference decode of the moved order.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import SchedlabError
from schedlab.offline.compiled_decoder import OUTPUT_BUCKETS, bucket_layout
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.solvers.order_evaluator import OrderEvaluator
from schedlab.offline.verify import verify
from schedlab.testing import instances


@settings(max_examples=300, deadline=None)
@given(instances(max_n=14, max_kv_tokens=40, max_arrival=0), st.data(), st.booleans())
def test_compiled_equals_reference_on_backlogs(inst: Instance, data, backfill: bool) -> None:
    order = data.draw(st.permutations(range(inst.n)))
    compiled = list_schedule(inst, order, backfill=backfill)
    reference = list_schedule(inst, order, backfill=backfill, engine="python")
    assert compiled.tolist() == reference.tolist()
    assert verify(inst, compiled) == []


@settings(max_examples=400, deadline=None)
@given(instances(max_n=14, max_kv_tokens=40, max_arrival=25), st.data(), st.booleans())
def test_compiled_equals_reference_with_releases(inst: Instance, data, backfill: bool) -> None:
    order = data.draw(st.permutations(range(inst.n)))
    compiled = list_schedule(inst, order, backfill=backfill)
    reference = list_schedule(inst, order, backfill=backfill, engine="python")
    assert compiled.tolist() == reference.tolist()
    assert verify(inst, compiled) == []


@settings(max_examples=200, deadline=None)
@given(instances(max_n=14, max_kv_tokens=40, max_arrival=25), st.data(), st.booleans())
def test_compiled_backfill_equals_reference_for_orders_by_output(
    inst: Instance, data, longest_first: bool
) -> None:
    # an order by output length is searched in one tree (bucket_layout), any other in
    # one tree per output bucket
    ties = data.draw(st.permutations(range(inst.n)))
    key = -inst.output if longest_first else inst.output
    order = np.lexsort((np.array(ties, dtype=np.int64), key))
    compiled = list_schedule(inst, order, backfill=True)
    assert compiled.tolist() == list_schedule(inst, order, backfill=True, engine="python").tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=60), st.data())
def test_bucket_layout_puts_each_request_in_one_slot_of_its_bucket(output: list[int], data):
    output_array = np.array(output, dtype=np.int64)
    order = np.array(data.draw(st.permutations(range(len(output)))), dtype=np.int64)
    layout, place, members = bucket_layout(output_array, order)
    first, sizes, leaves, nodes = layout.T
    assert sizes.sum() == len(output) and len(layout) <= OUTPUT_BUCKETS
    assert (leaves >= np.maximum(sizes, 1)).all() and (leaves & (leaves - 1) == 0).all()
    assert (nodes[1:] == nodes[:-1] + 2 * leaves[:-1]).all()  # trees side by side
    assert sorted(members.tolist()) == list(range(len(output)))
    for k, (start, size) in enumerate(zip(first, sizes, strict=True)):
        positions = members[start : start + size]
        assert (np.diff(positions) > 0).all()  # by priority position within a bucket
        requests = order[positions]
        assert (place[0, requests] == k).all()
        assert (place[1, requests] == np.arange(size)).all()
        if k:  # buckets hold increasing ranges of outputs
            earlier = order[members[first[k - 1] : start]]
            assert output_array[earlier].max() < output_array[requests].min()
    assert (sizes > 0).all()
    steps = np.diff(output_array[order])
    if (steps >= 0).all() or (steps <= 0).all():  # an order by output: one tree
        assert len(layout) == 1


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.booleans())
def test_compiled_equals_reference_on_larger_instances(seed: int, backfill: bool, releases: bool):
    # 60-200 requests, a few running at once: long runs of deficit jumps and completions
    rng = np.random.default_rng(seed)
    n, memory = int(rng.integers(60, 200)), int(rng.integers(50, 400))
    output = rng.integers(1, memory // 3, n)
    prompt = np.array([rng.integers(0, memory - o + 1) for o in output])
    arrival = rng.integers(0, 4 * n, n) if releases else np.zeros(n, dtype=np.int64)
    inst = Instance.from_arrays(memory, prompt, output, arrival)
    order = rng.permutation(n)
    compiled = list_schedule(inst, order, backfill=backfill)
    assert (
        compiled.tolist()
        == list_schedule(inst, order, backfill=backfill, engine="python").tolist()
    )


@settings(max_examples=500, deadline=None)
@given(
    instances(max_n=14, max_kv_tokens=30, max_arrival=0),
    st.randoms(use_true_random=False),
    st.integers(1, 4),
    st.sampled_from([None, 1, 2]),
)
def test_incremental_moves_equal_full_reference_decodes(inst: Instance, rnd, every, screen):
    # A chain of swap / insert moves: each evaluated by the compiled resumable decode
    # (restore a checkpoint, stop where the runs meet), its objective compared with the
    # reference engine's full decode of the moved order, and accepted (or kept and
    # accepted after a later evaluation, which makes accept decode it again).
    if inst.n < 2:
        return
    order = list(range(inst.n))
    rnd.shuffle(order)
    evaluator = OrderEvaluator(inst, np.array(order), checkpoint=every)
    assert evaluator.schedule().tolist() == list_schedule(inst, order, engine="python").tolist()
    for _ in range(5):
        i, j = sorted(rnd.sample(range(inst.n), 2))
        moved = list(order)
        if rnd.random() < 0.5:
            moved.insert(j, moved.pop(i))
        else:
            moved[i], moved[j] = moved[j], moved[i]
        full = list_schedule(inst, moved, engine="python")
        move = evaluator.evaluate(moved, i, j, screen, allow=10**9)  # the screen never cuts
        assert move is not None
        assert move.total + int(inst.output.sum()) == int((full + inst.output).sum())
        if rnd.random() < 0.3:  # evaluate another move first: the kept one goes stale
            evaluator.evaluate(order, 0, inst.n - 1)
        evaluator.accept(moved, move)
        order = moved
        assert evaluator.schedule().tolist() == full.tolist()
        assert evaluator.objective() == int((full + inst.output).sum())


def test_unknown_engine() -> None:
    inst = Instance.from_arrays(5, [1], [1])
    with pytest.raises(SchedlabError, match="engine: must be one of compiled, python"):
        list_schedule(inst, [0], engine="cython")


def test_importing_the_package_loads_no_numba() -> None:
    # numba (and scipy, which it imports) loads on the first compiled decode only
    code = (
        "import sys, schedlab, schedlab.cli, schedlab.offline.solvers, "
        "schedlab.offline.decoder; "
        "print(sorted(m for m in ('numba', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_kernels_compile_in_memory_where_no_cache_directory_is_writable() -> None:
    # a read-only install: the only cache locator allowed points below a file, so numba
    # finds nowhere to write; the kernels still compile (in memory) and decode
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": os.devnull + "/numba",
        "NUMBA_CACHE_LOCATOR_CLASSES": "UserProvidedCacheLocator",
    }
    code = (
        "from schedlab.offline.backlogs import mixed_backlog; "
        "from schedlab.offline.decoder import list_schedule; "
        "inst = mixed_backlog(30, seed=0); "
        "print(list_schedule(inst, range(30)).tolist() == "
        "list_schedule(inst, range(30), engine='python').tolist())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "True"


@st.composite
def _saved_decodes(draw: st.DrawFn):
    """A saved decode (starts, rounds and state segments per checkpoint, spare pool
    columns) and a new decode of positions ``base ..`` to write over it."""
    n = draw(st.integers(1, 20))
    every = draw(st.integers(1, 4))
    checkpoints = -(-n // every)
    sizes = draw(st.lists(st.integers(0, 5), min_size=checkpoints, max_size=checkpoints))
    base = every * draw(st.integers(0, checkpoints - 1))
    count = draw(st.integers(0, checkpoints - base // every))
    stop = draw(st.integers(base, n))
    new_sizes = draw(st.lists(st.integers(0, 7), min_size=count, max_size=count))
    values = st.integers(-50, 50)
    return {
        "n": n,
        "every": every,
        "base": base,
        "stop": stop,
        "delta": draw(st.integers(-3, 3)),
        "starts": draw(st.lists(values, min_size=n, max_size=n)),
        "rounds": draw(st.lists(values, min_size=checkpoints + 1, max_size=checkpoints + 1)),
        "segments": [
            draw(st.lists(st.tuples(values, values), min_size=k, max_size=k)) for k in sizes
        ],
        "new_starts": draw(st.lists(values, min_size=stop - base, max_size=stop - base)),
        "new_rounds": draw(st.lists(values, min_size=count, max_size=count)),
        "new_segments": [
            draw(st.lists(st.tuples(values, values), min_size=k, max_size=k)) for k in new_sizes
        ],
        "spare": draw(st.integers(0, 3)),
    }


def _layout(segments, rounds, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """``index`` and ``pool`` (``columns`` wide) of state segments, as the evaluator keeps them."""
    index = np.zeros((2, len(rounds)), dtype=np.int64)
    index[0] = rounds
    index[1, 1 : len(segments) + 1] = np.cumsum([len(seg) for seg in segments], dtype=np.int64)
    index[1, len(segments) + 1 :] = index[1, len(segments)]
    pool = np.full((2, columns), -99, dtype=np.int64)
    flat = [pair for seg in segments for pair in seg]
    if flat:
        pool[:, : len(flat)] = np.array(flat, dtype=np.int64).T
    return index, pool


@settings(max_examples=1000, deadline=None)
@given(_saved_decodes())
def test_accept_kernel_writes_the_new_decode_over_the_saved_one(case) -> None:
    from schedlab.offline.compiled_evaluation import accept_kernel

    every, base, stop, delta = case["every"], case["base"], case["stop"], case["delta"]
    first, count = base // every, len(case["new_segments"])
    # reference, by lists: the new segments and rounds replace checkpoints first ..,
    # the starts of base .. stop - 1 are the new ones, and from stop on all shift by delta
    segments = list(case["segments"])
    segments[first : first + count] = case["new_segments"]
    rounds = list(case["rounds"])
    rounds[first : first + count] = case["new_rounds"]
    rounds = [r + delta if k >= stop // every else r for k, r in enumerate(rounds)]
    starts = list(case["starts"])
    starts[base:stop] = case["new_starts"]
    starts = [s + delta if p >= stop else s for p, s in enumerate(starts)]
    width = sum(len(seg) for seg in segments)
    index_ref, pool_ref = _layout(segments, rounds, width)
    # the kernel, on the old layout with room for the new width
    old_width = sum(len(seg) for seg in case["segments"])
    index, pool = _layout(case["segments"], case["rounds"], max(width, old_width) + case["spare"])
    new_width = sum(len(seg) for seg in case["new_segments"]) + 1
    new_index, new_pool = _layout(case["new_segments"], case["new_rounds"] + [0], new_width)
    new_starts = np.zeros(case["n"], dtype=np.int64)
    new_starts[: stop - base] = case["new_starts"]
    got = np.array(case["starts"], dtype=np.int64)
    accept_kernel(
        base, stop, delta, count, every, new_starts, new_index, new_pool, got, index, pool
    )
    assert got.tolist() == starts
    assert index.tolist() == index_ref.tolist()
    assert pool[:, :width].tolist() == pool_ref.tolist()
