"""sloweave-kv: the projected KV peak, and the guarantees of ``proofs/sloweave_kv.md``
(no preemption and every deadline kept with exact predictions), on random runs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import ServingError
from schedlab.serving.cost_model import SLOWEAVE_DEFAULT
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO, request_itl
from schedlab.serving.policies import PolicyContext
from schedlab.serving.policy_registry import make_policy
from schedlab.serving.prediction import predict_outputs
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import simulate
from schedlab.serving.view import decode_kv_peak
from schedlab.testing import check_conservation, check_deadlines, record_run
from tests.serving.streams import FLAT, kv_bound, stream_of


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 40)), min_size=0, max_size=12))
def test_decode_kv_peak_is_the_brute_force_maximum(decodes):
    holds = [h for h, _ in decodes]
    rests = [r for _, r in decodes]
    horizon = max(rests, default=0) + 2
    brute = max((sum(h + k for h, r in decodes if r > k) for k in range(horizon)), default=0)
    assert decode_kv_peak(holds, [max(r, 1) for r in rests]) >= brute
    if all(r >= 1 for r in rests):
        assert decode_kv_peak(holds, rests) == brute


def test_decode_kv_peak_hand_solved():
    # 100 tokens for 10 more iterations and 50 for 30: at k = 9 both are alive,
    # 109 + 59 = 168; at k = 29 only the second, 79.
    assert decode_kv_peak([100, 50], [10, 30]) == 168
    # the first leaves after this iteration: 150 now, 79 at k = 29
    assert decode_kv_peak([100, 50], [1, 30]) == 150
    assert decode_kv_peak([], []) == 0


def _run(stream, config, tpot, policy="sloweave-kv", prediction_cv=0.0, seed=3):
    model = SLOWEAVE_DEFAULT
    pol = make_policy(policy, PolicyContext(model, config, tpot))
    scenario = Scenario(pol, model, SLO(5.0, tpot), config, seed=seed, prediction_cv=prediction_cv)
    return record_run(stream, scenario), pol


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    blocks=st.integers(6, 30),
    seqs=st.integers(1, 8),
    extra_tokens=st.integers(0, 200),
    reserve=st.booleans(),
    asynchronous=st.booleans(),
    prefix_caching=st.booleans(),
    block_size=st.sampled_from([1, 16]),
)
def test_exact_predictions_never_preempt_and_keep_deadlines(
    data, blocks, seqs, extra_tokens, reserve, asynchronous, prefix_caching, block_size
):
    # proofs/sloweave_kv.md, claims 1 and 2: with exact output predictions and an exact
    # cost model, nothing is ever preempted, and every iteration with decodes whose
    # decode-only batch meets D lasts at most D (8 decodes: 1.25 + 0.44 ms < 5 ms).
    config = EngineConfig(
        kv_tokens=16 * blocks,
        block_size=block_size,
        max_num_seqs=seqs,
        max_num_batched_tokens=seqs + extra_tokens + 1,
        reserve_full_prompt=reserve,
        async_scheduling=asynchronous,
        prefix_caching=prefix_caching,
    )
    cap = 16 * blocks
    n = data.draw(st.integers(1, 14))
    prompts = data.draw(st.lists(st.integers(1, cap - 1), min_size=n, max_size=n))
    outputs = [data.draw(st.integers(1, min(60, cap - p))) for p in prompts]
    gaps = data.draw(st.lists(st.floats(0, 0.01), min_size=n, max_size=n))
    stream = stream_of(np.cumsum(gaps), prompts, outputs)
    tpot = 0.005
    served, _ = _run(stream, config, tpot)
    check_conservation(served)
    check_deadlines(served)
    result = served.run
    assert all(r.finished for r in result.records)
    assert sum(r.preemptions for r in result.records) == 0
    for batch in result.batches:
        if batch.decodes:
            assert batch.end_s - batch.start_s <= tpot * (1 + 1e-12)
    for r in result.records:
        assert (request_itl(r, result.iteration_end_s) <= tpot * (1 + 1e-12)).all()


@pytest.mark.parametrize(
    ("config", "stream"),
    [
        # Found by review: under asynchronous scheduling the blocks of decodes that just
        # finished are freed only after the next iteration's decodes took theirs.
        (
            EngineConfig(
                68, block_size=1, max_num_seqs=4, max_num_batched_tokens=64, async_scheduling=True
            ),
            stream_of([0.0, 0.0, 0.065], [10, 20, 19], [30, 10, 2]),
        ),
        (
            EngineConfig(
                816,
                block_size=16,
                max_num_seqs=18,
                max_num_batched_tokens=512,
                async_scheduling=True,
            ),
            stream_of([0.0] * 17 + [0.135], [16] * 16 + [17, 15], [18] * 16 + [17, 2]),
        ),
    ],
)
def test_no_preemption_under_asynchronous_scheduling(config, stream):
    scenario = Scenario("sloweave-kv", FLAT, SLO(5.0, 0.05), config)
    served = record_run(stream, scenario)
    check_conservation(served)
    check_deadlines(served)
    assert sum(r.preemptions for r in served.run.records) == 0


def test_plain_sloweave_preempts_where_sloweave_kv_does_not():
    # The same KV-bound stream: plain SLOWeave overcommits the cache and recomputes,
    # sloweave-kv with exact predictions never does.
    stream, config = kv_bound(5)
    plain, _ = _run(stream, config, 0.010, policy="sloweave")
    gated, pol = _run(stream, config, 0.010)
    assert sum(r.preemptions for r in plain.run.records) > 0
    assert sum(r.preemptions for r in gated.run.records) == 0
    assert pol.stats["kv_gated"] > 0
    check_conservation(gated)
    check_deadlines(plain)
    check_deadlines(gated)


@pytest.mark.parametrize("cv", [0.25, 1.0])
def test_wrong_predictions_fall_back_to_preemption(cv):
    # Predictions off by a lognormal factor: the run still completes and conserves
    # every token; under-predicted requests may be preempted and recomputed.
    stream, config = kv_bound(7)
    served, _ = _run(stream, config, 0.010, prediction_cv=cv)
    check_conservation(served)
    assert all(r.finished for r in served.run.records)


def test_predictions_are_seeded_and_separate_from_the_workload():
    output = np.arange(1, 1001)
    assert (predict_outputs("perfect", output, 1).point() == output).all()
    assert (predict_outputs("lognormal:0", output, 1).point() == output).all()
    a = predict_outputs("lognormal:0.5", output, 1).point()
    b = predict_outputs("lognormal:0.5", output, 1)
    assert (a == b.point()).all() and (a >= 1).all() and not (a == output).all()
    assert (b.lower == a).all() and (b.upper == a).all()
    assert not (predict_outputs("lognormal:0.5", output, 2).point() == a).all()
    ratio = a / output
    assert ratio.mean() == pytest.approx(1.0, abs=0.08)
    with pytest.raises(ServingError, match="prediction_cv"):
        Scenario("sloweave-kv", prediction_cv=-0.1)
    # the stream a scenario draws is the same whatever the prediction error
    s0 = simulate("chat", Scenario("sloweave-kv", seed=4), rate=5.0, duration_s=10.0)
    s1 = simulate(
        "chat", Scenario("sloweave-kv", seed=4, prediction_cv=1.0), rate=5.0, duration_s=10.0
    )
    assert [r.arrival_s for r in s0.records] == [r.arrival_s for r in s1.records]
