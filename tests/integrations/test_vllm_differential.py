"""schedlab's engine against vLLM 0.19.0's own scheduler, step by step, on random traces.

Each example draws a request stream and engine settings tight enough to bind: KV caches
of one to four times the largest request (preemption), few seats, small token budgets;
every mode runs with prefix caching on and off, synchronous and asynchronous. The two
runs must agree on every step and every request
(:func:`schedlab.integrations.vllm.differential.first_mismatch`). 4 x 250 traces here;
``benchmarks/vllm_differential.py`` runs 10,000 and more.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("vllm")

from schedlab.integrations.vllm import require_vllm
from schedlab.integrations.vllm.differential import differential_run
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.prefix import SharedPrefixes
from schedlab.serving.workloads import RequestStream

require_vllm()  # the pinned release, or these tests fail loudly

TRACES_PER_MODE = 250


@st.composite
def cases(draw: st.DrawFn, *, prefix_caching: bool, async_scheduling: bool):
    """A request stream and engine settings under which it needs every rule."""
    n = draw(st.integers(1, 30))
    gaps = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))  # in 5 ms steps
    prompts = draw(st.lists(st.integers(1, 700), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 100), min_size=n, max_size=n))
    arrival = np.cumsum(np.asarray(gaps, dtype=float)) * 0.005
    stream = RequestStream(
        "differential",
        arrival,
        np.asarray(prompts, dtype=np.int64),
        np.asarray(outputs, dtype=np.int64),
        float(arrival[-1]) + 1.0,
    )
    block_size = draw(st.sampled_from((8, 16, 32)))
    seqs = draw(st.integers(1, 12))
    largest = -(-max(p + o - 1 for p, o in zip(prompts, outputs, strict=True)) // block_size)
    blocks = draw(st.integers(largest, 4 * largest + 8))
    engine = EngineConfig(
        kv_tokens=blocks * block_size,
        block_size=block_size,
        max_num_seqs=seqs,
        max_num_batched_tokens=draw(st.integers(max(seqs, 16), 512)),
        prefix_caching=prefix_caching,
        reserve_full_prompt=draw(st.booleans()),
        async_scheduling=async_scheduling,
    )
    return stream, engine


def _check(case) -> None:
    stream, engine = case
    _, theirs, mismatch = differential_run(stream, engine)
    assert mismatch is None, f"{engine}\nn = {len(stream)}: {mismatch}"
    assert all(r.finished for r in theirs.records)


MODES = [
    pytest.param(prefix, asynchronous, id=f"prefix={prefix}-async={asynchronous}")
    for prefix in (True, False)
    for asynchronous in (False, True)
]


@pytest.mark.parametrize(("prefix_caching", "async_scheduling"), MODES)
def test_our_engine_equals_vllms_scheduler(prefix_caching: bool, async_scheduling: bool) -> None:
    @settings(
        max_examples=TRACES_PER_MODE,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(cases(prefix_caching=prefix_caching, async_scheduling=async_scheduling))
    def run(case) -> None:
        _check(case)

    run()


def test_the_random_cases_reach_preemption_and_prefix_hits() -> None:
    """The settings above do bind: a tight cache preempts, and with prefix caching on a
    preempted request takes blocks back from the cache."""
    stream = RequestStream(
        "tight",
        np.zeros(6),
        np.full(6, 300, dtype=np.int64),
        np.full(6, 80, dtype=np.int64),
        1.0,
    )
    engine = EngineConfig(kv_tokens=60 * 16, block_size=16, max_num_seqs=6)
    ours, theirs, mismatch = differential_run(stream, engine)
    assert mismatch is None, str(mismatch)
    assert sum(r.preemptions for r in theirs.records) > 0
    assert theirs.reused_tokens > 0 and theirs.reused_tokens == ours.reused_tokens


@st.composite
def shared_prefix_cases(draw: st.DrawFn):
    """Requests that share prefixes (chain ids of ``B`` tokens), each arriving after the
    one before has finished: the hits our engine models (a finished request's blocks,
    kept in the free pool) are then all the hits vLLM can make."""
    n = draw(st.integers(2, 8))
    big = draw(st.sampled_from((8, 16, 48)))
    ids: list[np.ndarray] = []
    prompts: list[int] = []
    fresh = 0
    for _ in range(n):
        prompt = draw(st.integers(1, 300))
        need = -(-prompt // big)
        chain: list[int] = []
        if ids and draw(st.booleans()):
            parent = ids[draw(st.integers(0, len(ids) - 1))].tolist()
            chain = parent[: draw(st.integers(0, min(need, len(parent))))]
        new = need - len(chain)
        chain += list(range(fresh, fresh + new))
        fresh += new
        ids.append(np.asarray(chain, dtype=np.int64))
        prompts.append(prompt)
    outputs = draw(st.lists(st.integers(1, 20), min_size=n, max_size=n))
    arrival = np.arange(n, dtype=float) * 5.0  # every request long done before the next
    stream = RequestStream(
        "shared",
        arrival,
        np.asarray(prompts, dtype=np.int64),
        np.asarray(outputs, dtype=np.int64),
        float(arrival[-1]) + 1.0,
        SharedPrefixes(big, tuple(ids)),
    )
    block_size = draw(st.sampled_from((8, 16, 32)))
    largest = -(-max(p + o - 1 for p, o in zip(prompts, outputs, strict=True)) // block_size)
    engine = EngineConfig(
        kv_tokens=draw(st.integers(largest, 4 * largest + 8)) * block_size,
        block_size=block_size,
        max_num_seqs=8,
        max_num_batched_tokens=draw(st.integers(16, 512)),
    )
    return stream, engine


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(shared_prefix_cases())
def test_shared_prefix_hits_equal_vllms(case) -> None:
    _check(case)


def test_shared_prefixes_hit_in_both_engines() -> None:
    """The shared-prefix cases do hit: the second request finds the first's prompt
    blocks, in vLLM's cache (hashing the derived token ids) and in ours (by name)."""
    ids = (np.arange(4, dtype=np.int64), np.array([0, 1, 2, 9], dtype=np.int64))
    stream = RequestStream(
        "shared",
        np.array([0.0, 5.0]),
        np.array([60, 60]),
        np.array([3, 3]),
        6.0,
        SharedPrefixes(16, ids),
    )
    ours, theirs, mismatch = differential_run(stream, EngineConfig(kv_tokens=4096))
    assert mismatch is None, str(mismatch)
    assert theirs.reused_tokens == ours.reused_tokens == 48
