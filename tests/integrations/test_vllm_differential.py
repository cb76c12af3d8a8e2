"""schedlab's engine against vLLM 0.19.0's own scheduler, step by step, on random traces.

The traces are :func:`schedlab.integrations.vllm.differential.random_trace`'s families:
independent requests (prefix caching on and off), chat sessions and agent loops whose
shared prefixes are in use while later turns arrive, bursts at one instant behind a
system prompt, shared prefixes under KV pressure, and several data-parallel ranks (with
bursts, too); each
synchronous or asynchronous, with seats, token budgets and caches that bind. The two runs
must agree on every step, every request and the run's counters
(:func:`~schedlab.integrations.vllm.differential.first_mismatch`). 6 x 200 traces here;
``benchmarks/vllm_differential.py`` runs 10,000 and more.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vllm")

from schedlab.integrations.vllm import require_vllm
from schedlab.integrations.vllm.differential import FAMILIES, differential_run, random_trace
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.prefix import SharedPrefixes
from schedlab.serving.workloads import RequestStream

require_vllm()  # the pinned release, or these tests fail loudly

TRACES_PER_FAMILY = 200
SEED = 48  # the CI's traces; the benchmark draws others


@pytest.mark.parametrize("family", FAMILIES)
def test_our_engine_equals_vllms_scheduler(family: str) -> None:
    seen = {"async": 0, "preempted": 0, "new_hits": 0, "evicted": 0, "ranks": 0}
    for number in range(TRACES_PER_FAMILY):
        trace = random_trace(family, np.random.default_rng([SEED, FAMILIES.index(family), number]))
        ours, theirs, mismatch = differential_run(
            trace.stream, trace.engine, replicas=trace.replicas
        )
        assert mismatch is None, f"{family} trace {number}: {trace.engine}: {mismatch}"
        assert all(r.finished for r in theirs.records)
        seen["async"] += trace.engine.async_scheduling
        seen["preempted"] += any(r.preemptions for r in theirs.records)
        seen["new_hits"] += _hits_while_the_prefix_runs(trace.stream, ours)
        seen["evicted"] += theirs.evicted_blocks > 0
        seen["ranks"] += len({r.replica for r in theirs.records}) > 1
    # the family reaches what it is drawn for
    assert seen["async"] and seen["preempted"], seen
    if family in ("chat", "burst", "pressure", "ranks"):
        assert seen["new_hits"] >= TRACES_PER_FAMILY // 10, seen
    if family == "pressure":
        assert seen["evicted"] >= TRACES_PER_FAMILY // 2, seen
    if family.endswith("ranks"):
        assert seen["ranks"] >= TRACES_PER_FAMILY // 2, seen


def _hits_while_the_prefix_runs(stream: RequestStream, run) -> bool:
    """Whether a request found cached blocks while another request with the same first
    block held its own (admitted before, not finished): the hits on blocks in use."""
    if stream.prefix is None:
        return False
    first = [int(ids[0]) for ids in stream.prefix.hash_ids]
    admitted: dict[int, float] = {}  # request -> start of its first chunk
    for batch in sorted(run.batches, key=lambda b: b.start_s):
        for i, _ in batch.chunks:
            admitted.setdefault(i, batch.start_s)
    for batch in run.batches:
        for i, _ in batch.reused:
            for j, record in enumerate(run.records):
                held = admitted.get(j, np.inf) < batch.start_s < record.finish_s
                if j != i and first[j] == first[i] and held:
                    return True
    return False


def test_the_random_cases_reach_preemption_and_prefix_hits() -> None:
    """A tight cache preempts, and with prefix caching on a preempted request takes
    blocks back from the cache."""
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


def test_shared_prefixes_hit_in_both_engines() -> None:
    """The second request finds the first's prompt blocks, in vLLM's cache (hashing the
    derived token ids) and in ours (by name)."""
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


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_prefix_in_use_is_shared_in_the_same_step(asynchronous: bool) -> None:
    """Two requests arrive together with 1,024 shared tokens (ids of 512): the second is
    admitted in the step the first is, after it, and shares the blocks the first's chunk
    just cached (vLLM caches a block when it allocates it): it prefills 76 tokens."""
    ids = (np.array([0, 1, 2]), np.array([0, 1, 3]))
    stream = RequestStream(
        "two", np.zeros(2), np.array([1100, 1100]), np.array([5, 5]), 1.0, SharedPrefixes(512, ids)
    )
    engine = EngineConfig(kv_tokens=65536, async_scheduling=asynchronous)
    ours, theirs, mismatch = differential_run(stream, engine)
    assert mismatch is None, str(mismatch)
    assert ours.batches[0].chunks == theirs.batches[0].chunks == ((0, 1100), (1, 76))
    # the 64 shared blocks count once
    assert ours.batches[0].used_blocks == theirs.batches[0].used_blocks == 69 + (69 - 64)


def test_ranks_in_lockstep_report_as_vllms_do() -> None:
    """The ranks of a mixture-of-experts model step together and report their schedulers'
    counts to the router (:mod:`schedlab.serving.dp_balancer`): vLLM's scheduler and ours
    must report alike, step by step, for every request to reach the same rank."""
    routed = 0
    for number in range(40):
        trace = random_trace("burst-ranks", np.random.default_rng([SEED, 99, number]))
        _, theirs, mismatch = differential_run(
            trace.stream, trace.engine, replicas=trace.replicas, lockstep=True
        )
        assert mismatch is None, f"trace {number}: {trace.engine}: {mismatch}"
        routed += len({r.replica for r in theirs.records}) > 1
    assert routed >= 20  # the router spread them


@pytest.mark.parametrize("asynchronous", [False, True])
def test_identical_prompts_share_their_prompt_and_nothing_they_generate(
    asynchronous: bool,
) -> None:
    """Two requests with the same 8-token prompt on a cache of 5 blocks of 8: they share
    the prompt's block; what each generates is its own (each samples its own token), so
    a resumed twin does not find its sibling's generated blocks."""
    ids = (np.array([1]), np.array([1]))
    stream = RequestStream(
        "twins", np.zeros(2), np.array([8, 8]), np.array([17, 17]), 1.0, SharedPrefixes(8, ids)
    )
    engine = EngineConfig(
        kv_tokens=5 * 8,
        block_size=8,
        max_num_seqs=2,
        max_num_batched_tokens=64,
        async_scheduling=asynchronous,
    )
    _, theirs, mismatch = differential_run(stream, engine)
    assert mismatch is None, str(mismatch)
    assert sum(r.preemptions for r in theirs.records) > 0
