"""Data-parallel replicas: vLLM's load balancer, independent engines, lockstep steps."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import ServingError
from schedlab.serving.cost_model import LinearAttentionCostModel
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO
from schedlab.serving.scenario import MAX_REPLICAS, Scenario
from schedlab.serving.simulator import run_engine
from tests.serving.streams import FLAT, MS, ms_stream

# 10 ms a step plus 1 ms per prefill token.
PER_TOKEN = LinearAttentionCostModel(name="per-token", base_s=10 * MS, prefill_per_token_s=MS)
SMALL = EngineConfig(kv_tokens=1024, max_num_seqs=4, max_num_batched_tokens=64)


def run(requests, *, replicas=1, lockstep=False, model=FLAT, engine=SMALL, **kw):
    scenario = Scenario(
        "vllm", model, SLO(5.0, 0.025), engine, replicas=replicas, lockstep=lockstep, **kw
    )
    return run_engine(requests, scenario, record_batches=True)


def test_least_loaded_routing_by_hand():
    # Three requests at 0 ms: the first to replica 0 (a tie goes to the lowest index);
    # replica 0 then scores 4 (one waiting), so the second goes to replica 1; both score
    # 4, so the third to replica 0. A fourth at 15 ms: replica 0 runs A and C (score 2),
    # replica 1 runs B (score 1) -> replica 1. Replica 0: A and C prefill in [0, 10] and
    # decode until 50 (5 iterations); replica 1: B likewise, D joins at 20 (the end of the
    # running iteration) and decodes until 70 (7 iterations).
    requests = ms_stream([0, 0, 0, 15], [10, 10, 10, 10], [5, 5, 5, 5])
    result = run(requests, replicas=2)
    assert [r.replica for r in result.records] == [0, 1, 0, 1]
    assert result.replica_iterations == (5, 7)
    assert [r.finish_s for r in result.records] == pytest.approx([0.05, 0.05, 0.05, 0.07])


def test_independent_replicas_run_in_parallel():
    # Two requests at once on two replicas: each is alone on its engine, so both finish
    # when one alone would (prefill [0, 10], two decodes): 30 ms; on one engine, the same
    # here too (batched together). With 1-seat engines they would queue on one replica.
    requests = ms_stream([0, 0], [10, 10], [3, 3])
    one_seat = EngineConfig(kv_tokens=1024, max_num_seqs=1, max_num_batched_tokens=64)
    single = run(requests, engine=one_seat)
    double = run(requests, replicas=2, engine=one_seat)
    assert [r.finish_s for r in single.records] == pytest.approx([0.030, 0.060])
    assert [r.finish_s for r in double.records] == pytest.approx([0.030, 0.030])


@settings(max_examples=40, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.integers(0, 60), st.integers(1, 80), st.integers(1, 20)),
        min_size=1,
        max_size=14,
    ),
    replicas=st.integers(2, 3),
    lagged=st.booleans(),
)
def test_each_replica_is_one_engine_on_its_own_requests(data, replicas, lagged):
    # Independent replicas: a replica's requests are served exactly as one engine would
    # serve them alone. The small KV cache forces preemptions.
    data.sort()
    requests = ms_stream(*zip(*data, strict=True))
    engine = EngineConfig(
        kv_tokens=160, max_num_seqs=3, max_num_batched_tokens=48, async_scheduling=lagged
    )
    together = run(requests, replicas=replicas, model=PER_TOKEN, engine=engine)
    for k in range(replicas):
        mine = [r for r in together.records if r.replica == k]
        if not mine:
            continue
        index = [r.index for r in mine]
        alone = run(
            ms_stream(
                requests.arrival_s[index] / MS, requests.prompt[index], requests.output[index]
            ),
            model=PER_TOKEN,
            engine=engine,
        )
        for a, b in zip(mine, alone.records, strict=True):
            assert (a.first_token_s, a.finish_s) == pytest.approx((b.first_token_s, b.finish_s))
            assert a.preemptions == b.preemptions and a.prefilled_tokens == b.prefilled_tokens


def test_lockstep_steps_together_by_hand():
    # A (prompt 10, output 2) on replica 0 and B (prompt 30, output 1) on replica 1, both
    # at 0. Independent: A's prefill takes 10 + 10 ms, its decode 10 ms: done at 30; B's
    # prefill 10 + 30 = 40 ms. In lockstep the first step lasts as long as the slower
    # batch (40 ms), then replica 0 decodes while replica 1 runs a dummy batch: A at 50.
    requests = ms_stream([0, 0], [10, 30], [2, 1])
    free = run(requests, replicas=2, model=PER_TOKEN)
    locked = run(requests, replicas=2, lockstep=True, model=PER_TOKEN)
    assert [r.finish_s for r in free.records] == pytest.approx([0.030, 0.040])
    assert [r.finish_s for r in locked.records] == pytest.approx([0.050, 0.040])
    assert [r.first_token_s for r in locked.records] == pytest.approx([0.040, 0.040])
    # Replica 1 records only its real batch; the dummy is not an iteration of its own.
    assert locked.replica_iterations == (2, 1)


def test_lockstep_of_one_replica_is_a_plain_engine():
    requests = ms_stream([0, 3, 7, 40], [10, 30, 5, 60], [4, 2, 6, 3])
    plain = run(requests, model=PER_TOKEN)
    locked = run(requests, lockstep=True, model=PER_TOKEN)
    assert [r.finish_s for r in plain.records] == [r.finish_s for r in locked.records]


def test_noise_per_replica():
    # Replica 0 draws the single engine's noise; the others their own streams.
    requests = ms_stream([0, 0], [10, 10], [6, 6])
    single = run(ms_stream([0], [10], [6]), noise_cv=0.3, seed=5)
    double = run(requests, replicas=2, noise_cv=0.3, seed=5)
    assert double.records[0].finish_s == pytest.approx(single.records[0].finish_s)
    assert double.records[1].finish_s != pytest.approx(double.records[0].finish_s)


def test_scenario_checks_replicas():
    with pytest.raises(ServingError, match=r"scenario\.replicas: must be >= 1, got 0"):
        Scenario(replicas=0)
    # one engine each: a billion of them would exhaust memory before the first step
    assert Scenario(replicas=MAX_REPLICAS).replicas == MAX_REPLICAS
    with pytest.raises(ServingError, match=r"scenario\.replicas: must be <= 1024, got 1000000000"):
        Scenario(replicas=10**9)
    from schedlab.serving.policies import PolicyContext
    from schedlab.serving.policy_registry import make_policy

    policy = make_policy("vllm", PolicyContext(FLAT, SMALL, 0.025, None))
    with pytest.raises(ServingError, match="several replicas need a policy by name"):
        Scenario(policy, FLAT, replicas=2)
