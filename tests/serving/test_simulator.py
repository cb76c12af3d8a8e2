"""The event-driven simulator: hand-solved runs, conservation on random runs, errors."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import SchedlabError, ServingError
from schedlab.serving.cost_model import SLOWEAVE_DEFAULT, LinearAttentionCostModel
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO, request_itl
from schedlab.serving.policies import PolicyContext
from schedlab.serving.policy_registry import make_policy
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import run_engine, simulate
from schedlab.testing import check_conservation, record_run
from tests.serving.streams import stream_of

POLICIES = [
    "whole-prefill",
    "fixed:7",
    "fixed:64",
    "vllm",
    "sarathi",
    "sarathi:40",
    "sloweave",
    "sloweave:8",
    "sangam",
    "sangam:20",
]

#: Every iteration takes exactly 0.5 s (a binary fraction: times add up exactly).
HALF_SECOND = LinearAttentionCostModel(name="half-second", base_s=0.5)


def run(stream, policy="vllm", model=SLOWEAVE_DEFAULT, config=None, tpot=0.025, **kw):
    config = config or EngineConfig()
    pol = make_policy(policy, PolicyContext(model, config, tpot))
    served = record_run(stream, Scenario(pol, model, SLO(5.0, tpot), config, **kw))
    return served.run, served


def test_single_request_hand_solved():
    # Prompt 10, output 3, sloweave-default (ms): prefill-only iteration
    # 0.35 + 0.40 + 0.006*10 = 0.81 -> first token at 0.81 ms; then two decode-only
    # iterations of 0.35 + 0.90 + 0.055 = 1.305 ms -> tokens at 2.115 and 3.42 ms.
    result, _ = run(stream_of([0.0], [10], [3]))
    (record,) = result.records
    assert record.first_token_s == pytest.approx(0.81e-3)
    assert record.finish_s == pytest.approx(3.42e-3)
    assert record.ttft_s == pytest.approx(0.81e-3)
    assert record.tpot_s == pytest.approx(1.305e-3)
    assert request_itl(record, result.iteration_end_s) == pytest.approx([1.305e-3] * 2)
    assert record.segments == ((0, 2),)
    assert result.iteration_end_s.size == 3


def test_arrival_at_iteration_end_joins_next_iteration():
    # A: prompt 4, output 3 at t=0; iterations end at 0.5, 1.0, 1.5. B arrives at exactly
    # 1.0: the end at 1.0 comes first, then the arrival, then the start at 1.0, so B is
    # prefilled in the iteration [1.0, 1.5] and its first token is at 1.5.
    result, _ = run(stream_of([0.0, 1.0], [4, 4], [3, 1]), model=HALF_SECOND)
    a, b = result.records
    assert a.first_token_s == 0.5 and a.finish_s == 1.5
    assert b.first_token_s == 1.5 and b.finish_s == 1.5
    assert result.batches[2].decodes == (0,) and result.batches[2].chunks == ((1, 4),)


def test_idle_engine_waits_for_next_arrival():
    # Two lone requests far apart: the engine idles in between.
    result, _ = run(stream_of([0.0, 10.0], [4, 4], [2, 2]), model=HALF_SECOND)
    a, b = result.records
    assert (a.first_token_s, a.finish_s) == (0.5, 1.0)
    assert (b.first_token_s, b.finish_s) == (10.5, 11.0)
    assert result.end_s == 11.0


def test_preemption_and_prefix_cache_hand_solved():
    # KV: 4 blocks of 16 tokens. A and B: prompt 16, output 20 (at most 16 + 19 = 35 KV
    # tokens, 3 blocks). Iteration 0 prefills both: 16 tokens, 1 block each. Iteration j
    # computes token j (the one emitted last) and emits token j + 1, so a request holds
    # 16 + j tokens after it; iteration 1 takes a second block each: 4 used, none free.
    # Iteration 17 needs a third block each: the newest, B, is preempted (17 tokens
    # generated, 32 computed: 2 full blocks, cached). Its blocks go to the free queue's
    # back, last block first, and A's new block takes B's *second* block. No admission in
    # iteration 17 (it preempted); B must then wait: its whole sequence (16 + 17 = 33
    # tokens, 3 blocks) fails the gate while A holds 3 of the 4 blocks. A finishes at
    # the end of iteration 19 (20 tokens); in iteration 20 B takes back its first block
    # from the cache (16 tokens) and prefills the other 17, emitting token 18; tokens 19
    # and 20 come at the ends of iterations 21 and 22.
    config = EngineConfig(kv_tokens=64, max_num_seqs=4, max_num_batched_tokens=64)
    stream = stream_of([0.0, 0.0], [16, 16], [20, 20])
    result, served = run(stream, config=config, model=HALF_SECOND)
    check_conservation(served)
    a, b = result.records
    assert a.preemptions == 0 and b.preemptions == 1
    assert result.batches[17].preempted == (1,)
    assert result.batches[18].chunks == () and result.batches[19].chunks == ()
    assert result.batches[20].reused == ((1, 16),) and result.batches[20].chunks == ((1, 17),)
    assert b.prefilled_tokens == 16 + 17
    assert b.segments == ((0, 16), (20, 22))  # 17 tokens before the preemption
    assert (a.finish_s, b.finish_s) == (10.0, 11.5)
    # evicted: B's second block, taken by A in iteration 17, and one of A's two full
    # blocks, cached when A finished (vLLM caches every full block), taken by B in 20
    assert result.reused_tokens == 16 and result.evicted_blocks == 2


def test_preemption_recomputes_everything_without_prefix_caching():
    # The same run without prefix caching: B recomputes all 33 tokens in iteration 20.
    config = EngineConfig(
        kv_tokens=64, max_num_seqs=4, max_num_batched_tokens=64, prefix_caching=False
    )
    stream = stream_of([0.0, 0.0], [16, 16], [20, 20])
    result, served = run(stream, config=config, model=HALF_SECOND)
    check_conservation(served)
    _, b = result.records
    assert result.batches[20].reused == () and result.batches[20].chunks == ((1, 33),)
    assert b.prefilled_tokens == 16 + 33 and b.segments == ((0, 16), (20, 22))


def test_the_gate_holds_a_waiting_prompt_back_and_blocks_those_behind_it():
    # KV: 5 blocks of 16; at most 16 batched tokens. A (prompt 32, output 40: at most 71 KV
    # tokens, 5 blocks) is prefilled in iterations 0 and 1 and emits its tokens at the
    # ends of iterations 1..40. B (prompt 40: 3 blocks) arrives at 0.1 s and C (prompt 4)
    # at 0.2 s. From iteration 2 on A holds 3 blocks (4 from iteration 18, 5 from 34): B
    # fails the gate (3 blocks > 2 free) and C waits behind it, first come first served,
    # although its block would fit. A finishes at the end of iteration 40 (t = 20.5 s);
    # B is prefilled in iterations 41, 42 and 43 (16 + 16 + 8 tokens) and C, whole, in 43.
    config = EngineConfig(kv_tokens=80, max_num_seqs=4, max_num_batched_tokens=16)
    stream = stream_of([0.0, 0.1, 0.2], [32, 40, 4], [40, 2, 2])
    result, served = run(stream, config=config, model=HALF_SECOND)
    check_conservation(served)
    a, b, c = result.records
    assert a.finish_s == 20.5
    assert b.first_token_s == 22.0 and c.first_token_s == 22.0
    assert b.preemptions == 0 and b.prefilled_tokens == 40
    # Without the gate B is admitted in iteration 2 on a first chunk of 15 tokens, runs
    # out of blocks in iteration 4 (its next chunk needs a third block), preempts itself,
    # and goes round again: the thrashing the gate exists to prevent.
    loose_config = dataclasses.replace(config, reserve_full_prompt=False)
    loose, served = run(stream, config=loose_config, model=HALF_SECOND)
    check_conservation(served)
    assert loose.batches[2].chunks == ((1, 15),) and loose.batches[4].preempted == (1,)
    assert loose.records[1].preemptions > 1 and loose.records[1].prefilled_tokens > 40


def test_same_seed_same_result_and_noise_changes_time():
    stream = stream_of(np.linspace(0, 0.2, 30), [300] * 30, [50] * 30)
    first, _ = run(stream, noise_cv=0.3, seed=7)
    again, _ = run(stream, noise_cv=0.3, seed=7)
    other, _ = run(stream, noise_cv=0.3, seed=8)
    exact, _ = run(stream)
    assert first.records == again.records
    assert np.array_equal(first.iteration_end_s, again.iteration_end_s)
    assert not np.array_equal(first.iteration_end_s[:50], other.iteration_end_s[:50])
    assert not np.array_equal(first.iteration_end_s[:50], exact.iteration_end_s[:50])


def test_actual_cost_model_advances_time():
    # Decisions with sloweave-default, time from the half-second model.
    stream = stream_of([0.0], [10], [3])
    result, _ = run(stream, actual_cost_model=HALF_SECOND)
    assert result.iteration_end_s.tolist() == [0.5, 1.0, 1.5]


@settings(max_examples=25, deadline=None)
@given(
    data=st.data(),
    policy=st.sampled_from(POLICIES),
    blocks=st.integers(6, 14),
    seqs=st.integers(1, 5),
    extra_tokens=st.integers(0, 60),
)
def test_conservation_on_random_runs(data, policy, blocks, seqs, extra_tokens):
    config = EngineConfig(
        kv_tokens=16 * blocks,
        block_size=16,
        max_num_seqs=seqs,
        max_num_batched_tokens=seqs + extra_tokens + 1,
    )
    n = data.draw(st.integers(1, 12))
    cap = 16 * blocks
    prompts = data.draw(st.lists(st.integers(1, cap - 1), min_size=n, max_size=n))
    outputs = [data.draw(st.integers(1, min(40, cap - p))) for p in prompts]
    gaps = data.draw(st.lists(st.floats(0, 0.02), min_size=n, max_size=n))
    stream = stream_of(np.cumsum(gaps), prompts, outputs)
    noise = data.draw(st.sampled_from([0.0, 0.5]))
    _, served = run(stream, policy=policy, config=config, noise_cv=noise, seed=3)
    check_conservation(served)


@pytest.mark.parametrize("policy", POLICIES)
def test_conservation_under_memory_pressure(policy):
    # A small cache and long outputs force preemptions for every policy.
    rng = np.random.default_rng(11)
    n = 40
    stream = stream_of(
        np.sort(rng.uniform(0, 0.05, n)), rng.integers(1, 200, n), rng.integers(50, 300, n)
    )
    config = EngineConfig(kv_tokens=1024, max_num_seqs=16, max_num_batched_tokens=256)
    result, served = run(stream, policy=policy, config=config, tpot=0.05)
    check_conservation(served)
    assert sum(r.preemptions for r in result.records) > 0


def test_sloweave_iterations_meet_deadline_with_exact_model():
    # Exact, monotone model and decode-only always feasible (256 decodes take
    # 0.35 + 0.9 + 14.08 = 15.33 ms < 20 ms): every iteration with decodes lasts <= D,
    # so every inter-token gap is <= D when nothing is preempted.
    tpot = 0.020
    scenario = Scenario(
        "sloweave", slo=SLO(5.0, tpot), engine=EngineConfig(kv_tokens=4_000_000), seed=2
    )
    result = simulate("mixed", scenario, rate=20.0, duration_s=20.0, record_batches=True)
    batches = result.run.batches
    with_decodes = [b for b in batches if b.decodes and b.chunks]
    assert len(with_decodes) > 100
    assert max(b.end_s - b.start_s for b in with_decodes) <= tpot * (1 + 1e-12)
    assert result.summary.preemptions == 0
    assert result.summary.itl.count > 0
    itl = np.concatenate([request_itl(r, result.run.iteration_end_s) for r in result.records])
    assert itl.max() <= tpot * (1 + 1e-12)
    # The budget binds: chunks are cut to fit, not only whole short prompts.
    assert any(b.end_s - b.start_s > 0.9 * tpot for b in with_decodes)


def test_request_too_large_for_kv_is_refused():
    config = EngineConfig(kv_tokens=64, max_num_seqs=2, max_num_batched_tokens=64)
    with pytest.raises(ServingError, match=r"request 1: prompt \+ output = 70 tokens"):
        run(stream_of([0, 0], [10, 60], [5, 10]), config=config)


class _GreedyBadPolicy:
    """Asks for more tokens than the request has: the engine must refuse."""

    name = "bad"
    chunked = True
    stats: ClassVar[dict[str, int]] = {}

    def plan(self, view):
        return [(req, req.target + 5) for req in view.prefill_candidates()][:1]


class _LazyPolicy:
    """Never prefills: the engine must not idle forever with requests waiting."""

    name = "lazy"
    chunked = True
    stats: ClassVar[dict[str, int]] = {}

    def plan(self, view):
        return []


@pytest.mark.parametrize(
    ("policy", "message"),
    [(_GreedyBadPolicy(), "chunk of 15 tokens for request 0"), (_LazyPolicy(), "empty batch")],
)
def test_engine_refuses_invalid_plans(policy, message):
    with pytest.raises(ServingError, match=message):
        run_engine(stream_of([0.0], [10], [3]), Scenario(policy))


def test_noise_beside_an_actual_cost_model_is_refused():
    # the noise multiplies the predicted time; with an actual model it was ignored
    with pytest.raises(ServingError, match="noise_cv and actual_cost_model: give one"):
        Scenario(actual_cost_model=SLOWEAVE_DEFAULT, noise_cv=0.5)
    assert Scenario(actual_cost_model=SLOWEAVE_DEFAULT).noise_cv == 0.0


@pytest.mark.parametrize("base_s", [0.0, 3600.5, 1e307])
def test_iteration_times_outside_zero_to_an_hour_are_errors(base_s):
    # 1e307 s a batch once summed to an infinite clock, printed as Infinity in --json
    model = LinearAttentionCostModel(name="odd", base_s=base_s)
    with pytest.raises(ServingError, match="must be positive and at most 3600 s"):
        run(stream_of([0.0], [10], [3]), model=model)


@pytest.mark.parametrize(
    ("kwargs", "place"),
    [
        ({"max_num_seqs": 0}, "engine.max_num_seqs"),
        ({"block_size": 2.5}, "engine.block_size"),
        ({"kv_tokens": 8}, "engine.kv_tokens"),
        ({"max_num_seqs": 64, "max_num_batched_tokens": 32}, "engine.max_num_batched_tokens"),
    ],
)
def test_engine_config_validation(kwargs, place):
    with pytest.raises(SchedlabError, match=place):
        EngineConfig(**kwargs)


@pytest.mark.parametrize("cv", [-1.0, math.nan, math.inf, 1e308, 10.5])
def test_noise_outside_its_range_is_refused(cv):
    with pytest.raises(ServingError, match="noise_cv: must be from 0 to 10"):
        run(stream_of([0.0], [10], [3]), noise_cv=cv)


def test_stop_at_leaves_unfinished_requests_recorded():
    stream = stream_of([0.0, 0.0], [4, 4], [10, 10])
    result = run_engine(stream, Scenario("vllm", HALF_SECOND), stop_at_s=2.0)
    assert result.end_s == 2.0
    assert all(math.isnan(r.finish_s) for r in result.records)
    # Tokens at 0.5, 1.0, 1.5, 2.0 are recorded as produced.
    assert all(r.segments == ((0, 3),) for r in result.records)


def test_a_timeline_has_one_process_per_replica():
    from schedlab.serving.timeline import chrome_trace

    scenario = Scenario("vllm", replicas=2, seed=1)
    result = simulate("chat", scenario, rate=6.0, duration_s=5.0, record_batches=True)
    trace = chrome_trace(result.run)
    steps = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(steps) == len(result.run.batches)
    counts = [sum(e["pid"] == pid for e in steps) for pid in (0, 1)]
    assert counts == list(result.run.replica_iterations) and min(counts) > 0
    with pytest.raises(ValueError, match="recorded no iterations"):
        chrome_trace(simulate("chat", scenario, rate=6.0, duration_s=5.0).run)
