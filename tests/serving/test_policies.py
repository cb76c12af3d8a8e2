"""Policies on hand-made engine states, the registry, and SLO-derived budgets."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from schedlab.errors import ServingError, UnknownNameError
from schedlab.serving import view as rules
from schedlab.serving.cost_model import SLOWEAVE_DEFAULT
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.fluid import FluidLoad, headroom
from schedlab.serving.policies import PolicyContext, slo_token_budget
from schedlab.serving.policy_registry import make_policy


@dataclass
class Req:
    index: int
    prompt: int
    done: int = 0
    admitted: bool = False
    held_hits: int = 0

    @property
    def target(self) -> int:
        return self.prompt


@dataclass
class View:
    """A hand-made engine state (satisfies EngineView)."""

    candidates: list[Req]
    n_decode: int = 10
    decode_kv: int = 0
    decode_kv_max: int | None = None
    decode_kv_min: int | None = None
    free_blocks: int = 10**6
    free_seats: int = 100
    now_s: float = 5.0
    last_token_s: float = 5.0
    admitting: bool = True
    config: EngineConfig = field(
        default_factory=lambda: EngineConfig(max_num_seqs=16, max_num_batched_tokens=64)
    )

    @property
    def has_prefill_work(self) -> bool:
        return bool(self.candidates)

    def prefill_candidates(self):
        return iter(self.candidates)

    def chunk_blocks(self, request, chunk):
        return rules.chunk_blocks(self.config, request, chunk)

    def max_chunk(self, request, free_blocks):
        return rules.max_chunk(self.config, request, free_blocks)

    def admissible(self, request, free_blocks):
        return rules.admissible(self.config, request, free_blocks)

    def take(self, request, chunk):
        self.free_blocks -= self.chunk_blocks(request, chunk)
        self.free_seats -= 0 if request.admitted else 1
        return True


def plan_of(spec, view, tpot=0.025):
    policy = make_policy(spec, PolicyContext(SLOWEAVE_DEFAULT, view.config, tpot))
    return [(r.index, c) for r, c in policy.plan(view)]


def two():
    return [Req(0, 100, done=70, admitted=True), Req(1, 40)]


def test_vllm_fills_the_budget_after_decodes():
    # Budget 64 - 10 decodes = 54: the partial prefill's 30 left, then 24 of the next.
    assert plan_of("vllm", View(two())) == [(0, 30), (1, 24)]


def test_fixed_chunk_caps_prefill_tokens():
    assert plan_of("fixed:16", View(two())) == [(0, 16)]
    assert plan_of("fixed:45", View(two())) == [(0, 30), (1, 15)]


def test_sarathi_budget_counts_decodes():
    # tau = 50 with 10 decodes leaves 40 prefill tokens.
    assert plan_of("sarathi:50", View(two())) == [(0, 30), (1, 10)]


def test_whole_prefill_never_splits():
    view = View([Req(0, 30), Req(1, 40)])
    assert plan_of("whole-prefill", view) == [(0, 30)]  # 40 more would exceed 54
    # A prompt longer than the whole budget runs alone rather than never.
    assert plan_of("whole-prefill", View([Req(0, 500), Req(1, 5)])) == [(0, 500)]


def test_seats_and_kv_limit_the_plan():
    # No free seat: only the admitted partial prefill continues.
    assert plan_of("vllm", View(two(), free_seats=0)) == [(0, 30)]
    # One free block beyond the partial's last (70 tokens -> 5 blocks): the partial still
    # asks for its 30 tokens (7 blocks in all, 2 new) and the engine will preempt for it,
    # as vLLM's running phase does; nothing can be admitted after it (free is gone).
    assert plan_of("vllm", View(two(), free_blocks=1)) == [(0, 30)]
    # A waiting prompt of 40 tokens needs 3 blocks: with 2 free it is not admitted.
    assert plan_of("whole-prefill", View([Req(0, 40)], free_blocks=2)) == []
    assert plan_of("vllm", View([Req(0, 40)], free_blocks=2)) == []  # the gate: 3 > 2
    # SLOWeave sizes chunks to the free blocks instead: room = 6*16 - 70 = 26 tokens.
    big = EngineConfig(max_num_seqs=16, max_num_batched_tokens=8192)
    assert plan_of("sloweave", View(two(), free_blocks=1, n_decode=0, config=big)) == [(0, 26)]


def test_sloweave_chunks_against_the_deadline():
    config = EngineConfig(max_num_seqs=128, max_num_batched_tokens=8192)
    # 128 decodes, D = 10 ms, last token at now: 218 tokens fit (test_sloweave).
    view = View([Req(0, 5000)], n_decode=128, config=config)
    assert plan_of("sloweave", view, tpot=0.010) == [(0, 218)]
    # A short prompt goes whole; the next chunk is sized with it in the batch:
    # 0.40 + 0.006 (50 + c) <= 1.71 ms -> c <= 168.3.
    view = View([Req(0, 50), Req(1, 5000)], n_decode=128, config=config)
    assert plan_of("sloweave", view, tpot=0.010) == [(0, 50), (1, 168)]
    # An iteration that starts 1.5 ms after the decodes' last token has 1.5 ms less.
    late = View([Req(0, 5000)], n_decode=128, config=config, now_s=5.0015)
    assert plan_of("sloweave", late, tpot=0.010) == []  # 8.29 + 0.406 > 8.5 ms


def test_sloweave_records_decode_only_misses():
    config = EngineConfig(max_num_seqs=256, max_num_batched_tokens=8192)
    policy = make_policy("sloweave", PolicyContext(SLOWEAVE_DEFAULT, config, 0.010))
    # 200 decodes take 12.25 ms > 10 ms: decode-only, and the miss is counted.
    assert policy.plan(View([Req(0, 100)], n_decode=200, config=config)) == []
    assert policy.stats == {"decode_only_misses": 1}


def test_sangam_deficit_admits_whole_prompts_when_paid_for():
    config = EngineConfig(max_num_seqs=128, max_num_batched_tokens=8192)
    policy = make_policy("sangam:100", PolicyContext(SLOWEAVE_DEFAULT, config, 0.025))
    head = [Req(0, 200)]
    # 10 decodes: the counter gains 100 - 10 = 90 per iteration: 90, 180, 270 >= 200.
    assert policy.plan(View(head)) == []
    assert policy.plan(View(head)) == []
    assert [(r.index, c) for r, c in policy.plan(View(head))] == [(0, 200)]
    # 70 left; an empty queue resets it, so 90 is all the next prompt finds.
    assert policy.plan(View([])) == []
    assert policy.plan(View([Req(1, 95)])) == []
    # With no decode running the head goes at once.
    assert [(r.index, c) for r, c in policy.plan(View([Req(2, 5000)], n_decode=0))] == [(2, 5000)]


def test_slo_token_budget_hand_solved():
    # D = 10 ms: the binding batch is tau - 1 decodes plus a 1-token chunk,
    # 1.65 + 0.055 (tau - 1) + 0.006 <= 10 -> tau <= 152.7 -> 152.
    config = EngineConfig()
    assert slo_token_budget(SLOWEAVE_DEFAULT, 0.010, config) == 152
    # D = 25 ms: at most n_D = floor((25 - 1.25) / 0.055) = 431 decodes meet D alone;
    # tau - 1 decodes plus one prefill token: 1.65 + 0.055 (tau - 1) + 0.006 <= 25
    # -> tau <= 425.4 -> 425, whatever max_num_seqs (it once gave 1,801 with 256 seats).
    for seats in (64, 256, 1024, 8192):
        budget = slo_token_budget(SLOWEAVE_DEFAULT, 0.025, EngineConfig(max_num_seqs=seats))
        assert budget == 425
    assert make_policy("sarathi", PolicyContext(SLOWEAVE_DEFAULT, config, 0.025)).name == (
        "sarathi:425"
    )
    # every mix of the budget's tokens whose decodes could meet D alone meets D
    for n in range(426):
        if SLOWEAVE_DEFAULT.iteration_time(n, 0, ()) <= 0.025:
            chunks = ((425 - n, 0),) if n < 425 else ()
            assert SLOWEAVE_DEFAULT.iteration_time(n, 0, chunks) <= 0.025
    with pytest.raises(ServingError, match="even with a one-token batch"):
        slo_token_budget(SLOWEAVE_DEFAULT, 0.0005, config)


@pytest.mark.parametrize("margin_s", [-1e-3, 0.025, 1e9, float("inf"), float("nan")])
def test_sloweave_refuses_a_margin_outside_the_deadline(margin_s):
    # the check of the fluid headroom (schedlab.serving.sloweave.check_margin)
    context = PolicyContext(SLOWEAVE_DEFAULT, EngineConfig(), 0.025, margin_s)
    for spec in ("sloweave", "sloweave-kv"):
        with pytest.raises(ServingError, match="margin: must be >= 0 and below the TPOT"):
            make_policy(spec, context)
    with pytest.raises(ServingError, match="fluid headroom: margin: must be >= 0"):
        headroom(SLOWEAVE_DEFAULT, FluidLoad.of([100], [10]), 0.025, margin_s=margin_s)


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("round-robin", UnknownNameError, "fixed:C"),
        ("fixed", ServingError, "give the chunk size"),
        ("fixed:abc", ServingError, "expected an integer"),
        ("fixed:0", ServingError, "must be >= 1"),
        ("vllm:3", ServingError, "takes no ':' argument"),
        ("sloweave:-4", ServingError, "must be >= 1"),
    ],
)
def test_bad_policy_names(spec, error, message):
    with pytest.raises(error, match=message):
        make_policy(spec, PolicyContext(SLOWEAVE_DEFAULT, EngineConfig(), 0.025))
