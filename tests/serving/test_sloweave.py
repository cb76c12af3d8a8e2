"""SLOWeave's chooser: hand-solved cases, edge cases of docs/design.md ("SLOWeave"), and the
properties proved in proofs/sloweave.md (equal to a linear scan, deadline-safe,
maximal, at most ceil(log2(C_max + 1)) + 1 cost evaluations)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import NonMonotoneCostModelError, ServingError
from schedlab.serving.cost_model import SLOWEAVE_DEFAULT, LinearAttentionCostModel
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.policies import PolicyContext
from schedlab.serving.policy_registry import make_policy
from schedlab.serving.sloweave import (
    SLOWeaveState,
    choose_chunk,
    deadline_safe_chunk,
    linear_scan_chunk,
)

MS = 1e-3


def state(n=128, budget_ms=10.0, remaining=5000, prior=0, fixed=(), kv=0, now=100.0):
    return SLOWeaveState(now, now + budget_ms * MS, n, kv, remaining, prior, tuple(fixed))


def test_hand_solved_default_model():
    # T(128, 0) = 0.35 + 0.90 + 0.055*128 = 8.29 ms; with D = 10 ms the chunk may add
    # 0.40 + 0.006 c <= 1.71 ms, so c <= 218.33 -> 218.
    decision = choose_chunk(state(), SLOWEAVE_DEFAULT)
    assert decision.chunk == 218
    assert not decision.deadline_miss
    assert decision.predicted_s == pytest.approx((8.29 + 0.4 + 0.006 * 218) * MS)
    # A margin of 0.3 ms leaves 1.01 ms for the chunk term: c <= 101/0.6 = 168.33 -> 168.
    assert choose_chunk(state(), SLOWEAVE_DEFAULT, margin_s=0.3 * MS).chunk == 168


def test_edge_cases():
    model = SLOWEAVE_DEFAULT
    # No decodes: no deadline, prefill up to the cap, no cost evaluation.
    d = choose_chunk(state(n=0, budget_ms=-5.0, remaining=5000), model, c_max=3000)
    assert (d.chunk, d.evaluations, d.deadline_miss) == (3000, 0, False)
    assert choose_chunk(state(n=0, remaining=70), model, c_max=3000).chunk == 70
    assert choose_chunk(state(n=0), model, cap=12).chunk == 12
    # Nothing to prefill: the decode-only iteration is still checked, so a miss is
    # recorded (8.29 ms > 8 ms) and a met deadline is not.
    d = choose_chunk(state(remaining=0), model)
    assert (d.chunk, d.evaluations, d.deadline_miss) == (0, 1, False)
    d = choose_chunk(state(remaining=0, budget_ms=8.0), model)
    assert (d.chunk, d.evaluations, d.deadline_miss) == (0, 1, True)
    # Decode-only iteration already misses the budget (8.29 ms > 8 ms): chunk 0, miss.
    d = choose_chunk(state(budget_ms=8.0), model)
    assert (d.chunk, d.evaluations, d.deadline_miss) == (0, 1, True)
    # Decode-only fits but no chunk does: 8.29 + 0.406 > 8.5 -> chunk 0, no miss.
    d = choose_chunk(state(budget_ms=8.5), model)
    assert (d.chunk, d.deadline_miss) == (0, False)
    # Whole remaining prompt fits.
    assert choose_chunk(state(remaining=100), model).chunk == 100


def test_evaluation_bound_is_reached():
    # A budget nothing exceeds: the search climbs to C_max = 4096 in exactly
    # 1 + ceil(log2(4097)) = 14 evaluations, the bound of the proof.
    d = choose_chunk(state(budget_ms=1e6, remaining=10**6), SLOWEAVE_DEFAULT, c_max=4096)
    assert d.chunk == 4096
    assert d.evaluations == 1 + math.ceil(math.log2(4097))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"c_max": 0}, r"c_max:? must be >= 1"),
        ({"margin_s": -1e-3}, r"margin(_s:)? must be >= 0"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ServingError, match=message):
        choose_chunk(state(), SLOWEAVE_DEFAULT, **kwargs)
    with pytest.raises(ServingError, match=message):
        linear_scan_chunk(state(), SLOWEAVE_DEFAULT, **kwargs)


def test_negative_remaining_is_refused():
    with pytest.raises(ServingError, match=r"^choose_chunk: state.remaining: must be >= 0"):
        choose_chunk(state(remaining=-1), SLOWEAVE_DEFAULT)
    with pytest.raises(ServingError, match="remaining prompt"):
        deadline_safe_chunk(state(remaining=-1), SLOWEAVE_DEFAULT)


@dataclass(frozen=True)
class TiledModel:
    """Monotone but with plateaus: chunk work is paid in whole tiles of ``tile`` tokens."""

    base_s: float
    per_decode_s: float
    per_tile_s: float
    tile: int
    name: str = "tiled"
    margin_s: float = 0.0

    def iteration_time(self, n_decode, decode_kv, chunks):
        tokens = sum(c for c, _ in chunks)
        return (
            self.base_s + self.per_decode_s * n_decode + self.per_tile_s * -(-tokens // self.tile)
        )

    def to_dict(self):
        return {"kind": "tiled"}


coefficient = st.floats(0.0, 2.0, allow_nan=False).map(lambda x: x * MS)
small_coefficient = st.floats(0.0, 0.1, allow_nan=False).map(lambda x: x * MS)
tiny_coefficient = st.floats(0.0, 1e-6, allow_nan=False).map(lambda x: x * MS)

linear_models = st.builds(
    LinearAttentionCostModel,
    base_s=coefficient,
    decode_fixed_s=coefficient,
    decode_per_seq_s=small_coefficient,
    decode_per_kv_s=tiny_coefficient,
    prefill_fixed_s=coefficient,
    prefill_per_token_s=st.floats(0.0, 0.02, allow_nan=False).map(lambda x: x * MS),
    prefill_attention_s=tiny_coefficient,
)
tiled_models = st.builds(
    TiledModel,
    base_s=coefficient,
    per_decode_s=small_coefficient,
    per_tile_s=coefficient,
    tile=st.integers(1, 512),
)
states = st.builds(
    SLOWeaveState,
    now_s=st.floats(0, 1e4, allow_nan=False),
    next_deadline_s=st.just(0.0),  # replaced below: now + budget
    n_decode=st.integers(0, 300),
    decode_kv=st.integers(0, 10**6),
    remaining=st.integers(0, 5000),
    prior=st.integers(0, 8000),
    fixed_chunks=st.lists(st.tuples(st.integers(1, 600), st.integers(0, 4000)), max_size=2).map(
        tuple
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    model=st.one_of(linear_models, tiled_models),
    base=states,
    budget_ms=st.floats(-1.0, 40.0, allow_nan=False),
    c_max=st.integers(1, 4096),
    cap=st.one_of(st.none(), st.integers(0, 5000)),
    margin_ms=st.floats(0.0, 2.0, allow_nan=False),
)
def test_binary_search_equals_linear_scan(model, base, budget_ms, c_max, cap, margin_ms):
    s = SLOWeaveState(
        base.now_s,
        base.now_s + budget_ms * MS,
        base.n_decode,
        base.decode_kv,
        base.remaining,
        base.prior,
        base.fixed_chunks,
    )
    margin = margin_ms * MS
    fast = choose_chunk(s, model, c_max=c_max, margin_s=margin, cap=cap)
    slow = linear_scan_chunk(s, model, c_max=c_max, margin_s=margin, cap=cap)
    assert (fast.chunk, fast.deadline_miss) == (slow.chunk, slow.deadline_miss)
    # Evaluation bound of proofs/sloweave.md.
    assert fast.evaluations <= math.ceil(math.log2(c_max + 1)) + 1
    upper = min(c_max, s.remaining, cap if cap is not None else c_max)
    assert 0 <= fast.chunk <= upper
    if s.n_decode == 0 or upper == 0:
        assert fast.chunk == upper
        return

    def cost(c):
        chunks = (*s.fixed_chunks, (c, s.prior)) if c else s.fixed_chunks
        return model.iteration_time(s.n_decode, s.decode_kv, chunks)

    budget = s.next_deadline_s - s.now_s - margin
    if fast.deadline_miss:
        assert fast.chunk == 0 and cost(0) > budget
    else:
        # Deadline safety and maximality.
        assert cost(fast.chunk) <= budget
        assert fast.chunk == upper or cost(fast.chunk + 1) > budget


def test_sloweave_refuses_a_non_monotone_model():
    # A fit with a negative per-token prefill coefficient: bigger chunks look cheaper.
    model = LinearAttentionCostModel(
        name="bad-fit", base_s=1 * MS, prefill_fixed_s=1 * MS, prefill_per_token_s=-1e-7
    )
    ctx = PolicyContext(model, EngineConfig(), 0.025)
    with pytest.raises(NonMonotoneCostModelError, match=r"bad-fit.*T\(c=2\)"):
        make_policy("sloweave", ctx)


def test_a_spread_aware_model_is_evaluated_with_the_decodes_spread():
    # With the calibrated RTX PRO 6000 model (decode_spread), the engine gives SLOWeave
    # the running decodes' longest and shortest KV, so its prediction is the actual
    # iteration time: with the exact model no iteration with decodes overruns the TPOT.
    from schedlab.serving.metrics import SLO
    from schedlab.serving.scenario import Scenario
    from schedlab.serving.simulator import simulate

    tpot = 0.05
    scenario = Scenario("sloweave", "rtxpro6000_llama-3.1-8b", SLO(5.0, tpot), seed=0)
    result = simulate("mixed", scenario, rate=2.0, duration_s=60.0, record_batches=True)
    with_decodes = [b for b in result.run.batches if b.decodes]
    assert len(with_decodes) > 1000
    assert max(b.end_s - b.start_s for b in with_decodes) <= tpot * (1 + 1e-12)
    assert result.summary.attainment == 1.0
